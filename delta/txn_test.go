package delta

import (
	"slices"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/storage"
)

// retentionTable is a test table with delta.setTransactionRetentionDuration
// set to one hour and three txns: updated 2 h ago (expired), 40 min ago
// (past half the retention) and 10 min ago.
func retentionTable(t *testing.T) (*Table, *Snapshot, time.Time) {
	t.Helper()
	tbl := NewTable(storage.NewMem())
	s, err := tbl.Create(t.Context(), testSchema(), []string{"part"}, map[string]string{txnRetentionKey: "interval 1 hours"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var actions []Action
	for app, age := range map[string]time.Duration{"expired": 2 * time.Hour, "stale": 40 * time.Minute, "fresh": 10 * time.Minute} {
		ms := now.Add(-age).UnixMilli()
		actions = append(actions, Action{Txn: &Txn{AppID: app, Version: 7, LastUpdated: &ms}})
	}
	if _, err := tbl.Commit(t.Context(), s, actions, Operation{Name: "STREAMING UPDATE"}); err != nil {
		t.Fatal(err)
	}
	return tbl, s, now
}

// TestTxnExpiry: with delta.setTransactionRetentionDuration, a txn not
// updated within the retention is forgotten, by the snapshot and by its
// checkpoint, as Spark and delta-kernel forget it. This is the loss
// StaleTxns exists to prevent.
func TestTxnExpiry(t *testing.T) {
	tbl, _, _ := retentionTable(t)
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s.TxnVersion("expired"); ok {
		t.Errorf("expired txn still has version %d", v)
	}
	if got := s.Txns(); len(got) != 2 || got["stale"] != 7 || got["fresh"] != 7 {
		t.Errorf("txns = %v, want stale and fresh at 7", got)
	}
	if err := tbl.Checkpoint(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	for _, a := range readAll(t, tbl.Store(), CheckpointKey(s.Version())) {
		if a.Txn != nil && a.Txn.AppID == "expired" {
			t.Errorf("checkpoint keeps the expired txn")
		}
	}
}

// TestStaleTxnsRefresh: the txns past half the retention come back with the
// same version and lastUpdated now; committed, they are fresh again.
func TestStaleTxnsRefresh(t *testing.T) {
	tbl, s, now := retentionTable(t)
	stale := s.StaleTxns([]string{"expired", "stale", "fresh", "unknown"}, now)
	if len(stale) != 1 || stale[0].AppID != "stale" || stale[0].Version != 7 || *stale[0].LastUpdated != now.UnixMilli() {
		t.Fatalf("stale txns = %+v, want only 'stale' at version 7, updated now", stale)
	}
	if _, err := tbl.Commit(t.Context(), s, []Action{{Txn: &stale[0]}}, Operation{Name: "STREAMING UPDATE"}); err != nil {
		t.Fatal(err)
	}
	if got := s.StaleTxns([]string{"stale"}, now.Add(29*time.Minute)); len(got) != 0 {
		t.Errorf("refreshed txn is stale again 29 min later: %+v", got)
	}
	if v, ok := s.TxnVersion("stale"); !ok || v != 7 {
		t.Errorf("refreshed txn version = %d %v", v, ok)
	}
	if got := (&Snapshot{metadata: &Metadata{}}).StaleTxns([]string{"stale"}, now); got != nil {
		t.Errorf("no retention: stale txns %+v, want none", got)
	}
}

// TestTxnLastUpdatedAlwaysWritten: a txn committed without lastUpdated is
// written with the commit's timestamp, so the table's retention applies to
// it (without one it would never expire, and never need refreshing).
func TestTxnLastUpdatedAlwaysWritten(t *testing.T) {
	tbl, s := newTestTable(t, storage.NewMem())
	actions := []Action{{Txn: &Txn{AppID: "app", Version: 3}}}
	v, err := tbl.Commit(t.Context(), s, actions, Operation{Name: "STREAMING UPDATE"})
	if err != nil {
		t.Fatal(err)
	}
	if actions[0].Txn.LastUpdated != nil {
		t.Errorf("the caller's txn was changed")
	}
	data, err := tbl.Store().Get(t.Context(), CommitKey(v))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := ParseActions(CommitKey(v), data)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(stored, func(a Action) bool { return a.Txn != nil })
	if i < 0 || stored[i].Txn.LastUpdated == nil || *stored[i].Txn.LastUpdated != stored[0].CommitInfo.Timestamp {
		t.Fatalf("stored txn %+v, want lastUpdated = the commit timestamp", stored[i].Txn)
	}
}
