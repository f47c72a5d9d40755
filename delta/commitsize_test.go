package delta

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/storage"
)

// A commit file over MaxCommitFileSize (a broken writer's, a hostile one's)
// is refused with an error naming it, without being read into memory: read
// whole, it would crash a 128 MiB process on every start. Loading, updating
// and committing over it (the file is then the winner of the version) all
// refuse it.
func TestHugeCommitFileRefused(t *testing.T) {
	dir := t.TempDir()
	store, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	tbl, s0 := newTestTable(t, store)
	key := CommitKey(1)
	f, err := os.Create(filepath.Join(dir, filepath.FromSlash(key)))
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: no disk, but 64 MiB to whoever reads it.
	if err := f.Truncate(2 * MaxCommitFileSize); err != nil {
		t.Fatal(err)
	}
	f.Close()

	check := func(what string, op func() error) {
		t.Helper()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := op()
		runtime.ReadMemStats(&after)
		var tooLarge *CommitTooLargeError
		if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "delta.MaxCommitFileSize") {
			t.Errorf("%s: %v, want a CommitTooLargeError naming %s and the cap", what, err, key)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > MaxCommitFileSize/4 {
			t.Errorf("%s allocated %d MiB: the file was read", what, alloc>>20)
		}
	}
	check("Snapshot", func() error { _, err := tbl.Snapshot(t.Context()); return err })
	check("Update", func() error { return tbl.Update(t.Context(), s0) })
	check("History", func() error { _, err := tbl.History(t.Context(), 0); return err })
	check("Commit", func() error {
		_, err := tbl.Commit(t.Context(), s0, []Action{{Add: fakeAdd("a.parquet", str("x"))}}, Operation{Name: "WRITE"})
		return err
	})
}
