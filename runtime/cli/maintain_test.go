package cli

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/runtime/daemon"
	"github.com/deltaflow/deltaflow/storage"
)

var rowsSchema = &delta.StructType{Fields: []delta.StructField{
	{Name: "id", Type: delta.Long, Nullable: true},
	{Name: "name", Type: delta.String, Nullable: true},
	{Name: "ts", Type: delta.Timestamp, Nullable: true},
	{Name: "p", Type: delta.String, Nullable: true},
}}

var rowsBase = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)

// newRowsTable writes a table partitioned by p ("a", "b") with files commits,
// each one file per partition of 5 rows: ids run 0.. in commit order, so
// each file covers a disjoint id range (stats can skip by id). Every third
// row has a null name; ts is rowsBase + id seconds + 123456 µs.
func newRowsTable(t *testing.T, files int) (string, *delta.Table) {
	t.Helper()
	dir := t.TempDir()
	store, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, writeRowsTable(t, store, files)
}

// writeRowsTable writes newRowsTable's table into store.
func writeRowsTable(t *testing.T, store storage.Store, files int) *delta.Table {
	t.Helper()
	tbl := delta.NewTable(store)
	s, err := tbl.Create(t.Context(), rowsSchema, []string{"p"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := int64(0)
	for range files {
		var actions []delta.Action
		for _, p := range []string{"a", "b"} {
			var rows []delta.Row
			for range 5 {
				var name any = fmt.Sprintf("n%03d", id)
				if id%3 == 0 {
					name = nil
				}
				rows = append(rows, delta.Row{id, name, rowsBase.Add(time.Duration(id)*time.Second + 123456*time.Microsecond), nil})
				id++
			}
			pv := map[string]*string{"p": &p}
			add, err := delta.WriteDataFile(t.Context(), store, rowsSchema, []string{"p"}, pv, rows, delta.WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			actions = append(actions, delta.Action{Add: add})
		}
		if _, err := tbl.Commit(t.Context(), s, actions, delta.Operation{Name: "WRITE"}); err != nil {
			t.Fatal(err)
		}
		if err := tbl.Update(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	return tbl
}

// tableRows reads every row of the latest snapshot.
func tableRows(t *testing.T, tbl *delta.Table) (rows []delta.Row, files int) {
	t.Helper()
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range s.Files() {
		r, err := delta.ReadDataFile(t.Context(), tbl.Store(), rowsSchema, s.PartitionColumns(), a)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r...)
	}
	return rows, s.NumFiles()
}

// parquetFiles counts the data files on disk.
func parquetFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".parquet") && !strings.Contains(path, "_delta_log") {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := run(t, args...)
	if code != 0 {
		t.Fatalf("deltaflow %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func TestOptimizeThenVacuum(t *testing.T) {
	dir, tbl := newRowsTable(t, 4)
	before, files := tableRows(t, tbl)
	if len(before) != 40 || files != 8 {
		t.Fatalf("fixture: %d rows in %d files", len(before), files)
	}

	out := mustRun(t, "optimize", "--table", dir, "--dry-run")
	if !strings.Contains(out, "dry run: would compact 8 files") || !strings.Contains(out, "p=a: 4 files") {
		t.Fatalf("dry run: %s", out)
	}
	if _, files := tableRows(t, tbl); files != 8 {
		t.Fatalf("dry run changed the table: %d files", files)
	}

	// Only partition a.
	code, out, errs := run(t, "optimize", "--table", dir, "--where", "p = 'a'")
	if code != 0 || !strings.Contains(out, "optimized: removed 4 files") || !strings.Contains(out, "added 1 files") {
		t.Fatalf("optimize p=a: exit %d\n%s\n%s", code, out, errs)
	}
	// Not a terminal: plain progress lines.
	if !strings.Contains(errs, "optimize: 1/1 bins") || strings.Contains(errs, "\r") {
		t.Errorf("progress: %q", errs)
	}
	out = mustRun(t, "optimize", "--table", dir, "--target-size", "64MiB")
	if !strings.Contains(out, "optimized: removed 4 files") {
		t.Fatalf("optimize rest: %s", out)
	}
	out = mustRun(t, "optimize", "--table", dir)
	if !strings.Contains(out, "nothing to optimize") {
		t.Fatalf("second optimize: %s", out)
	}
	after, files := tableRows(t, tbl)
	if files != 2 || len(after) != len(before) {
		t.Fatalf("after optimize: %d rows in %d files", len(after), files)
	}

	// Retention below the table's 7 days needs --force.
	code, _, errs = run(t, "vacuum", "--table", dir, "--retain", "100h")
	if code != 1 || !strings.Contains(errs, "refusing to vacuum with --retain 100h0m0s") || !strings.Contains(errs, "--force") {
		t.Fatalf("vacuum 100h: exit %d, %s", code, errs)
	}
	time.Sleep(5 * time.Millisecond) // tombstones are in ms: let them fall before the cutoff
	out = mustRun(t, "vacuum", "--table", dir, "--retain", "0d", "--force", "--dry-run")
	if strings.Count(out, "would delete p=") != 8 || !strings.Contains(out, "dry run: would delete 8 files") {
		t.Fatalf("vacuum dry run: %s", out)
	}
	if n := parquetFiles(t, dir); n != 10 {
		t.Fatalf("dry run deleted files: %d left", n)
	}
	out = mustRun(t, "vacuum", "--table", dir, "--retain", "0h", "--force")
	if !strings.Contains(out, "vacuumed: deleted 8 files") || !strings.Contains(out, "log cleanup deleted 0 files") {
		t.Fatalf("vacuum: %s", out)
	}
	if n := parquetFiles(t, dir); n != 2 {
		t.Fatalf("after vacuum: %d data files on disk", n)
	}
	final, files := tableRows(t, tbl)
	if files != 2 || len(final) != 40 {
		t.Fatalf("after vacuum: %d rows in %d files", len(final), files)
	}
	if out := mustRun(t, "verify", "--table", dir, "--deep"); !strings.HasPrefix(out, "OK: 2 files, 40 rows verified") {
		t.Fatalf("verify: %s", out)
	}

	// delta-rs reads the same rows, and DuckDB those of delta-rs.
	raw := testenv.DeltaRS(t, nil, "read", dir, "--rows", "--duckdb")
	testenv.CheckDuckDB(t, raw)
	var view struct {
		Files []json.RawMessage `json:"files"`
		Rows  []map[string]any  `json:"rows"`
	}
	if err := json.Unmarshal(raw, &view); err != nil {
		t.Fatal(err)
	}
	if len(view.Rows) != 40 || len(view.Files) != 2 {
		t.Fatalf("delta-rs sees %d rows in %d files, want 40 in 2", len(view.Rows), len(view.Files))
	}
}

func TestMaintainUsage(t *testing.T) {
	dir, _ := newRowsTable(t, 1)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"optimize", "--table", dir, "--where", "id = 1"}, 2, "id is not a partition column"},
		{[]string{"optimize", "--table", dir, "--where", "p = "}, 2, "position 5 (end of input): expected a literal"},
		{[]string{"optimize", "--table", dir, "--target-size", "big"}, 2, "--target-size"},
		{[]string{"vacuum", "--table", dir, "--retain", "soon"}, 2, "want a duration such as 720h or 30d"},
		{[]string{"vacuum", "--table", dir, "--retain", "-1h"}, 2, "must not be negative"},
	} {
		code, _, errs := run(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
	// The single-writer opt-in from the environment must be a boolean; a
	// dry run writes nothing and does not look at it.
	t.Setenv(daemon.SingleWriterEnv, "maybe")
	if code, _, errs := run(t, "vacuum", "--table", dir); code != 2 || !strings.Contains(errs, daemon.SingleWriterEnv) {
		t.Errorf("%s=maybe: exit %d, stderr %q", daemon.SingleWriterEnv, code, errs)
	}
	if code, _, errs := run(t, "vacuum", "--table", dir, "--dry-run"); code != 0 {
		t.Errorf("dry run with %s=maybe: exit %d, stderr %q", daemon.SingleWriterEnv, code, errs)
	}
	for in, want := range map[string]time.Duration{"30d": 720 * time.Hour, "0.5d": 12 * time.Hour, "168h": 168 * time.Hour, "0h": 0} {
		if got, err := parseRetention(in); err != nil || got != want {
			t.Errorf("parseRetention(%q) = %v, %v", in, got, err)
		}
	}
}

func TestVerify(t *testing.T) {
	dir, tbl := newRowsTable(t, 2)
	if out := mustRun(t, "verify", "--table", dir); !strings.HasPrefix(out, "OK: 4 files, 20 rows (from stats)") {
		t.Fatalf("verify: %s", out)
	}
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	files := s.Files()
	key := func(a *delta.Add) string {
		k, err := delta.DecodePath(a.Path)
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dir, k)
	}
	// A wrong size and a missing file.
	f, err := os.OpenFile(key(files[0]), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("junk"))
	f.Close()
	if err := os.Remove(key(files[1])); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, "verify", "--table", dir)
	want := []string{
		fmt.Sprintf("FAIL %s: size: log says %d bytes, storage has %d", files[0].Path, files[0].Size, files[0].Size+4),
		fmt.Sprintf("FAIL %s: missing from storage", files[1].Path),
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("verify output lacks %q:\n%s", w, out)
		}
	}
	if code != 1 || !strings.Contains(errs, "verify failed: 2 of 4 files") {
		t.Errorf("verify: exit %d, %s", code, errs)
	}

	// --deep: an add whose stats lie about numRecords and a min.
	dir2, tbl2 := newRowsTable(t, 1)
	s2, err := tbl2.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p := "c"
	add, err := delta.WriteDataFile(t.Context(), tbl2.Store(), rowsSchema, []string{"p"}, map[string]*string{"p": &p},
		[]delta.Row{{int64(100), "x", rowsBase, nil}, {int64(101), nil, rowsBase, nil}}, delta.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	add.Stats = strings.Replace(add.Stats, `"numRecords":2`, `"numRecords":3`, 1)
	add.Stats = strings.Replace(add.Stats, `"id":100`, `"id":101`, 1)
	if _, err := tbl2.Commit(t.Context(), s2, []delta.Action{{Add: add}}, delta.Operation{Name: "WRITE"}); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, "verify", "--table", dir2); !strings.HasPrefix(out, "OK: 3 files") {
		t.Fatalf("shallow verify of lying stats: %s", out)
	}
	code, out, _ = run(t, "verify", "--table", dir2, "--deep")
	for _, w := range []string{
		add.Path + ": numRecords: stats say 3, file has 2 rows",
		add.Path + ": minValues.id: stats say 101, above the actual min 100",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("deep verify lacks %q:\n%s", w, out)
		}
	}
	if code != 1 || strings.Count(out, "FAIL") != 2 {
		t.Errorf("deep verify: exit %d\n%s", code, out)
	}
}

// TestAbsolutePaths: a table whose adds name their files by absolute URIs
// (as SHALLOW CLONE and CONVERT TO DELTA write them) reads, verifies and
// keeps its files through VACUUM; a path VACUUM cannot place stops it, and
// the error names the path.
func TestAbsolutePaths(t *testing.T) {
	dir, tbl := newRowsTable(t, 2)
	logs, err := filepath.Glob(filepath.Join(dir, "_delta_log", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	root := "file://" + delta.EncodePath(filepath.ToSlash(dir))
	for _, f := range logs {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		data = []byte(strings.ReplaceAll(string(data), `"path":"p=`, `"path":"`+root+`/p=`))
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := jsonLines(t, mustRun(t, "cat", "--table", dir)); len(got) != 20 {
		t.Fatalf("cat: %d rows, want 20", len(got))
	}
	if out := mustRun(t, "verify", "--table", dir, "--deep"); !strings.HasPrefix(out, "OK: 4 files, 20 rows verified") {
		t.Fatalf("verify: %s", out)
	}
	mustRun(t, "vacuum", "--table", dir, "--retain", "0h", "--force")
	if n := parquetFiles(t, dir); n != 4 {
		t.Fatalf("after vacuum: %d data files on disk, want the 4 live ones", n)
	}
	if out := mustRun(t, "verify", "--table", dir); !strings.HasPrefix(out, "OK: 4 files") {
		t.Fatalf("verify after vacuum: %s", out)
	}

	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	bad := &delta.Add{Path: "p=a/x%zz.parquet", PartitionValues: map[string]*string{"p": nil}, Size: 1, DataChange: true}
	if _, err := tbl.Commit(t.Context(), s, []delta.Action{{Add: bad}}, delta.Operation{Name: "WRITE"}); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run(t, "vacuum", "--table", dir, "--retain", "0h", "--force")
	if code != 1 || !strings.Contains(errs, fmt.Sprintf(`live add at version %d: delta: undecodable file path "p=a/x%%zz.parquet"`, s.Version())) {
		t.Fatalf("vacuum with an undecodable path: exit %d, %s", code, errs)
	}
	if n := parquetFiles(t, dir); n != 4 {
		t.Fatalf("after the refused vacuum: %d data files on disk", n)
	}
}
