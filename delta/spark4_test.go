package delta

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
)

// The delta-spark 4 fixtures (testdata/spark4-features, see its
// generate.py) and what deltaflow may do on each: the feature that refuses
// each operation, "" where it is done.
var spark4Refusals = map[string]map[Op]string{
	"default":                {},
	"cdf":                    {},
	"colmap-readd":           {},
	"typewidening":           {},
	"rowtracking":            {},
	"materialize":            {},
	"clustered":              {},
	"v2checkpoint":           {},
	"variant":                {},
	"variant-shredded":       {},
	"variant-types":          {},
	"variant-types-shredded": {},
}

// spark4Read is one table (at one version, or the latest) for Spark 4 to
// read, and the rows it must find.
type spark4Read struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Version *int64 `json:"version,omitempty"`
	RowIDs  bool   `json:"rowIds"`
	schema  *StructType
	want    []map[string]any
	// check, if set, judges Spark's row ids.
	check func(t *testing.T, rowIDs [][3]int64)
	// types, if set, are the column types Spark must read (simpleString).
	types map[string]string
}

// TestSpark4 checks every delta-spark 4 fixture × operation: the table
// reads as Spark read it at every version; append, OPTIMIZE (then a
// checkpoint) and VACUUM are done, and leave the rows Spark's plus the
// appended ones, or are refused naming the feature; then one Spark 4 JVM
// (scripts/spark4/check.py) reads every table deltaflow wrote and must find
// the same rows.
func TestSpark4(t *testing.T) {
	var reads []*spark4Read
	root := t.TempDir() // outlives the subtests: Spark reads the tables last
	for _, name := range slices.Sorted(maps.Keys(spark4Refusals)) {
		t.Run(name, func(t *testing.T) {
			reads = append(reads, spark4Ops(t, root, name, spark4Refusals[name])...)
		})
	}
	t.Run("ours", func(t *testing.T) {
		reads = append(reads, ourVariantTable(t, root), ourWidenedTable(t, root), ourNestedTable(t, root))
	})
	t.Run("spark", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a Spark 4 JVM")
		}
		checkWithSpark4(t, reads)
	})
}

// ourVariantTable creates a table with a variant column here (the protocol
// the column needs: reader 3 / writer 7 with variantType) and appends a
// row, for Spark to read.
func ourVariantTable(t *testing.T, root string) *spark4Read {
	dir := filepath.Join(root, "ours-variant")
	tbl := NewTable(localStore(t, dir))
	schema := &StructType{Fields: []StructField{{Name: "id", Type: Long, Nullable: true}, {Name: "v", Type: Variant, Nullable: true}}}
	s, err := tbl.Create(t.Context(), schema, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Protocol(); p.MinReaderVersion != 3 || !slices.Contains(p.ReaderFeatures, "variantType") || !slices.Contains(p.WriterFeatures, "variantType") {
		t.Errorf("protocol %+v, want variantType at reader 3 / writer 7", p)
	}
	row, m := sampleRow(schema)
	if _, err := appendRows(t, tbl, s, []Row{row, {int64(2), nil}}); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{m, {"id": int64(2), "v": nil}}
	checkRows(t, tbl, s, want)
	return &spark4Read{Name: "ours/variant", Path: dir, schema: schema, want: want}
}

// ourWidenedTable has EnsureSchema widen a table's columns as Spark's
// fixture typewidening had ALTER COLUMN TYPE widen them
// (widenedLikeSpark): its old files keep INT32, FLOAT and the narrower
// decimals. delta-rs here and Spark 4 must read every row at the new types,
// as Spark read its own table.
func ourWidenedTable(t *testing.T, root string) *spark4Read {
	dir := filepath.Join(root, "ours-typewidening")
	tbl, _, rows := widenedLikeSpark(t, dir)
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := s.Schema()
	// delta-rs 1.6.6 refuses the reader feature (Spark's own widened
	// tables too); delta-kernel-rs, in DuckDB, reads the table.
	rs := deltaRS(t, dir, "--rows", "--duckdb")
	arrow := map[string]string{"id": "int64", "part": "string", "ratio": "double", "small": "int32", "mid": "int64", "n": "double",
		"dec": "decimal128(8, 3)", "i2": "decimal128(12, 2)"}
	want := canonRows(schema, rows)
	if got := canonRows(schema, rs.DuckDBRows); rs.DuckDBError != "" || !slices.Equal(got, want) || !maps.Equal(rs.DuckDBTypes, arrow) {
		t.Errorf("DuckDB reads %s (types %v; %s), want:\n%s (types %v)", strings.Join(got, "\n"), rs.DuckDBTypes, rs.DuckDBError,
			strings.Join(want, "\n"), arrow)
	}
	switch got := canonRows(schema, rs.Rows); {
	case rs.RowsError != "" && !strings.Contains(rs.RowsError, "{'typeWidening'} but these are not yet supported"):
		t.Errorf("delta-rs cannot read the rows, and not for want of the typeWidening feature: %s", rs.RowsError)
	case rs.RowsError == "" && (!slices.Equal(got, want) || !maps.Equal(rs.RowTypes, arrow)):
		t.Errorf("delta-rs reads %s (types %v), want:\n%s (types %v)", strings.Join(got, "\n"), rs.RowTypes, strings.Join(want, "\n"), arrow)
	}
	return &spark4Read{Name: "ours/typewidening", Path: dir, schema: schema, want: rows, types: map[string]string{"id": "bigint",
		"part": "string", "ratio": "double", "small": "int", "mid": "bigint", "n": "double", "dec": "decimal(8,3)", "i2": "decimal(12,2)"}}
}

// spark4Ops runs the operations on copies of fixture name under root and
// returns what Spark must then read.
func spark4Ops(t *testing.T, root, name string, refused map[Op]string) []*spark4Read {
	dir, exp := copyFixture(t, filepath.Join(root, name), "spark4-features", name)
	tbl := NewTable(localStore(t, dir))
	s, err := tbl.Snapshot(t.Context())
	if f := refused[OpRead]; f != "" {
		checkRefusal(t, OpRead, err, f)
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	checkEveryVersion(t, tbl, exp)
	schema, err := s.Schema()
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(exp.Rows)

	// Copy one: append, OPTIMIZE, checkpoint.
	row, m := sampleRow(schema)
	appended, err := appendRows(t, tbl, s, []Row{row, row})
	checkRefusal(t, OpAppend, err, refused[OpAppend])
	var reads []*spark4Read
	if err == nil {
		want = append(want, m, m)
		reads = append(reads, &spark4Read{Name: name + "/append", Path: dir, Version: &appended, want: slices.Clone(want)})
	}
	clustered := map[string]bool{}
	for _, a := range s.Files() {
		if a.ClusteringProvider != nil {
			clustered[a.Path] = true
		}
	}
	res, err := tbl.Optimize(t.Context(), s, OptimizeOptions{TargetSize: 1 << 20})
	checkRefusal(t, OpOptimize, err, refused[OpOptimize])
	for _, a := range s.Files() {
		delete(clustered, a.Path)
	}
	if len(clustered) > 0 {
		t.Errorf("OPTIMIZE rewrote the files a clustering implementation made: %v", slices.Sorted(maps.Keys(clustered)))
	}
	if err == nil && res.Version < 0 {
		t.Errorf("optimize committed nothing (%d bins)", len(res.Bins))
	}
	if err := tbl.Checkpoint(t.Context(), s); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	fresh, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	checkRows(t, tbl, fresh, want)
	checkMaterializedPartitions(t, dir, fresh)
	for _, a := range s.Files() {
		if f := fresh.File(a.Path); a.ClusteringProvider != nil && (f == nil || f.ClusteringProvider == nil) {
			t.Errorf("%s: clusteringProvider lost in the checkpoint", a.Path)
		}
	}
	optimized := &spark4Read{Name: name + "/optimize", Path: dir, want: want}
	if exp.RowIDs != nil {
		checkRowIDRanges(t, fresh)
		optimized.RowIDs, optimized.check = true, func(t *testing.T, got [][3]int64) { checkRowIDs(t, exp.RowIDs, got, appended) }
	}
	reads = append(reads, optimized)
	if fresh.writesV2Checkpoints() {
		reads = append(reads, fromOurCheckpoint(t, root, name, dir, fresh, want))
	}

	// Copy two: VACUUM with no retention.
	vdir, _ := copyFixture(t, filepath.Join(root, name+"-vacuum"), "spark4-features", name)
	vtbl := NewTable(localStore(t, vdir))
	vs, err := vtbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	_, err = vtbl.Vacuum(t.Context(), vs, VacuumOptions{Retention: time.Millisecond, Force: true})
	checkRefusal(t, OpVacuum, err, refused[OpVacuum])
	checkRows(t, vtbl, vs, exp.Rows)
	reads = append(reads, &spark4Read{Name: name + "/vacuum", Path: vdir, want: exp.Rows})
	for _, r := range reads {
		r.schema = schema
	}
	return reads
}

// fromOurCheckpoint copies the table at dir (whose latest version s has a
// checkpoint deltaflow wrote) without the commits before that version and
// without any other checkpoint, so that only ours can rebuild it, and
// checks that it is a V2 checkpoint (UUID-named, checkpointMetadata, file
// actions in sidecars) that reads as want, here and in delta-rs; Spark
// reads it too.
func fromOurCheckpoint(t *testing.T, root, name, dir string, s *Snapshot, want []map[string]any) *spark4Read {
	t.Helper()
	cdir := filepath.Join(root, name+"-checkpoint")
	if err := os.CopyFS(cdir, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	ours := ""
	logFiles, _ := os.ReadDir(filepath.Join(cdir, "_delta_log"))
	for _, e := range logFiles {
		v, kind, _, _, ok := ParseLogFileName(e.Name())
		switch {
		case !ok:
		case kind == LogFileUUIDCheckpoint && v == s.Version():
			ours = e.Name()
			continue
		case kind == LogFileCommit && v >= s.Version():
			continue
		case kind == LogFileLastCheckpoint:
			continue
		}
		if !e.IsDir() {
			if err := os.Remove(filepath.Join(cdir, "_delta_log", e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ours == "" {
		t.Fatalf("no V2 checkpoint at version %d in %v", s.Version(), logFiles)
	}
	data, err := os.ReadFile(filepath.Join(cdir, "_delta_log", ours))
	if err != nil {
		t.Fatal(err)
	}
	actions, err := ParseActions(ours, data)
	if err != nil {
		t.Fatal(err)
	}
	sidecars := 0
	for i, a := range actions {
		switch {
		case i == 0 && (a.CheckpointMetadata == nil || a.CheckpointMetadata.Version != s.Version()):
			t.Errorf("%s starts with %s, want checkpointMetadata version %d", ours, data[:min(len(data), 80)], s.Version())
		case a.Add != nil || a.Remove != nil:
			t.Errorf("%s holds file action %s: they belong in sidecars", ours, data)
		case a.Sidecar != nil:
			sidecars++
		}
	}
	if sidecars == 0 {
		t.Errorf("%s names no sidecar", ours)
	}
	tbl := NewTable(localStore(t, cdir))
	cs, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatalf("read from our checkpoint: %v", err)
	}
	checkRows(t, tbl, cs, want)
	compareWithDeltaRSArgs(t, tbl, cdir, true, []string{"--query"})
	return &spark4Read{Name: name + "/checkpoint", Path: cdir, want: want}
}

// checkMaterializedPartitions fails unless, on a table with the writer
// feature materializePartitionColumns, every live data file holds the
// partition columns (by physical name) behind its data columns.
func checkMaterializedPartitions(t *testing.T, dir string, s *Snapshot) {
	t.Helper()
	var opts WriterOptions
	if err := s.ApplyWriterOptions(&opts); err != nil {
		t.Fatal(err)
	}
	if opts.Partitions == nil {
		return
	}
	for _, a := range s.Files() {
		names := parquetColumns(t, dir, a)
		for i, f := range opts.Partitions.Fields {
			if j := len(names) - len(opts.Partitions.Fields) + i; j < 0 || names[j] != f.Name {
				t.Errorf("%s: columns %v, want partition column %s at the end", a.Path, names, f.Name)
			}
		}
	}
}

// checkRowIDRanges fails unless every live file has a baseRowId and a
// defaultRowCommitVersion, no two files' row ID ranges overlap, and the
// delta.rowTracking high-water mark covers them all.
func checkRowIDRanges(t *testing.T, s *Snapshot) {
	t.Helper()
	hwm, err := s.rowIDHighWaterMark()
	if err != nil {
		t.Fatal(err)
	}
	type span struct {
		lo, hi int64
		path   string
	}
	var spans []span
	for _, a := range s.Files() {
		st, err := ParseStats(a.Stats)
		if a.BaseRowID == nil || a.DefaultRowCommitVersion == nil || err != nil {
			t.Errorf("%s: baseRowId %v, defaultRowCommitVersion %v, stats %v", a.Path, a.BaseRowID, a.DefaultRowCommitVersion, err)
			continue
		}
		spans = append(spans, span{*a.BaseRowID, *a.BaseRowID + st.NumRecords - 1, a.Path})
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.lo - b.lo) })
	for i, sp := range spans {
		if i > 0 && sp.lo <= spans[i-1].hi {
			t.Errorf("row IDs of %s [%d, %d] overlap those of %s [%d, %d]", sp.path, sp.lo, sp.hi, spans[i-1].path, spans[i-1].lo, spans[i-1].hi)
		}
		if sp.hi > hwm {
			t.Errorf("row IDs of %s reach %d, above the high-water mark %d", sp.path, sp.hi, hwm)
		}
	}
}

// checkRowIDs judges the [id, row_id, row_commit_version] Spark reads after
// an append at version appended and an OPTIMIZE: the fixture's rows keep
// their stable row IDs and commit versions, the appended ones have the
// append's version, and no two rows share a row ID.
func checkRowIDs(t *testing.T, fixture, got [][3]int64, appended int64) {
	t.Helper()
	seen := map[int64]bool{}
	for _, r := range got {
		if seen[r[1]] {
			t.Errorf("row ID %d twice: %v", r[1], got)
		}
		seen[r[1]] = true
		if !slices.ContainsFunc(fixture, func(f [3]int64) bool { return f[0] == r[0] }) && r[2] != appended {
			t.Errorf("appended row %v: row commit version %d, want %d", r, r[2], appended)
		}
	}
	for _, f := range fixture {
		if !slices.Contains(got, f) {
			t.Errorf("row %d: Spark's stable row ID and commit version %v are lost (Spark reads %v)", f[0], f, got)
		}
	}
}

// checkRefusal fails unless err is nil and feature "", or an
// *UnsupportedError refusing op for feature, with the feature and a reason
// in its message.
func checkRefusal(t *testing.T, op Op, err error, feature string) {
	t.Helper()
	var ue *UnsupportedError
	switch {
	case feature == "" && err != nil:
		t.Errorf("%s: %v", op, err)
	case feature != "" && (!errors.As(err, &ue) || ue.Op != op || !slices.Contains(ue.Features, feature)):
		t.Errorf("%s: got %v, want a refusal naming %s", op, err, feature)
	case feature != "" && !strings.Contains(err.Error(), feature+": "):
		t.Errorf("%s: message %q does not say why %s is refused", op, err, feature)
	}
}

// checkWithSpark4 has one Spark 4 JVM read every table and compares its
// rows with what each must hold.
func checkWithSpark4(t *testing.T, reads []*spark4Read) {
	py, dir := testenv.Spark4(t)
	req, err := json.Marshal(map[string]any{"tables": reads})
	if err != nil {
		t.Fatal(err)
	}
	reqFile := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(reqFile, req, 0o644); err != nil {
		t.Fatal(err)
	}
	out := testenv.RunSpark(t, py, dir, "check.py", reqFile)
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var got map[string]struct {
		Rows   []map[string]any  `json:"rows"`
		Types  map[string]string `json:"types"`
		RowIDs [][3]int64        `json:"rowIds"`
		Error  string            `json:"error"`
	}
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("spark 4 output: %v\n%s", err, out)
	}
	for _, r := range reads {
		g, ok := got[r.Name]
		switch {
		case !ok:
			t.Errorf("%s: Spark did not report it", r.Name)
			continue
		case g.Error != "":
			t.Errorf("%s: Spark cannot read it: %s", r.Name, g.Error)
			continue
		}
		ours, theirs := canonRows(r.schema, r.want), canonRows(r.schema, g.Rows)
		if !slices.Equal(ours, theirs) {
			t.Errorf("%s: Spark reads %d rows, want %d:\nSpark: %s\nwant:  %s", r.Name, len(theirs), len(ours),
				strings.Join(theirs, "\n       "), strings.Join(ours, "\n       "))
		}
		if r.check != nil {
			r.check(t, g.RowIDs)
		}
		if r.types != nil && !maps.Equal(g.Types, r.types) {
			t.Errorf("%s: Spark reads the types %v, want %v", r.Name, g.Types, r.types)
		}
	}
}
