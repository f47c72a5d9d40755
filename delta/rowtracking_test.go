package delta

import (
	"path/filepath"
	"testing"
)

// TestRowIDsAssignedPerAttempt: on delta-spark 4's row tracking table, an
// append that loses its version to a concurrent append is given row IDs
// above the winner's and its own version as defaultRowCommitVersion, and
// the high-water mark covers both.
func TestRowIDsAssignedPerAttempt(t *testing.T) {
	dir, _ := copyFixture(t, filepath.Join(t.TempDir(), "rowtracking"), "spark4-features", "rowtracking")
	tbl := NewTable(localStore(t, dir))
	winner, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	loser, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	before, err := winner.rowIDHighWaterMark()
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := winner.Schema()
	row, _ := sampleRow(schema)
	v1, err := appendRows(t, tbl, winner, []Row{row, row, row})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := appendRows(t, tbl, loser, []Row{row, row})
	if err != nil {
		t.Fatal(err)
	}
	if v2 != v1+1 {
		t.Fatalf("versions %d and %d", v1, v2)
	}
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	checkRowIDRanges(t, s)
	if hwm, err := s.rowIDHighWaterMark(); err != nil || hwm != before+5 {
		t.Errorf("high-water mark %d (%v), want %d", hwm, err, before+5)
	}
	for _, v := range []int64{v1, v2} {
		data, err := tbl.Store().Get(t.Context(), CommitKey(v))
		if err != nil {
			t.Fatal(err)
		}
		actions, err := ParseActions(CommitKey(v), data)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range actions {
			if a.Add != nil && (a.Add.DefaultRowCommitVersion == nil || *a.Add.DefaultRowCommitVersion != v) {
				t.Errorf("version %d: %s has defaultRowCommitVersion %v", v, a.Add.Path, a.Add.DefaultRowCommitVersion)
			}
		}
	}
}
