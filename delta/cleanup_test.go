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

// TestCleanupLogV2Checkpoint: on Spark's tables with V2 checkpoints, the
// UUID-named checkpoint and its sidecars stay while they are the kept
// checkpoint, and go once a newer checkpoint is kept; an old sidecar no
// checkpoint names goes, a young one (a checkpoint may be being written)
// stays, and the table reads the same rows throughout.
func TestCleanupLogV2Checkpoint(t *testing.T) {
	for _, name := range []string{"v2checkpoint", "v2checkpoint-parquet"} {
		t.Run(name, func(t *testing.T) {
			dir, _ := sparkFixture(t, name)
			tbl := NewTable(localStore(t, dir))
			cps, _ := filepath.Glob(logPath(dir, "00000000000000000003.checkpoint.*"))
			sidecars, _ := filepath.Glob(filepath.Join(dir, "_delta_log", "_sidecars", "*.parquet"))
			if len(cps) != 1 || len(sidecars) != 1 {
				t.Fatalf("fixture: checkpoints %v, sidecars %v", cps, sidecars)
			}
			uuidCheckpoint := LogDir + filepath.Base(cps[0])
			sidecar := SidecarDir + filepath.Base(sidecars[0])
			data, err := os.ReadFile(sidecars[0])
			if err != nil {
				t.Fatal(err)
			}
			oldOrphan, youngOrphan := SidecarDir+"old-orphan.parquet", SidecarDir+"young-orphan.parquet"
			for _, k := range []string{oldOrphan, youngOrphan} {
				if err := tbl.Store().Put(t.Context(), k, data); err != nil {
					t.Fatal(err)
				}
			}
			age := func(keys ...string) {
				t.Helper()
				old := time.Now().Add(-33 * 24 * time.Hour)
				for _, k := range keys {
					if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(k)), old, old); err != nil {
						t.Fatal(err)
					}
				}
			}
			cleanup := func(wantDeleted ...string) {
				t.Helper()
				s, err := tbl.Snapshot(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				want := snapshotRows(t, tbl, s)
				deleted, err := tbl.CleanupLog(t.Context(), s)
				if err != nil {
					t.Fatal(err)
				}
				slices.Sort(deleted)
				slices.Sort(wantDeleted)
				if !slices.Equal(deleted, wantDeleted) {
					t.Fatalf("deleted %v\nwant    %v", deleted, wantDeleted)
				}
				after, err := NewTable(tbl.Store()).Snapshot(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if got := snapshotRows(t, tbl, after); !slices.Equal(got, want) {
					t.Fatalf("rows after cleanup:\n%v\nbefore:\n%v", got, want)
				}
			}

			// Commits 0..4 expired: the V2 checkpoint at 3 is the kept one,
			// with the sidecar it names.
			age(CommitKey(0), CommitKey(1), CommitKey(2), CommitKey(3), CommitKey(4), uuidCheckpoint, sidecar, oldOrphan)
			cleanup(CommitKey(0), CommitKey(1), CommitKey(2), oldOrphan)
			left := logKeys(t, tbl)
			for _, k := range []string{uuidCheckpoint, sidecar, youngOrphan} {
				if !slices.Contains(left, k) {
					t.Errorf("%s was deleted", k)
				}
			}

			// Our checkpoint at 5 (V2, as the table asks), expired with its
			// commit and sidecar: the older V2 checkpoint and its sidecar
			// are no longer needed.
			s, err := tbl.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			before := logKeys(t, tbl)
			if err := tbl.Checkpoint(t.Context(), s); err != nil {
				t.Fatal(err)
			}
			ours := slices.DeleteFunc(logKeys(t, tbl), func(k string) bool { return slices.Contains(before, k) })
			if len(ours) != 2 {
				t.Fatalf("checkpoint wrote %v, want a V2 checkpoint and its sidecar", ours)
			}
			age(append(ours, CommitKey(5))...)
			cleanup(CommitKey(3), CommitKey(4), uuidCheckpoint, sidecar)
			left = logKeys(t, tbl)
			for _, k := range append(ours, youngOrphan) {
				if !slices.Contains(left, k) {
					t.Errorf("%s was deleted", k)
				}
			}
		})
	}
}

// TestCleanupLogCompacted: a log compaction file goes with the commits it
// covers once all of them are before the kept checkpoint, not before.
func TestCleanupLogCompacted(t *testing.T) {
	dir, tbl := buildCleanupTable(t, nil)
	covered, straddling := LogDir+fmt.Sprintf("%020d.%020d.compacted.json", 1, 3), LogDir+fmt.Sprintf("%020d.%020d.compacted.json", 8, 12)
	old := time.Now().Add(-33 * 24 * time.Hour)
	for _, k := range []string{covered, straddling} {
		if err := tbl.Store().Put(t.Context(), k, []byte("{}\n")); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(k)), old, old); err != nil {
			t.Fatal(err)
		}
	}
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := tbl.CleanupLog(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	// Checkpoint 10 is kept (TestCleanupLog).
	if !slices.Contains(deleted, covered) || slices.Contains(deleted, straddling) {
		t.Fatalf("deleted %v; want %s among them and not %s", deleted, covered, straddling)
	}
}
