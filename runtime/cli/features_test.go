package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sparkFixture copies a delta-spark 3.2 fixture (delta/testdata/spark-features,
// made by its generate.py) to a temporary directory and returns it with the
// number of rows Spark reads at its latest version.
func sparkFixture(t *testing.T, name string) (string, int) {
	t.Helper()
	dir, exp := fixture(t, "spark-features", name)
	return dir, len(exp.Rows)
}

// fixtureExpected is what a fixture's expected.json says Spark reads.
type fixtureExpected struct {
	Rows    []map[string]any `json:"rows"`
	Queries []struct {
		Where string `json:"where"`
		Count int    `json:"count"`
	} `json:"queries"`
}

// fixture copies the fixture name of set (a directory of delta/testdata) to
// a temporary directory, without its expected.json, which it returns.
func fixture(t *testing.T, set, name string) (string, *fixtureExpected) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS(filepath.Join("..", "..", "delta", "testdata", set, name))); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dst, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dst, "expected.json"))
	var exp fixtureExpected
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatal(err)
	}
	return dst, &exp
}

// TestDeletionVectorRowCounts: inspect, cat and verify count the rows a
// reader sees, numRecords less the deletion vectors' cardinality.
func TestDeletionVectorRowCounts(t *testing.T) {
	for _, name := range []string{"dv", "dv-inline"} {
		t.Run(name, func(t *testing.T) {
			dir, want := sparkFixture(t, name)
			code, out, errs := run(t, "inspect", "snapshot", "--table", dir, "--json")
			if code != 0 {
				t.Fatalf("inspect: exit %d: %s", code, errs)
			}
			var snap struct {
				NumRecords int `json:"numRecords"`
			}
			if err := json.Unmarshal([]byte(out), &snap); err != nil || snap.NumRecords != want {
				t.Errorf("inspect snapshot: numRecords %d (%v), Spark reads %d rows", snap.NumRecords, err, want)
			}
			code, out, errs = run(t, "inspect", "files", "--table", dir, "--json")
			var files []struct {
				NumRecords int `json:"numRecords"`
			}
			if err := json.Unmarshal([]byte(out), &files); code != 0 || err != nil {
				t.Fatalf("inspect files: exit %d, %v: %s", code, err, errs)
			}
			sum := 0
			for _, f := range files {
				sum += f.NumRecords
			}
			if sum != want {
				t.Errorf("inspect files: records add up to %d, want %d", sum, want)
			}
			code, out, errs = run(t, "cat", "--table", dir)
			if code != 0 {
				t.Fatalf("cat: exit %d: %s", code, errs)
			}
			if lines := strings.Count(out, "\n"); lines != want {
				t.Errorf("cat printed %d rows, want %d", lines, want)
			}
			for _, deleted := range []string{`"id":1,`, `"id":4,`, `"id":7,`, `"id":8,`, `"id":13,`} {
				if strings.Contains(out, deleted) {
					t.Errorf("cat printed deleted row %s", deleted)
				}
			}
			for _, args := range [][]string{{"verify", "--table", dir}, {"verify", "--table", dir, "--deep"}} {
				code, out, errs = run(t, args...)
				if code != 0 || !strings.Contains(out, " "+strconv.Itoa(want)+" rows") {
					t.Errorf("%v: exit %d: %s%s", args, code, out, errs)
				}
			}
		})
	}
}

// TestInspectJSONMinimalMetadata: inspect --json works on every table
// inspect reads, also one whose metaData has only its required id and
// format (no schemaString, partitionColumns or configuration).
func TestInspectJSONMinimalMetadata(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "_delta_log"), 0o755); err != nil {
		t.Fatal(err)
	}
	commit := `{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}` + "\n" +
		`{"metaData":{"id":"x","format":{"provider":"parquet"}}}` + "\n" +
		`{"add":{"path":"a.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "_delta_log", "00000000000000000000.json"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"snapshot", "files", "history", "partitions"} {
		code, text, errs := run(t, "inspect", what, "--table", dir)
		if code != 0 {
			t.Errorf("inspect %s: exit %d: %s", what, code, errs)
		}
		code, out, errs := run(t, "inspect", what, "--table", dir, "--json")
		if code != 0 || !json.Valid([]byte(out)) {
			t.Errorf("inspect %s --json: exit %d: %s%s (text form: %s)", what, code, out, errs, text)
		}
	}
}

// TestColumnMappingCLI: cat filters by display names (partition values and
// stats are keyed by physical names), inspect shows display names, and
// verify --deep checks the stats of the right columns.
func TestColumnMappingCLI(t *testing.T) {
	for _, name := range []string{"colmap-name", "colmap-id"} {
		t.Run(name, func(t *testing.T) {
			dir, want := sparkFixture(t, name)
			for where, n := range map[string]int{"label = 'one'": 1, "part = 'y'": want - 2, "id >= 3": want - 2, "part = 'x' AND label = 'three'": 1} {
				code, out, errs := run(t, "cat", "--table", dir, "--where", where, "--columns", "id,label")
				if code != 0 || strings.Count(out, "\n") != n {
					t.Errorf("cat --where %q: exit %d, %d rows, want %d: %s%s", where, code, strings.Count(out, "\n"), n, out, errs)
				}
			}
			code, out, errs := run(t, "inspect", "partitions", "--table", dir, "--json")
			if code != 0 || !strings.Contains(out, `"part": "x"`) || !strings.Contains(out, `"part": "y"`) {
				t.Errorf("inspect partitions: exit %d: %s%s", code, out, errs)
			}
			code, out, errs = run(t, "verify", "--table", dir, "--deep")
			if code != 0 || !strings.Contains(out, " "+strconv.Itoa(want)+" rows") {
				t.Errorf("verify --deep: exit %d: %s%s", code, out, errs)
			}
		})
	}
}

// TestInCommitTimestampsCLI: inspect history shows, and cat --timestamp
// travels by, the in-commit timestamps Spark wrote (the copied commit
// files' modification times are all about now).
func TestInCommitTimestampsCLI(t *testing.T) {
	dir, _ := sparkFixture(t, "ict")
	data, err := os.ReadFile(filepath.Join("..", "..", "delta", "testdata", "spark-features", "ict", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		History []struct {
			Version   int64  `json:"version"`
			Timestamp string `json:"timestamp"`
		} `json:"history"`
	}
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, "inspect", "history", "--table", dir, "--json")
	var hist []struct {
		Version   int64  `json:"version"`
		Timestamp string `json:"timestamp"`
	}
	if err := json.Unmarshal([]byte(out), &hist); code != 0 || err != nil || len(hist) != len(exp.History) {
		t.Fatalf("inspect history: exit %d, %v: %s%s", code, err, out, errs)
	}
	for _, h := range hist {
		got, err := time.Parse(time.RFC3339Nano, h.Timestamp)
		want, werr := time.Parse(time.RFC3339Nano, exp.History[h.Version].Timestamp)
		if err != nil || werr != nil || !got.Equal(want) {
			t.Errorf("version %d: %s, Spark says %s (%v, %v)", h.Version, h.Timestamp, exp.History[h.Version].Timestamp, err, werr)
		}
	}
	// As of version 1's time the table is version 1: one row.
	code, out, errs = run(t, "cat", "--table", dir, "--timestamp", exp.History[1].Timestamp)
	if code != 0 || strings.Count(out, "\n") != 1 {
		t.Errorf("cat --timestamp %s: exit %d: %s%s", exp.History[1].Timestamp, code, out, errs)
	}
}

// TestVerifyDeletionVectors: verify fails, naming the file, when a DV file
// is missing or corrupt.
func TestVerifyDeletionVectors(t *testing.T) {
	dir, _ := sparkFixture(t, "dv")
	dvs, _ := filepath.Glob(filepath.Join(dir, "deletion_vector_*.bin"))
	if len(dvs) != 2 {
		t.Fatalf("fixture has %d DV files", len(dvs))
	}
	data, err := os.ReadFile(dvs[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xFF // the checksum
	if err := os.WriteFile(dvs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dvs[1]); err != nil {
		t.Fatal(err)
	}
	code, out, _ := run(t, "verify", "--table", dir)
	if code == 0 || !strings.Contains(out, filepath.Base(dvs[0])) || !strings.Contains(out, filepath.Base(dvs[1])) || !strings.Contains(out, "checksum") {
		t.Errorf("verify: exit %d: %s", code, out)
	}
}

// TestInspectActiveFeatures: inspect snapshot lists the features in use,
// not those merely supported.
func TestInspectActiveFeatures(t *testing.T) {
	for name, want := range map[string][]string{
		"dv":          {"deletionVectors"},
		"colmap-name": {"columnMapping"}, // writer 5 also supports appendOnly, invariants, ...: none in use
		"constraints": {"checkConstraints"},
		"cdf":         {"changeDataFeed"},
		"ict":         {"inCommitTimestamp-preview"},
	} {
		dir, _ := sparkFixture(t, name)
		code, out, errs := run(t, "inspect", "snapshot", "--table", dir, "--json")
		var snap struct {
			ActiveFeatures []string `json:"activeFeatures"`
		}
		if err := json.Unmarshal([]byte(out), &snap); code != 0 || err != nil {
			t.Fatalf("%s: exit %d, %v: %s", name, code, err, errs)
		}
		slices.Sort(snap.ActiveFeatures)
		slices.Sort(want)
		if !slices.Equal(snap.ActiveFeatures, want) {
			t.Errorf("%s: active features %v, want %v", name, snap.ActiveFeatures, want)
		}
	}
}

// TestStatsMisleadNoQuery: on delta-spark 4 tables whose old files carry
// stats of dropped columns under the new columns' display names (column
// mapping turned on, raw_payload and score dropped and added again) or
// bounds in a type since widened (FLOAT→DOUBLE, ...), cat --where prints
// the rows Spark counts without data skipping, and verify --deep finds no
// mismatch.
func TestStatsMisleadNoQuery(t *testing.T) {
	for _, name := range []string{"colmap-readd", "typewidening"} {
		t.Run(name, func(t *testing.T) {
			dir, exp := fixture(t, "spark4-features", name)
			for _, q := range exp.Queries {
				code, out, errs := run(t, "cat", "--table", dir, "--where", q.Where)
				if n := strings.Count(out, "\n"); code != 0 || n != q.Count {
					t.Errorf("cat --where %q: exit %d, %d rows, Spark counts %d: %s", q.Where, code, n, q.Count, errs)
				}
			}
			code, out, errs := run(t, "verify", "--table", dir, "--deep")
			if want := fmt.Sprintf(" %d rows", len(exp.Rows)); code != 0 || !strings.Contains(out, want) {
				t.Errorf("verify --deep: exit %d: %s%s", code, out, errs)
			}
		})
	}
}

// TestVariantCLI: on delta-spark 4's variant tables (unshredded and
// shredded, variant-types with every scalar type Spark SQL makes), cat
// prints each variant as the JSON Spark's to_json renders,
// filters it by null, verify --deep reads every file and inspect names
// the type.
func TestVariantCLI(t *testing.T) {
	for _, name := range []string{"variant", "variant-shredded", "variant-types", "variant-types-shredded"} {
		t.Run(name, func(t *testing.T) {
			dir, exp := fixture(t, "spark4-features", name)
			want := map[string]string{}
			for _, r := range exp.Rows {
				v, _ := r["v"].(string) // to_json's text; SQL NULL prints as null
				want[fmt.Sprint(r["id"])] = cmp.Or(v, "null")
			}
			code, out, errs := run(t, "cat", "--table", dir, "--columns", "id,v")
			if code != 0 {
				t.Fatalf("cat: exit %d: %s", code, errs)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			for _, line := range lines {
				var r struct {
					ID json.Number     `json:"id"`
					V  json.RawMessage `json:"v"`
				}
				if err := json.Unmarshal([]byte(line), &r); err != nil || string(r.V) != want[r.ID.String()] {
					t.Errorf("cat printed %s (%v), Spark's to_json: %s", line, err, want[r.ID.String()])
				}
			}
			if len(lines) != len(exp.Rows) {
				t.Errorf("cat printed %d rows, Spark reads %d", len(lines), len(exp.Rows))
			}
			for where, n := range map[string]int{"v = null": 1, "v != null": len(exp.Rows) - 1} {
				if code, out, errs := run(t, "cat", "--table", dir, "--where", where); code != 0 || strings.Count(out, "\n") != n {
					t.Errorf("cat --where %q: exit %d, %d rows, want %d: %s", where, code, strings.Count(out, "\n"), n, errs)
				}
			}
			if code, _, errs := run(t, "cat", "--table", dir, "--where", "v = 'x'"); code != 2 || !strings.Contains(errs, "variant columns can only be compared with null") {
				t.Errorf("cat --where v = 'x': exit %d: %s", code, errs)
			}
			if code, out, errs := run(t, "verify", "--table", dir, "--deep"); code != 0 || !strings.Contains(out, fmt.Sprintf(" %d rows", len(exp.Rows))) {
				t.Errorf("verify --deep: exit %d: %s%s", code, out, errs)
			}
			if code, out, errs := run(t, "inspect", "schema", "--table", dir); code != 0 || !strings.Contains(out, "variant") {
				t.Errorf("inspect schema: exit %d: %s%s", code, out, errs)
			}
		})
	}
}
