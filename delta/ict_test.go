package delta

import (
	"errors"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/storage"
)

// TestInCommitTimestampsEnabledLater: on a table that turned in-commit
// timestamps on at version 3, time travel uses modification times before
// it and in-commit timestamps from it on; new commits carry them.
func TestInCommitTimestampsEnabledLater(t *testing.T) {
	store := storage.NewMem()
	tbl, s := newTestTable(t, store) // version 0
	appendCommit(t, tbl, s, "a.parquet", nil)
	start := time.Now()
	meta := s.Metadata()
	meta.Configuration = map[string]string{"delta.enableInCommitTimestamps": "true",
		"delta.inCommitTimestampEnablementVersion": "3", "delta.inCommitTimestampEnablementTimestamp": "0"}
	p := &Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"inCommitTimestamp", "appendOnly", "invariants"}}
	if _, err := tbl.Commit(t.Context(), s, []Action{{Protocol: p}, {MetaData: &meta}}, Operation{Name: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}
	// The clock of the ICT commits is an hour ahead of the store's.
	future := start.Add(time.Hour)
	tbl.now = func() time.Time { return future }
	appendCommit(t, tbl, s, "b.parquet", nil) // version 3
	tbl.now = func() time.Time { return future.Add(time.Minute) }
	appendCommit(t, tbl, s, "c.parquet", nil) // version 4
	if got := s.Timestamp(); !got.Equal(future.Add(time.Minute).Truncate(time.Millisecond)) {
		t.Errorf("snapshot timestamp %s", got)
	}
	for _, tc := range []struct {
		at   time.Time
		want int64
	}{
		{future, 3}, {future.Add(30 * time.Second), 3}, {future.Add(time.Minute), 4}, {future.Add(time.Hour), 4},
		// Before the first in-commit timestamp the commit files decide; the
		// ICT commits' files (written now) must not count.
		{time.Now().Add(time.Second), 2},
	} {
		got, err := tbl.SnapshotAtTime(t.Context(), tc.at)
		if err != nil || got.Version() != tc.want {
			t.Errorf("as of %s: %v, want version %d", tc.at, err, tc.want)
			continue
		}
	}
	if _, err := tbl.SnapshotAtTime(t.Context(), start.Add(-time.Hour)); !errors.Is(err, ErrVersionNotFound) {
		t.Errorf("before the table: %v", err)
	}
	hist, err := tbl.History(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !hist[0].Timestamp.Equal(future.Add(time.Minute).Truncate(time.Millisecond)) || !hist[1].Timestamp.Equal(future.Truncate(time.Millisecond)) {
		t.Errorf("history timestamps %s, %s", hist[0].Timestamp, hist[1].Timestamp)
	}
	// Reloaded, the snapshot's time is version 4's in-commit timestamp.
	fresh, err := tbl.Snapshot(t.Context())
	if err != nil || !fresh.Timestamp().Equal(s.Timestamp()) {
		t.Errorf("reloaded: %v, timestamp %s", err, fresh.Timestamp())
	}
}
