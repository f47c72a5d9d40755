package storage_test

import (
	"testing"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
	"github.com/deltaflow/deltaflow/storage/storagetest"
)

func TestLocalConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		s, err := storage.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestMemConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store { return storage.NewMem() })
}

// A Faulty with no rules must be invisible; the hook sees every call.
func TestFaultyConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		f := storage.NewFaulty(storage.NewMem())
		f.Before(func(op storage.Op, key string) error { return nil })
		return f
	})
}

func TestS3Conformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		cfg := testenv.MinIO(t)
		cfg.Prefix = "tables/sensor_events" // keys must be relative to it
		s, err := storage.NewS3(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
