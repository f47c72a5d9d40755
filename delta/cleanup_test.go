package delta

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// buildCleanupTable writes versions 0..25 on local disk with checkpoints at
// 10 and 20 and a .crc file beside commits 5 and 12, then ages commits 0..15
// (and their checkpoint and .crc files) to 33 days ago, past the default
// delta.logRetentionDuration of 30 days.
func buildCleanupTable(t *testing.T, config map[string]string) (dir string, tbl *Table) {
	t.Helper()
	dir = t.TempDir()
	store := localStore(t, dir)
	tbl = NewTable(store)
	s, err := tbl.Create(t.Context(), testSchema(), []string{"part"}, config)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 25; i++ {
		appendCommit(t, tbl, s, fmt.Sprintf("part=a/f%d.parquet", i), &Txn{AppID: "app", Version: int64(i)})
		if s.CheckpointDue() {
			if err := tbl.Checkpoint(t.Context(), s); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, v := range []int64{5, 12} {
		if err := store.Put(t.Context(), fmt.Sprintf("%s%020d.crc", LogDir, v), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-33 * 24 * time.Hour)
	objs, _ := store.List(t.Context(), LogDir, "")
	for _, o := range objs {
		if v, _, _, _, ok := ParseLogFileName(o.Key); ok && v >= 0 && v <= 15 {
			if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(o.Key)), old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir, tbl
}

func logKeys(t *testing.T, tbl *Table) []string {
	t.Helper()
	objs, err := tbl.Store().List(t.Context(), LogDir, "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}

// TestCleanupLog: expired commits, checkpoints and .crc files before the
// newest checkpoint at or below the last expired commit go; the table reads
// the same, here and in delta-rs.
func TestCleanupLog(t *testing.T) {
	dir, tbl := buildCleanupTable(t, nil)
	before, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := snapshotView(t, before)
	all := logKeys(t, tbl)

	deleted, err := tbl.CleanupLog(t.Context(), before)
	if err != nil {
		t.Fatal(err)
	}
	// Commit 15 is the last expired one; checkpoint 10 is the newest at or
	// below it, so it, its commit and everything after stay.
	var wantDeleted []string
	for v := range 10 {
		wantDeleted = append(wantDeleted, CommitKey(int64(v)))
	}
	wantDeleted = append(wantDeleted, fmt.Sprintf("%s%020d.crc", LogDir, 5))
	slices.Sort(wantDeleted)
	slices.Sort(deleted)
	if !slices.Equal(deleted, wantDeleted) {
		t.Fatalf("deleted %v\nwant    %v", deleted, wantDeleted)
	}
	left := logKeys(t, tbl)
	if wantLeft := slices.DeleteFunc(all, func(k string) bool { return slices.Contains(wantDeleted, k) }); !slices.Equal(left, wantLeft) {
		t.Fatalf("left %v\nwant %v", left, wantLeft)
	}
	for _, k := range []string{CheckpointKey(10), CommitKey(10), CheckpointKey(20), LastCheckpointKey} {
		if !slices.Contains(left, k) {
			t.Errorf("%s was deleted", k)
		}
	}

	after, err := NewTable(tbl.Store()).Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := snapshotView(t, after); got != want {
		t.Fatalf("after cleanup:\n%s\nbefore:\n%s", got, want)
	}
	if s, err := tbl.SnapshotAt(t.Context(), 10); err != nil || s.NumFiles() != 10 {
		t.Fatalf("version 10, at the kept checkpoint: %v", err)
	}
	if _, err := tbl.SnapshotAt(t.Context(), 9); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("version 9 is gone: got %v", err)
	}
	// A second run finds nothing more to delete.
	if again, err := tbl.CleanupLog(t.Context(), after); err != nil || len(again) != 0 {
		t.Fatalf("second cleanup: %v %v", again, err)
	}
	compareWithDeltaRS(t, tbl, dir, false, "app")
}

// TestCleanupLogDisabled: delta.enableExpiredLogCleanup=false keeps all.
func TestCleanupLogDisabled(t *testing.T) {
	_, tbl := buildCleanupTable(t, map[string]string{"delta.enableExpiredLogCleanup": "false"})
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	all := logKeys(t, tbl)
	if deleted, err := tbl.CleanupLog(t.Context(), s); err != nil || len(deleted) != 0 {
		t.Fatalf("deleted %v (%v)", deleted, err)
	}
	if left := logKeys(t, tbl); !slices.Equal(left, all) {
		t.Fatalf("left %v, had %v", left, all)
	}
}

// TestCleanupLogNothingExpired: with a long retention no commit is old
// enough and nothing goes.
func TestCleanupLogNothingExpired(t *testing.T) {
	_, tbl := buildCleanupTable(t, map[string]string{"delta.logRetentionDuration": "interval 365 days"})
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if deleted, err := tbl.CleanupLog(t.Context(), s); err != nil || len(deleted) != 0 {
		t.Fatalf("deleted %v (%v)", deleted, err)
	}
}
