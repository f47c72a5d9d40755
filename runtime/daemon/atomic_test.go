package daemon

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// TestCheckAtomicCommits: a store whose put-if-absent overwrites (an S3
// server ignoring If-None-Match) is refused, the error naming the store and
// the opt-in; single-writer mode writes anyway with a warning; stores that
// honour it, MinIO included, pass.
func TestCheckAtomicCommits(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	broken := storage.NewFaulty(storage.NewMem())
	broken.IgnorePutIfAbsent(true)
	err := CheckAtomicCommits(t.Context(), broken, false, logger)
	if !errors.Is(err, storage.ErrNotAtomic) {
		t.Fatalf("err = %v, want ErrNotAtomic", err)
	}
	for _, want := range []string{broken.URI(), "storage.single_writer", SingleWriterEnv, "--single-writer"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if err := CheckAtomicCommits(t.Context(), broken, true, logger); err != nil {
		t.Errorf("single writer: %v", err)
	}
	if !strings.Contains(logs.String(), "single-writer mode") {
		t.Errorf("single writer: no warning logged: %q", logs.String())
	}

	if err := CheckAtomicCommits(t.Context(), storage.NewMem(), false, logger); err != nil {
		t.Errorf("mem store: %v", err)
	}
	cfg := testenv.MinIO(t)
	s3, err := storage.Open(t.Context(), "s3://"+cfg.Bucket+"/table", storage.Options{Endpoint: cfg.Endpoint, AccessKey: cfg.AccessKey, SecretKey: string(cfg.SecretKey)})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckAtomicCommits(t.Context(), s3, false, logger); err != nil {
		t.Errorf("minio: %v", err)
	}
}
