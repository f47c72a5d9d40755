package actors

import (
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
)

// TestCommitReplacedBehindTheCommitter: another writer's commit replaced
// one of ours in the log (two writers on a store whose put-if-absent
// overwrites). The next checkpoint is built from the log, so the other
// writer's file survives, and the committer, told its snapshot diverged,
// re-reads the partition whose commit was lost and commits it again. Before,
// the checkpoint was written from memory: the other writer's file vanished
// from the table.
func TestCommitReplacedBehindTheCommitter(t *testing.T) {
	h := newHarness(t, nil)
	r := h.start(Config{FlushInterval: 50 * time.Millisecond}, nil)
	defer r.stop(t)
	p0, p1 := ledger.AppID("deltaflow", topic, 0), ledger.AppID("deltaflow", topic, 1)
	stored := func() *delta.Snapshot {
		s, err := h.table.Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	h.produceTo(0, 100, 1)
	waitFor(t, func() bool { v, ok := stored().TxnVersion(p0); return ok && v == 99 })

	// The other writer's commit takes the place of ours.
	lost := stored().Version()
	foreign, err := delta.EncodeActions([]delta.Action{
		{CommitInfo: &delta.CommitInfo{Timestamp: time.Now().UnixMilli(), Operation: "WRITE"}},
		{Add: &delta.Add{Path: "foreign.parquet", Size: 10, ModificationTime: 1, DataChange: true, Stats: `{"numRecords":5}`}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.Put(t.Context(), delta.CommitKey(lost), foreign); err != nil {
		t.Fatal(err)
	}

	// Commits of partition 1 carry the table past its checkpoint at 10.
	for i := int64(1); stored().Version() < 12; i++ {
		h.produceTo(1, 10, 10+i)
		waitFor(t, func() bool { v, _ := stored().TxnVersion(p1); return v == 10*i-1 })
	}
	waitFor(t, func() bool { v, ok := stored().TxnVersion(p0); return ok && v == 99 })
	s := stored()
	if s.CheckpointVersion() < 10 {
		t.Fatalf("no checkpoint: newest is %d", s.CheckpointVersion())
	}
	if s.File("foreign.parquet") == nil {
		t.Fatal("the other writer's file was checkpointed away")
	}
	rows := statsRows(t, s)
	p1Offset, _ := s.TxnVersion(p1)
	if want := 100 + p1Offset + 1 + 5; rows != want {
		t.Errorf("table holds %d rows, want %d (partition 0's 100 once, partition 1's, the other writer's 5)", rows, want)
	}
}
