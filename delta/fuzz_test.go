package delta

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltaflow/deltaflow/storage"
)

// FuzzParseActions: the log parser never panics; what it accepts encodes
// and parses back to the same actions, and what it rejects is a
// *CorruptLogError naming the file.
func FuzzParseActions(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*", "_delta_log", "*.json"))
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"add":{"path":"a","partitionValues":{"p":null},"size":1,"modificationTime":1,"dataChange":true}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		actions, err := ParseActions("fuzz.json", data)
		if err != nil {
			var cle *CorruptLogError
			if !errors.As(err, &cle) || cle.File != "fuzz.json" {
				t.Fatalf("error is not a CorruptLogError naming the file: %v", err)
			}
			return
		}
		enc, err := EncodeActions(actions)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		again, err := ParseActions("fuzz.json", enc)
		if err != nil || len(again) != len(actions) {
			t.Fatalf("re-parse of our own encoding: %v (%d vs %d actions)", err, len(again), len(actions))
		}
		if enc2, _ := EncodeActions(again); string(enc2) != string(enc) {
			t.Fatalf("encoding is not stable:\n%s\n%s", enc, enc2)
		}
	})
}

// FuzzReadCheckpoint: the checkpoint reader never panics on a damaged
// file; it either reads actions or returns a *CorruptLogError.
func FuzzReadCheckpoint(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*", "_delta_log", "*.checkpoint*.parquet"))
	more, _ := filepath.Glob("testdata/*/_delta_log/*.checkpoint*.parquet")
	for _, p := range append(files, more...) {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
			f.Add(data[:len(data)/2])
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		store := storage.NewMem()
		key := CheckpointKey(1)
		if err := store.Put(context.Background(), key, data); err != nil {
			t.Fatal(err)
		}
		err := ReadCheckpoint(context.Background(), store, []string{key}, func(*Action) error { return nil })
		var cle *CorruptLogError
		if err != nil && !errors.As(err, &cle) {
			t.Fatalf("error is not a CorruptLogError: %v", err)
		}
	})
}
