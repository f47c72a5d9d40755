package delta

import (
	"os"
	"path/filepath"
	"testing"
)

// TestV2CheckpointSidecars: a V2 checkpoint spreads a large state's file
// actions over sidecars of a bounded size, and the table reads the same
// from it alone; _last_checkpoint points at its version.
func TestV2CheckpointSidecars(t *testing.T) {
	dir, exp := copyFixture(t, filepath.Join(t.TempDir(), "v2checkpoint"), "spark4-features", "v2checkpoint")
	tbl := NewTable(localStore(t, dir))
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := s.Schema()
	row, m := sampleRow(schema)
	want := exp.Rows
	for range 3 { // three more files: six live adds
		if _, err := appendRows(t, tbl, s, []Row{row}); err != nil {
			t.Fatal(err)
		}
		want = append(want, m)
	}
	lc, err := writeV2Checkpoint(t.Context(), tbl.Store(), s.Version(), s.CheckpointActions(tbl.now()), 4)
	if err != nil {
		t.Fatal(err)
	}
	if lc.NumOfAddFiles != 6 || lc.Version != s.Version() {
		t.Errorf("_last_checkpoint %+v, want version %d with 6 adds", lc, s.Version())
	}
	sidecars, _ := filepath.Glob(filepath.Join(dir, "_delta_log", "_sidecars", "*.parquet"))
	if len(sidecars) != 3 { // Spark's one and our two (4 + 2 adds)
		t.Errorf("sidecars %v, want Spark's and two of ours", sidecars)
	}
	for v := range s.Version() {
		if err := os.Remove(logPath(dir, CommitKey(v)[len(LogDir):])); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	fresh, err := NewTable(localStore(t, dir)).Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if fresh.CheckpointVersion() != s.Version() {
		t.Fatalf("read from checkpoint %d, want ours at %d", fresh.CheckpointVersion(), s.Version())
	}
	checkRows(t, tbl, fresh, want)
}
