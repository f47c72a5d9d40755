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
// updated within the retention is expired for other engines (LiveTxns: Spark
// and delta-kernel forget it) but not for its writer, whose offsets it is,
// nor for our checkpoints: forgetting it would redo what is done, and
// expiry follows the wall clock, which may step.
func TestTxnExpiry(t *testing.T) {
	tbl, _, now := retentionTable(t)
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s.TxnVersion("expired"); !ok || v != 7 {
		t.Errorf("expired txn: version %d, %v; want 7 for its writer", v, ok)
	}
	if got := s.LiveTxns(now); len(got) != 2 || got["stale"] != 7 || got["fresh"] != 7 {
		t.Errorf("live txns = %v, want stale and fresh at 7", got)
	}
	if got := s.LiveTxns(now.Add(24 * time.Hour)); len(got) != 0 {
		t.Errorf("live txns a day later = %v, want none", got)
	}
	if err := tbl.Checkpoint(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, a := range readAll(t, tbl.Store(), CheckpointKey(s.Version())) {
		if a.Txn != nil {
			kept++
		}
	}
	if kept != 3 {
		t.Errorf("checkpoint keeps %d txns; want all 3, the expired one too", kept)
	}
}

// TestTxnHistory: a txn another engine's checkpoint dropped is found in
// the commits before it, newest first; without those commits (log
// cleanup) the search says it is not certain.
func TestTxnHistory(t *testing.T) {
	tbl, s := newTestTable(t, storage.NewMem())
	for _, v := range []int64{3, 9} {
		if _, err := tbl.Commit(t.Context(), s, []Action{{Txn: &Txn{AppID: "app", Version: v}}}, Operation{Name: "STREAMING UPDATE"}); err != nil {
			t.Fatal(err)
		}
	}
	// The checkpoint another engine writes once the txn expired: without it.
	var actions []Action
	for _, a := range s.CheckpointActions(time.Now()) {
		if a.Txn == nil {
			actions = append(actions, a)
		}
	}
	if _, err := WriteCheckpoint(t.Context(), tbl.Store(), s.Version(), actions); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(t.Context(), s, []Action{{Txn: &Txn{AppID: "other", Version: 1}}}, Operation{Name: "STREAMING UPDATE"}); err != nil {
		t.Fatal(err)
	}
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.TxnVersion("app"); ok {
		t.Fatal("the snapshot holds the txn the checkpoint left out")
	}
	found, certain, err := tbl.TxnHistory(t.Context(), s, []string{"app", "other", "never"})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found["app"].Version != 9 || !certain {
		t.Errorf("history found %v, certain %v; want app at 9 (the newest), certain (read back to version 0)", found, certain)
	}
	// Log cleanup deletes the commits the checkpoint covers.
	for v := range s.CheckpointVersion() + 1 {
		if err := tbl.Store().Delete(t.Context(), CommitKey(v)); err != nil {
			t.Fatal(err)
		}
	}
	if s, err = tbl.Snapshot(t.Context()); err != nil {
		t.Fatal(err)
	}
	found, certain, err = tbl.TxnHistory(t.Context(), s, []string{"app"})
	if err != nil || len(found) != 0 || certain {
		t.Errorf("history after cleanup found %v, certain %v, %v; want nothing, not certain", found, certain, err)
	}
}

// TestStaleTxnsRefresh: the txns past half the retention, expired ones
// included, come back with the same version and lastUpdated now; committed,
// they are fresh again.
func TestStaleTxnsRefresh(t *testing.T) {
	tbl, s, now := retentionTable(t)
	stale := s.StaleTxns([]string{"expired", "stale", "fresh", "unknown"}, now)
	if len(stale) != 2 || stale[0].AppID != "expired" || stale[1].AppID != "stale" || stale[1].Version != 7 || *stale[1].LastUpdated != now.UnixMilli() {
		t.Fatalf("stale txns = %+v, want 'expired' and 'stale' at version 7, updated now", stale)
	}
	if _, err := tbl.Commit(t.Context(), s, []Action{{Txn: &stale[1]}}, Operation{Name: "STREAMING UPDATE"}); err != nil {
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
