package delta

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dvSchema is the schema of the table TestDeltaRSReadsOurDeletionVectors
// deletes rows from.
func dvSchema() *StructType {
	return &StructType{Fields: []StructField{
		{Name: "id", Type: Long, Nullable: true},
		{Name: "part", Type: String, Nullable: true},
		{Name: "name", Type: String, Nullable: true},
	}}
}

// enableDeletionVectors commits what Spark's ALTER TABLE SET TBLPROPERTIES
// ('delta.enableDeletionVectors' = true) commits on a reader 1 / writer 2
// table: the property, and reader 3 / writer 7 with the deletionVectors
// feature and the writer features the old version implied.
func enableDeletionVectors(t *testing.T, tbl *Table, s *Snapshot) {
	t.Helper()
	meta := s.Metadata()
	meta.Configuration = maps.Clone(meta.Configuration)
	if meta.Configuration == nil {
		meta.Configuration = map[string]string{}
	}
	meta.Configuration["delta.enableDeletionVectors"] = "true"
	proto := &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"},
		WriterFeatures: []string{"appendOnly", "deletionVectors", "invariants"}}
	op := Operation{Name: "SET TBLPROPERTIES", Parameters: map[string]any{"properties": `{"delta.enableDeletionVectors":"true"}`}}
	if _, err := tbl.Commit(t.Context(), s, []Action{{Protocol: proto}, {MetaData: &meta}}, op); err != nil {
		t.Fatal(err)
	}
}

// deleteWhere deletes the rows del matches as a DELETE with deletion
// vectors does: each file holding such rows is removed and added back
// with a DV of its old deleted rows and these. It returns the version.
func deleteWhere(t *testing.T, tbl *Table, s *Snapshot, del func(Row) bool) int64 {
	t.Helper()
	ctx := t.Context()
	schema, err := s.Schema()
	if err != nil {
		t.Fatal(err)
	}
	var actions []Action
	for _, a := range s.Files() {
		var rows []uint64
		for r, err := range DataFileIndexedRows(ctx, tbl.Store(), schema, s.PartitionColumns(), a) {
			if err != nil {
				t.Fatal(err)
			}
			if del(r.Row) {
				rows = append(rows, r.Index)
			}
		}
		if len(rows) == 0 {
			continue
		}
		old, err := LoadDeletionVector(ctx, tbl.Store(), a.DeletionVector)
		if err != nil {
			t.Fatal(err)
		}
		dv, err := WriteDeletionVector(ctx, tbl.Store(), old.Union(NewRowIndexSet(rows)))
		if err != nil {
			t.Fatal(err)
		}
		remove, add, err := a.WithDeletionVector(dv, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		actions = append(actions, Action{Remove: remove}, Action{Add: add})
	}
	v, err := tbl.Commit(ctx, s, actions, Operation{Name: "DELETE"})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDeltaRSReadsOurDeletionVectors: rows this library deletes with
// deletion vectors (in three files: a few rows, then more of the same
// file; 4500 of 5000, a bitmap container; one row of another file) are gone
// for delta-rs (DataFusion, which applies DVs) at each version, for DuckDB
// (delta-kernel-rs) and for this library, before and after a checkpoint.
func TestDeltaRSReadsOurDeletionVectors(t *testing.T) {
	dir := t.TempDir()
	tbl := NewTable(localStore(t, dir))
	s, err := tbl.Create(t.Context(), dvSchema(), []string{"part"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rows []Row
	add := func(part string, from, n int) {
		for id := from; id < from+n; id++ {
			rows = append(rows, Row{int64(id), part, "n" + strconv.Itoa(id)})
		}
	}
	add("a", 0, 10)
	add("b", 10, 5)
	add("c", 100, 5000)
	if _, err := appendRows(t, tbl, s, rows); err != nil {
		t.Fatal(err)
	}
	enableDeletionVectors(t, tbl, s)

	id := func(r Row) int64 { return r[0].(int64) }
	first := func(r Row) bool {
		return slices.Contains([]int64{1, 4, 7}, id(r)) || r[1] == "c" && id(r)%10 != 0
	}
	second := func(r Row) bool { return slices.Contains([]int64{4, 8, 12}, id(r)) }
	v1 := deleteWhere(t, tbl, s, first)
	afterFirst := live(rows, first)
	deleteWhere(t, tbl, s, second)
	want := live(afterFirst, second)
	if len(afterFirst) != 15-3+500 || len(want) != len(afterFirst)-2 { // 4 was gone already
		t.Fatalf("%d rows left, then %d", len(afterFirst), len(want))
	}

	checkDeltaRSRows(t, dir, []string{"--version", strconv.FormatInt(v1, 10)}, afterFirst)
	check := func() {
		t.Helper()
		checkDeltaRSRows(t, dir, nil, want)
		compareWithDeltaRSArgs(t, tbl, dir, true, []string{"--query", "--duckdb"})
		checkRows(t, tbl, s, rowMaps(want))
		var logical int64
		for _, a := range s.Files() {
			n, _ := a.NumLogicalRecords()
			logical += n
		}
		if logical != int64(len(want)) {
			t.Errorf("record counts less DV cardinalities add up to %d, want %d", logical, len(want))
		}
	}
	check()
	if err := tbl.Checkpoint(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	check()
}

// live is rows without those del matches.
func live(rows []Row, del func(Row) bool) []Row {
	return slices.DeleteFunc(slices.Clone(rows), del)
}

func rowMaps(rows []Row) []map[string]any {
	out := make([]map[string]any, len(rows))
	for i, r := range rows {
		out[i] = map[string]any{"id": r[0], "part": r[1], "name": r[2]}
	}
	return out
}

// checkDeltaRSRows fails unless delta-rs's DataFusion engine reads exactly
// want from the table at dir (args may pick a version).
func checkDeltaRSRows(t *testing.T, dir string, args []string, want []Row) {
	t.Helper()
	got := deltaRS(t, dir, append(args, "--rows", "--query")...)
	if got.RowsError != "" {
		t.Fatalf("delta-rs %v cannot read the rows: %s", args, got.RowsError)
	}
	ours, theirs := canonRows(dvSchema(), rowMaps(want)), canonRows(dvSchema(), got.Rows)
	if !slices.Equal(ours, theirs) {
		t.Errorf("delta-rs %v reads %d rows, want %d:\ndelta-rs: %s\nwant:     %s", args, len(theirs), len(ours),
			strings.Join(head(theirs), "\n          "), strings.Join(head(ours), "\n          "))
	}
}
