package delta

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The fixtures in testdata/spark-features were made by delta-spark 3.2 with
// testdata/spark-features/generate.py; expected.json holds what Spark reads.

// sparkExpected is a fixture's expected.json.
type sparkExpected struct {
	Version       int64                       `json:"version"`
	Rows          []map[string]any            `json:"rows"`
	RowsByVersion map[string][]map[string]any `json:"rowsByVersion"`
	History       []struct {
		Version   int64  `json:"version"`
		Operation string `json:"operation"`
		Timestamp string `json:"timestamp"`
	} `json:"history"`
}

// sparkFixture copies a fixture to a temporary directory (tests change it)
// and returns its absolute path and expected.json.
func sparkFixture(t *testing.T, name string) (string, *sparkExpected) {
	t.Helper()
	src := filepath.Join("testdata", "spark-features", name)
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatalf("copy fixture %s: %v", name, err)
	}
	data, err := os.ReadFile(filepath.Join(dst, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dst, "expected.json")); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	var exp sparkExpected
	if err := dec.Decode(&exp); err != nil {
		t.Fatalf("%s/expected.json: %v", name, err)
	}
	return dst, &exp
}

// snapshotRows reads every row of the snapshot, canonical and sorted.
func snapshotRows(t *testing.T, tbl *Table, s *Snapshot) []string {
	t.Helper()
	schema, err := s.Schema()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range s.Files() {
		rows, err := ReadDataFile(t.Context(), tbl.Store(), schema, s.PartitionColumns(), a)
		if err != nil {
			t.Fatalf("read %s: %v", a.Path, err)
		}
		for _, r := range rows {
			out = append(out, canonRow(schema, func(i int, _ string) any { return r[i] }))
		}
	}
	slices.Sort(out)
	return out
}

// canonRows renders expected rows (by column name) like snapshotRows.
func canonRows(schema *StructType, rows []map[string]any) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, canonRow(schema, func(_ int, name string) any { return r[name] }))
	}
	slices.Sort(out)
	return out
}

// checkRows fails unless the snapshot reads exactly want.
func checkRows(t *testing.T, tbl *Table, s *Snapshot, want []map[string]any) {
	t.Helper()
	schema, err := s.Schema()
	if err != nil {
		t.Fatal(err)
	}
	got, exp := snapshotRows(t, tbl, s), canonRows(schema, want)
	if !slices.Equal(got, exp) {
		t.Errorf("version %d: rows differ (%d ours, %d Spark):\nours:  %s\nSpark: %s", s.Version(), len(got), len(exp),
			strings.Join(got, "\n       "), strings.Join(exp, "\n       "))
	}
}

// appendRows writes rows (full table schema) to one new file per partition
// value of the first partition column and commits them as a WRITE.
func appendRows(t *testing.T, tbl *Table, s *Snapshot, rows []Row) (int64, error) {
	t.Helper()
	schema, err := s.Schema()
	if err != nil {
		t.Fatal(err)
	}
	byPart := map[string][]Row{}
	parts := s.PartitionColumns()
	for _, r := range rows {
		k := ""
		if len(parts) > 0 {
			k = r[schema.Index(parts[0])].(string)
		}
		byPart[k] = append(byPart[k], r)
	}
	var actions []Action
	for k, rs := range byPart {
		pv := map[string]*string{}
		if len(parts) > 0 {
			pv[parts[0]] = &k
		}
		add, err := WriteDataFile(t.Context(), tbl.Store(), schema, parts, pv, rs, WriterOptions{})
		if err != nil {
			return 0, err
		}
		actions = append(actions, Action{Add: add})
	}
	return tbl.Commit(t.Context(), s, actions, Operation{Name: "WRITE"})
}

// maintain runs OPTIMIZE (small target, so everything compacts) then
// VACUUM with no retention, and returns the first error.
func maintain(t *testing.T, tbl *Table, s *Snapshot) (*OptimizeResult, error) {
	t.Helper()
	res, err := tbl.Optimize(t.Context(), s, OptimizeOptions{TargetSize: 1 << 20})
	if err != nil {
		return nil, err
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := tbl.Vacuum(t.Context(), s, VacuumOptions{Retention: time.Millisecond, Force: true}); err != nil {
		return res, err
	}
	return res, nil
}

// TestSparkDeletionVectors: tables whose DELETEs left deletion vectors (in
// DV files and inline) read as Spark and delta-rs read them; appends,
// OPTIMIZE (which rewrites files with their DVs applied) and VACUUM (which
// keeps live DV files) leave them readable and right.
func TestSparkDeletionVectors(t *testing.T) {
	for _, name := range []string{"dv", "dv-inline"} {
		t.Run(name, func(t *testing.T) {
			dir, exp := sparkFixture(t, name)
			tbl := NewTable(localStore(t, dir))
			for v, rows := range exp.RowsByVersion {
				var version int64
				if err := json.Unmarshal([]byte(v), &version); err != nil {
					t.Fatal(err)
				}
				s, err := tbl.SnapshotAt(t.Context(), version)
				if err != nil {
					t.Fatalf("version %d: %v", version, err)
				}
				checkRows(t, tbl, s, rows)
			}
			s, err := tbl.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var logical int64
			for _, a := range s.Files() {
				n, ok := a.NumLogicalRecords()
				if !ok {
					t.Fatalf("%s: no record count", a.Path)
				}
				logical += n
			}
			if logical != int64(len(exp.Rows)) {
				t.Errorf("record counts add up to %d, Spark reads %d rows", logical, len(exp.Rows))
			}
			compareWithDeltaRS(t, tbl, dir, true)

			want := slices.Clone(exp.Rows)
			if _, err := appendRows(t, tbl, s, []Row{{int64(100), "a", "n100"}}); err != nil {
				t.Fatalf("append: %v", err)
			}
			want = append(want, map[string]any{"id": json.Number("100"), "part": "a", "name": "n100"})
			res, err := maintain(t, tbl, s)
			if err != nil {
				t.Fatalf("maintain: %v", err)
			}
			if res.FilesRemoved != 2 || res.Version < 0 {
				t.Errorf("optimize removed %d files, want 2 (partition a: Spark's with its DV and ours)", res.FilesRemoved)
			}
			checkRows(t, tbl, s, want)
			for _, a := range s.Files() {
				if a.PartitionValues["part"] != nil && *a.PartitionValues["part"] == "a" && a.DeletionVector != nil {
					t.Errorf("partition a still has a file with a DV after OPTIMIZE: %s", a.Path)
				}
			}
			fresh, err := tbl.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			checkRows(t, tbl, fresh, want)
			compareWithDeltaRS(t, tbl, dir, true)
		})
	}
}

// TestVacuumKeepsDeletionVectorFiles: VACUUM never deletes a DV file a live
// file or an unexpired tombstone references, and deletes unreferenced ones.
func TestVacuumKeepsDeletionVectorFiles(t *testing.T) {
	dir, exp := sparkFixture(t, "dv")
	tbl := NewTable(localStore(t, dir))
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, a := range s.Files() {
		p, ok, err := a.DeletionVector.RelativePath()
		if err != nil || !ok {
			t.Fatalf("%s: %v", a.Path, err)
		}
		live[p] = true
	}
	// An orphan DV file, as a failed DELETE would leave.
	orphan := "deletion_vector_00000000-0000-4000-8000-000000000000.bin"
	if err := os.WriteFile(filepath.Join(dir, orphan), []byte{1}, 0o644); err != nil {
		t.Fatal(err)
	}
	dvFiles, _ := filepath.Glob(filepath.Join(dir, "deletion_vector_*.bin"))
	if len(live) == 0 || len(dvFiles) != len(live)+1 {
		t.Fatalf("fixture: %d DV files, %d live", len(dvFiles), len(live))
	}
	time.Sleep(5 * time.Millisecond)
	res, err := tbl.Vacuum(t.Context(), s, VacuumOptions{Retention: time.Millisecond, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	for p := range live {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("live DV file %s: %v", p, err)
		}
	}
	if !slices.Contains(res.Files, orphan) {
		t.Errorf("unreferenced DV file %s was kept (deleted %v)", orphan, res.Files)
	}
	checkRows(t, tbl, s, exp.Rows)
}

// TestDeletionVectorErrorsNameTheFile: a missing DV file fails the read
// with an error naming it, never returns deleted rows.
func TestDeletionVectorErrorsNameTheFile(t *testing.T) {
	dir, _ := sparkFixture(t, "dv")
	tbl := NewTable(localStore(t, dir))
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	a := s.Files()[0]
	p, _, _ := a.DeletionVector.RelativePath()
	if err := os.Remove(filepath.Join(dir, p)); err != nil {
		t.Fatal(err)
	}
	schema, _ := s.Schema()
	_, err = ReadDataFile(t.Context(), tbl.Store(), schema, s.PartitionColumns(), a)
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("got %v, want an error naming %s", err, p)
	}
	if errors.Is(err, ErrCorruptDeletionVector) {
		t.Errorf("a missing file is not corruption: %v", err)
	}
}
