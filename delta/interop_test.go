package delta

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// deltaRSView is what scripts/deltars.py prints: the table as delta-rs sees it.
type deltaRSView struct {
	Version          int64                      `json:"version"`
	PartitionColumns []string                   `json:"partitionColumns"`
	Schema           json.RawMessage            `json:"schema"`
	Files            []deltaRSFile              `json:"files"`
	Txn              map[string]*int64          `json:"txn"`
	Rows             []map[string]any           `json:"rows"`
	RowsError        string                     `json:"rowsError"`
	RowTypes         map[string]string          `json:"rowTypes"`
	DuckDBRows       []map[string]any           `json:"duckdbRows"`
	DuckDBTypes      map[string]string          `json:"duckdbTypes"`
	DuckDBError      string                     `json:"duckdbError"`
	extra            map[string]json.RawMessage `json:"-"`
	raw              []byte                     // the output, for testenv.CheckDuckDB
}

type deltaRSFile struct {
	Path            string         `json:"path"`
	Size            int64          `json:"size"`
	PartitionValues map[string]any `json:"partitionValues"`
	NumRecords      *int64         `json:"numRecords"`
}

// deltaRS runs the delta-rs oracle on a table URI.
func deltaRS(t *testing.T, uri string, args ...string) *deltaRSView {
	t.Helper()
	out := testenv.DeltaRS(t, nil, append([]string{"read", uri}, args...)...)
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	v := deltaRSView{raw: out}
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("delta-rs output: %v\n%s", err, out)
	}
	return &v
}

// canon renders a value of a column type the same way for both readers:
// ours (Go values, see Row) and delta-rs's JSON (json.Number, strings).
func canon(typ DataType, v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	case json.Number:
		if typ == Float || typ == Double {
			f, _ := strconv.ParseFloat(string(v), 64)
			return canonFloat(f)
		}
		return string(v)
	case float64:
		return canonFloat(v)
	case float32:
		return canonFloat(float64(v))
	case int64, int32, int16, int8, int:
		return fmt.Sprint(v)
	case time.Time:
		if typ == Date {
			return v.UTC().Format(time.DateOnly)
		}
		return v.UTC().Format("2006-01-02T15:04:05.000000")
	case []byte:
		return "b64:" + base64.StdEncoding.EncodeToString(v)
	case VariantValue:
		return v.String() // as Spark's to_json renders it
	case string:
		if _, ok := typ.(DecimalType); ok {
			if r, ok := new(big.Rat).SetString(v); ok {
				return r.RatString()
			}
		}
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func canonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func canonRow(schema *StructType, get func(i int, name string) any) string {
	parts := make([]string, len(schema.Fields))
	for i, f := range schema.Fields {
		parts[i] = f.Name + "=" + canon(f.Type, get(i, f.Name))
	}
	return strings.Join(parts, " ")
}

// compareWithDeltaRS checks that delta-rs and this library see the same
// version, partition columns, file list (paths as in the log, sizes,
// partition values, record counts), txn versions and, unless rows is false,
// the same rows.
func compareWithDeltaRS(t *testing.T, tbl *Table, uri string, rows bool, apps ...string) {
	t.Helper()
	compareWithDeltaRSArgs(t, tbl, uri, rows, nil, apps...)
}

// compareWithDeltaRSArgs is compareWithDeltaRS with more oracle arguments
// (such as --query); with --duckdb, DuckDB must read delta-rs's rows too.
func compareWithDeltaRSArgs(t *testing.T, tbl *Table, uri string, rows bool, extra []string, apps ...string) {
	t.Helper()
	args := append([]string{}, extra...)
	if rows {
		args = append(args, "--rows")
	}
	if len(apps) > 0 {
		args = append(append(args, "--txn"), apps...)
	}
	want := deltaRS(t, uri, args...)
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatalf("our snapshot: %v", err)
	}
	schema, err := s.Schema()
	if err != nil {
		t.Fatal(err)
	}
	if s.Version() != want.Version {
		t.Errorf("version %d, delta-rs %d", s.Version(), want.Version)
	}
	if !slices.Equal(s.PartitionColumns(), want.PartitionColumns) {
		t.Errorf("partition columns %v, delta-rs %v", s.PartitionColumns(), want.PartitionColumns)
	}
	var ours, theirs []string
	for _, a := range s.Files() {
		var pv []string
		for _, c := range s.PartitionColumns() {
			typ := schema.Field(c).Type
			val, err := ParsePartitionValue(typ, s.PartitionValues(a)[c])
			if err != nil {
				t.Fatalf("%s: partition value %s: %v", a.Path, c, err)
			}
			pv = append(pv, c+"="+canon(typ, val))
		}
		n := "?"
		if st, err := ParseStats(a.Stats); err == nil && a.Stats != "" {
			n = fmt.Sprint(st.NumRecords)
		}
		ours = append(ours, fmt.Sprintf("%s size=%d %v n=%s", a.Path, a.Size, pv, n))
	}
	for _, f := range want.Files {
		var pv []string
		for _, c := range want.PartitionColumns {
			pv = append(pv, c+"="+canon(schema.Field(c).Type, f.PartitionValues[c]))
		}
		n := "?"
		if f.NumRecords != nil {
			n = fmt.Sprint(*f.NumRecords)
		}
		theirs = append(theirs, fmt.Sprintf("%s size=%d %v n=%s", f.Path, f.Size, pv, n))
	}
	if !slices.Equal(ours, theirs) {
		t.Errorf("files differ:\nours:    %s\ndelta-rs: %s", strings.Join(ours, "\n          "), strings.Join(theirs, "\n          "))
	}
	for _, app := range apps {
		v, ok := s.TxnVersion(app)
		w := want.Txn[app]
		if ok != (w != nil) || ok && v != *w {
			t.Errorf("txn %s: ours %d (%v), delta-rs %v", app, v, ok, w)
		}
	}
	if slices.Contains(extra, "--duckdb") {
		testenv.CheckDuckDB(t, want.raw)
	}
	if !rows || want.RowsError != "" {
		return
	}
	var gotRows, wantRows []string
	for _, a := range s.Files() {
		rs, err := ReadDataFile(t.Context(), tbl.Store(), schema, s.PartitionColumns(), a)
		if err != nil {
			t.Fatalf("read %s: %v", a.Path, err)
		}
		for _, r := range rs {
			gotRows = append(gotRows, canonRow(schema, func(i int, _ string) any { return r[i] }))
		}
	}
	for _, r := range want.Rows {
		wantRows = append(wantRows, canonRow(schema, func(_ int, name string) any { return r[name] }))
	}
	slices.Sort(gotRows)
	slices.Sort(wantRows)
	if !slices.Equal(gotRows, wantRows) {
		t.Errorf("rows differ (%d ours, %d delta-rs):\nours:     %s\ndelta-rs: %s", len(gotRows), len(wantRows),
			strings.Join(head(gotRows), "\n          "), strings.Join(head(wantRows), "\n          "))
	}
}

func head(s []string) []string { return s[:min(len(s), 8)] }

// TestGoldenTablesMatchDeltaRS: every reference table reads as delta-rs
// reads it.
func TestGoldenTablesMatchDeltaRS(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(goldenDir, "*"))
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "_delta_log")); err != nil {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			abs, _ := filepath.Abs(dir)
			store, err := storage.NewLocal(abs)
			if err != nil {
				t.Fatal(err)
			}
			var apps []string
			s, err := NewTable(store).Snapshot(t.Context())
			if err != nil {
				t.Fatalf("snapshot: %v", err)
			}
			for app := range s.Txns() {
				apps = append(apps, app)
			}
			compareWithDeltaRS(t, NewTable(store), abs, true, apps...)
		})
	}
}

// interopSchema is the schema of tables this library writes for delta-rs.
func interopSchema() *StructType {
	return &StructType{Fields: []StructField{
		{Name: "id", Type: Long, Nullable: false},
		{Name: "part", Type: String, Nullable: true},
		{Name: "day", Type: Date, Nullable: true},
		{Name: "value", Type: Double, Nullable: true},
		{Name: "ts", Type: Timestamp, Nullable: true},
		{Name: "small", Type: Integer, Nullable: true},
		{Name: "flag", Type: Boolean, Nullable: true},
		{Name: "note", Type: String, Nullable: true},
	}}
}

// writeInteropTable writes 26 commits of partitioned appends with txns and
// checkpoints, then compacts and vacuums; it returns the number of rows.
func writeInteropTable(t *testing.T, store storage.Store) (*Table, int) {
	ctx := t.Context()
	tbl := NewTable(store)
	s, err := tbl.Create(ctx, interopSchema(), []string{"part", "day"}, map[string]string{"delta.checkpointInterval": "10"})
	if err != nil {
		t.Fatal(err)
	}
	parts := []*string{str("a/b"), str("c:d"), str("e=f"), str("g%h"), str("sp ace"), str("ünï 🔌"), nil, str("../../etc")}
	base := time.Date(2026, 6, 22, 9, 15, 30, 123456000, time.UTC)
	id := 0
	for commit := range 26 {
		var actions []Action
		for p := range 2 {
			part := parts[(commit*2+p)%len(parts)]
			day := base.AddDate(0, 0, commit%3).Truncate(24 * time.Hour)
			dayStr := day.Format(time.DateOnly)
			pv := map[string]*string{"part": part, "day": &dayStr}
			var rows []Row
			for range 5 {
				var value any = float64(id) * 1.5
				if id%7 == 0 {
					value = 0.0 // zeros must stay zeros
				}
				var note any = fmt.Sprintf("row %d <&> \x00 ü", id)
				if id%4 == 0 {
					note = nil
				}
				rows = append(rows, Row{int64(id), nil, nil, value, base.Add(time.Duration(id) * time.Second), int32(id % 3), id%2 == 0, note})
				id++
			}
			add, err := WriteDataFile(ctx, store, interopSchema(), []string{"part", "day"}, pv, rows, WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			actions = append(actions, Action{Add: add})
		}
		actions = append(actions, Action{Txn: &Txn{AppID: "interop-0", Version: int64(commit * 100)}})
		if _, err := tbl.Commit(ctx, s, actions, Operation{Name: "STREAMING UPDATE"}); err != nil {
			t.Fatal(err)
		}
		if s.CheckpointDue() {
			if err := tbl.Checkpoint(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s.CheckpointVersion() != 20 {
		t.Fatalf("checkpoint version %d, want 20", s.CheckpointVersion())
	}
	before := s.NumFiles()
	res, err := tbl.Optimize(ctx, s, OptimizeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesRemoved == 0 || s.NumFiles() >= before {
		t.Fatalf("optimize removed %d files; %d → %d live", res.FilesRemoved, before, s.NumFiles())
	}
	time.Sleep(20 * time.Millisecond)
	vac, err := tbl.Vacuum(ctx, s, VacuumOptions{Retention: time.Millisecond, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(vac.Files) != res.FilesRemoved {
		t.Fatalf("vacuum deleted %d files, optimize removed %d", len(vac.Files), res.FilesRemoved)
	}
	return tbl, id
}

// TestDeltaRSReadsOurTables: delta-rs reads what this library writes, with
// the same rows, files, version and txn versions, on disk and on MinIO; so
// does DuckDB's delta_scan, after OPTIMIZE and VACUUM, with partition values
// of special characters.
func TestDeltaRSReadsOurTables(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		dir := t.TempDir()
		store, err := storage.NewLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		tbl, n := writeInteropTable(t, store)
		compareWithDeltaRSArgs(t, tbl, dir, true, []string{"--duckdb"}, "interop-0")
		if got := len(deltaRS(t, dir, "--rows").Rows); got != n {
			t.Errorf("delta-rs read %d rows, wrote %d", got, n)
		}
	})
	t.Run("minio", func(t *testing.T) {
		cfg := testenv.MinIO(t)
		cfg.Prefix = "tables/interop"
		store, err := storage.NewS3(cfg)
		if err != nil {
			t.Fatal(err)
		}
		tbl, _ := writeInteropTable(t, store)
		compareWithDeltaRSArgs(t, tbl, "s3://"+cfg.Bucket+"/"+cfg.Prefix, true, []string{"--duckdb"}, "interop-0")
	})
}

// TestWeReadDeltaRSTables: a table delta-rs wrote (partitioned appends, its
// checkpoint, optimize and vacuum) reads identically here, and in DuckDB.
func TestWeReadDeltaRSTables(t *testing.T) {
	py := testenv.Python(t)
	dir := t.TempDir()
	out, err := exec.CommandContext(t.Context(), py, "../scripts/deltars.py", "write-fixture", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("delta-rs write: %v\n%s", err, out)
	}
	store, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	compareWithDeltaRSArgs(t, NewTable(store), dir, true, []string{"--duckdb"})
}

var _ = context.Background

// TestDeltaRSReadsDecimals: decimals of each physical width Spark writes
// (INT32 up to 9 digits, INT64 up to 18, the shortest FIXED_LEN_BYTE_ARRAY
// beyond, up to 38 digits) read back in delta-rs and DuckDB exactly as
// written, compared as text, scale included: extremes, negatives, zeros
// and nulls. delta-rs's schema has each column's decimal(p,s).
func TestDeltaRSReadsDecimals(t *testing.T) {
	dir := t.TempDir()
	store := localStore(t, dir)
	dec := func(name string, p, s int) StructField {
		return StructField{Name: name, Type: DecimalType{Precision: p, Scale: s}, Nullable: true}
	}
	schema := &StructType{Fields: []StructField{{Name: "id", Type: Long}, dec("d9", 9, 2), dec("d18", 18, 4),
		dec("d38", 38, 10), dec("i38", 38, 0), dec("f5", 5, 5), dec("d19", 19, 0)}}
	rows := []Row{
		{int64(1), "1234567.89", "-12345678901234.5678", "1234567890123456789012345678.0123456789",
			"99999999999999999999999999999999999999", "0.12345", "9999999999999999999"},
		{int64(2), "-9999999.99", "99999999999999.9999", "-9999999999999999999999999999.9999999999",
			"-99999999999999999999999999999999999999", "-0.99999", "-9223372036854775809"},
		{int64(3), "0.00", "0.0000", "0.0000000000", "0", "0.00000", "0"},
		{int64(4), "-0.01", "0.0001", "-0.0000000001", "-1", "0.00001", "-1"},
		{int64(5), nil, nil, nil, nil, nil, nil},
	}
	tbl := NewTable(store)
	snap, err := tbl.Create(t.Context(), schema, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var adds []Action
	for _, part := range [][]Row{rows[:3], rows[3:]} {
		add, err := WriteDataFile(t.Context(), store, schema, nil, nil, part, WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, Action{Add: add})
	}
	if _, err := tbl.Commit(t.Context(), snap, adds, Operation{Name: "WRITE"}); err != nil {
		t.Fatal(err)
	}
	compareWithDeltaRSArgs(t, tbl, dir, true, []string{"--duckdb"})

	rs := deltaRS(t, dir, "--rows")
	var types []string
	var fields []struct{ Name, Type string }
	if err := json.Unmarshal(rs.Schema, &struct {
		Fields *[]struct{ Name, Type string }
	}{&fields}); err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		types = append(types, f.Name+" "+f.Type)
	}
	if want := "id long, d9 decimal(9,2), d18 decimal(18,4), d38 decimal(38,10), i38 decimal(38,0), f5 decimal(5,5), d19 decimal(19,0)"; strings.Join(types, ", ") != want {
		t.Errorf("delta-rs schema %s, want %s", strings.Join(types, ", "), want)
	}
	var got, want []string
	for _, r := range rows {
		want = append(want, fmt.Sprint(r))
	}
	for _, r := range rs.Rows {
		row := Row{}
		for _, f := range schema.Fields {
			switch v := r[f.Name].(type) {
			case json.Number:
				n, _ := v.Int64()
				row = append(row, n)
			case nil:
				row = append(row, nil)
			default:
				row = append(row, v)
			}
		}
		got = append(got, fmt.Sprint(row))
	}
	slices.Sort(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("delta-rs reads\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
