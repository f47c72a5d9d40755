package delta

import (
	"errors"
	"slices"
	"testing"

	"github.com/deltaflow/deltaflow/storage"
)

// checkpointPaths lists the live add paths of the checkpoint at version.
func checkpointPaths(t *testing.T, store storage.Store, version int64) []string {
	t.Helper()
	var paths []string
	for _, a := range readAll(t, store, CheckpointKey(version)) {
		if a.Add != nil {
			paths = append(paths, a.Add.Path)
		}
	}
	slices.Sort(paths)
	return paths
}

// TestCheckpointFromTheLog: another writer's commit replaced ours at
// version 2 (on a store whose put-if-absent overwrites), so the log holds a
// different file than the committer's snapshot. The checkpoint holds what
// the log says, the snapshot is corrected, and the caller hears of it.
// Before, the checkpoint was written from memory and the foreign commit's
// file vanished from the table.
func TestCheckpointFromTheLog(t *testing.T) {
	store := storage.NewMem()
	tbl, s := newTestTable(t, store)
	appendCommit(t, tbl, s, "part=a/ours-1.parquet", nil)
	appendCommit(t, tbl, s, "part=a/ours-2.parquet", &Txn{AppID: "ours", Version: 2})

	foreign, err := EncodeActions([]Action{
		{CommitInfo: &CommitInfo{Timestamp: 1, Operation: "WRITE"}},
		{Add: fakeAdd("part=a/foreign.parquet", str("a"))},
		{Txn: &Txn{AppID: "theirs", Version: 7}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(t.Context(), CommitKey(2), foreign); err != nil {
		t.Fatal(err)
	}

	err = tbl.Checkpoint(t.Context(), s)
	want := []string{"part=a/foreign.parquet", "part=a/ours-1.parquet"}
	if got := checkpointPaths(t, store, 2); !slices.Equal(got, want) {
		t.Fatalf("checkpoint holds %v, the log %v", got, want)
	}
	if !errors.Is(err, ErrSnapshotDiverged) {
		t.Fatalf("checkpoint err = %v, want ErrSnapshotDiverged", err)
	}
	if _, ok := s.TxnVersion("ours"); ok || s.File("part=a/ours-2.parquet") != nil || s.File("part=a/foreign.parquet") == nil {
		t.Errorf("snapshot not corrected to the log: files %d, txns %v", s.NumFiles(), s.Txns())
	}
	if v, ok := s.TxnVersion("theirs"); !ok || v != 7 || s.CheckpointVersion() != 2 {
		t.Errorf("snapshot: txn theirs %d %v, checkpoint version %d", v, ok, s.CheckpointVersion())
	}
	// Agreeing with the log again, the next checkpoint is quiet.
	appendCommit(t, tbl, s, "part=a/ours-3.parquet", nil)
	if err := tbl.Checkpoint(t.Context(), s); err != nil {
		t.Fatalf("checkpoint after the correction: %v", err)
	}
}

// TestCheckpointKeepsWhatMemoryLost: a snapshot missing an action the log
// holds (here, dropped from memory) does not drop it from the checkpoint.
func TestCheckpointKeepsWhatMemoryLost(t *testing.T) {
	store := storage.NewMem()
	tbl, s := newTestTable(t, store)
	appendCommit(t, tbl, s, "part=a/kept.parquet", nil)
	appendCommit(t, tbl, s, "part=a/other.parquet", nil)
	delete(s.files, s.keyOf("part=a/kept.parquet", nil))

	err := tbl.Checkpoint(t.Context(), s)
	want := []string{"part=a/kept.parquet", "part=a/other.parquet"}
	if got := checkpointPaths(t, store, 2); !slices.Equal(got, want) {
		t.Fatalf("checkpoint holds %v, the log %v", got, want)
	}
	if !errors.Is(err, ErrSnapshotDiverged) {
		t.Fatalf("checkpoint err = %v, want ErrSnapshotDiverged", err)
	}
	if s.File("part=a/kept.parquet") == nil {
		t.Error("snapshot still misses the file")
	}
}
