package delta

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/variant"

	"github.com/deltaflow/deltaflow/delta/schema"
)

// The fixtures in testdata/spark-features were made by delta-spark 3.2 with
// testdata/spark-features/generate.py, those in testdata/spark4-features by
// delta-spark 4.4 with its generate.py; expected.json holds what Spark reads.

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
	// RowIDs (spark4-features, row tracking) is [id, row_id,
	// row_commit_version] of every row.
	RowIDs [][3]int64 `json:"rowIds"`
}

// sparkFixture copies a delta-spark 3.2 fixture to a temporary directory
// (tests change it) and returns its absolute path and expected.json.
func sparkFixture(t *testing.T, name string) (string, *sparkExpected) {
	t.Helper()
	return fixtureOf(t, "spark-features", name)
}

// fixtureOf copies fixture name of set (a directory of testdata) to a
// temporary directory and returns it and its expected.json, which the copy
// leaves out.
func fixtureOf(t *testing.T, set, name string) (string, *sparkExpected) {
	t.Helper()
	return copyFixture(t, filepath.Join(t.TempDir(), name), set, name)
}

// copyFixture is fixtureOf copying to dst.
func copyFixture(t *testing.T, dst, set, name string) (string, *sparkExpected) {
	t.Helper()
	src := filepath.Join("testdata", set, name)
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

// checkEveryVersion fails unless every version reads as Spark read it.
func checkEveryVersion(t *testing.T, tbl *Table, exp *sparkExpected) {
	t.Helper()
	for v, rows := range exp.RowsByVersion {
		version, err := json.Number(v).Int64()
		if err != nil {
			t.Fatal(err)
		}
		s, err := tbl.SnapshotAt(t.Context(), version)
		if err != nil {
			t.Fatalf("version %d: %v", version, err)
		}
		checkRows(t, tbl, s, rows)
	}
}

// appendRows writes rows (full table schema) to one new file per partition
// value of the first partition column and commits them as a WRITE.
func appendRows(t *testing.T, tbl *Table, s *Snapshot, rows []Row) (int64, error) {
	t.Helper()
	// As writers do: no file is written for a table that refuses appends.
	if err := s.Check(OpAppend); err != nil {
		return 0, err
	}
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
	var opts WriterOptions
	if err := s.ApplyWriterOptions(&opts); err != nil {
		t.Fatal(err)
	}
	var actions []Action
	for k, rs := range byPart {
		pv := map[string]*string{}
		if len(parts) > 0 {
			pv[parts[0]] = &k
		}
		add, err := WriteDataFile(t.Context(), tbl.Store(), schema, parts, pv, rs, opts)
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
			checkEveryVersion(t, tbl, exp)
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
			compareWithDeltaRSArgs(t, tbl, dir, true, []string{"--query"})

			want := slices.Clone(exp.Rows)
			if _, err := appendRows(t, tbl, s, []Row{{int64(100), "a", "n100"}}); err != nil {
				t.Fatalf("append: %v", err)
			}
			want = append(want, map[string]any{"id": json.Number("100"), "part": "a", "name": "n100"})
			res, err := maintain(t, tbl, s)
			if err != nil {
				t.Fatalf("maintain: %v", err)
			}
			// Partition a's two files are compacted; every other file whose
			// DV deletes more than 5% of its rows is rewritten alone
			// (DefaultMaxDeletedRatio, as Spark's OPTIMIZE purges).
			if res.FilesRemoved != 3 || res.Version < 0 {
				t.Errorf("optimize removed %d files, want 3 (partition a: Spark's with its DV and ours; partition b's with its DV)", res.FilesRemoved)
			}
			checkRows(t, tbl, s, want)
			for _, a := range s.Files() {
				if a.DeletionVector != nil {
					t.Errorf("a file still has a DV after OPTIMIZE: %s", a.Path)
				}
			}
			// A checkpoint keeps the DVs: the table reads the same from it.
			if err := tbl.Checkpoint(t.Context(), s); err != nil {
				t.Fatal(err)
			}
			fresh, err := tbl.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if fresh.CheckpointVersion() != s.Version() {
				t.Fatalf("snapshot not read from the checkpoint at %d", s.Version())
			}
			checkRows(t, tbl, fresh, want)
			compareWithDeltaRSArgs(t, tbl, dir, true, []string{"--query"})
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

// sampleRow is a row for schema with a simple value per column.
func sampleRow(schema *StructType) (Row, map[string]any) {
	r := make(Row, len(schema.Fields))
	m := map[string]any{}
	for i, f := range schema.Fields {
		switch f.Type {
		case Long:
			r[i] = int64(1000 + i)
		case Integer:
			r[i] = int32(7 + i)
		case Short:
			r[i] = int16(3 + i)
		case String:
			r[i] = "x"
		case Double:
			r[i] = 0.5 + float64(i)
		case Float:
			r[i] = float32(1.25)
		case Boolean:
			r[i] = true
		case Timestamp:
			r[i] = time.Date(2026, 6, 22, 9, 15, 30, 123456000, time.UTC)
		case Date:
			r[i] = time.Date(2026, 6, 22, 0, 0, 0, 0, time.UTC)
		}
		if d, ok := f.Type.(DecimalType); ok {
			r[i] = "1." + strings.Repeat("5", d.Scale)
		}
		if f.Type == Variant {
			m, v, err := variant.Marshal(map[string]any{"state": "ON", "power": 84.5, "n": int64(i), "tags": []any{"x", nil, true}})
			if err != nil {
				panic(err)
			}
			r[i] = VariantValue{Metadata: m, Value: v}
		}
		m[f.Name] = r[i]
	}
	return r, m
}

// checkOps runs append, OPTIMIZE and VACUUM on a fixture and checks each
// is done (and leaves rows Spark's plus the appended one, as delta-rs reads
// too) or refused with an *UnsupportedError naming feature and operation.
func checkOps(t *testing.T, dir string, exp *sparkExpected, refused map[Op]string) {
	t.Helper()
	tbl := NewTable(localStore(t, dir))
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	checkRows(t, tbl, s, exp.Rows)
	schema, _ := s.Schema()
	want := slices.Clone(exp.Rows)
	refusal := func(op Op, err error) {
		t.Helper()
		checkRefusal(t, op, err, refused[op])
	}
	row, m := sampleRow(schema)
	_, err = appendRows(t, tbl, s, []Row{row, row})
	refusal(OpAppend, err)
	if err == nil {
		want = append(want, m, m)
	}
	_, err = tbl.Optimize(t.Context(), s, OptimizeOptions{TargetSize: 1 << 20})
	refusal(OpOptimize, err)
	time.Sleep(5 * time.Millisecond)
	_, err = tbl.Vacuum(t.Context(), s, VacuumOptions{Retention: time.Millisecond, Force: true})
	refusal(OpVacuum, err)
	fresh, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	checkRows(t, tbl, fresh, want)
	compareWithDeltaRSArgs(t, tbl, dir, true, []string{"--query"})
}

// TestSparkFeatureGating: on tables delta-spark made with each feature,
// reads match Spark, and append, OPTIMIZE and VACUUM are done or refused as
// the feature table of issues 11 and 20 says.
func TestSparkFeatureGating(t *testing.T) {
	for name, refused := range map[string]map[Op]string{
		"constraints":  {OpAppend: "checkConstraints"},
		"generated":    {OpAppend: "generatedColumns"},
		"cdf":          {},
		"rowtracking":  {},
		"typewidening": {},
	} {
		t.Run(name, func(t *testing.T) {
			dir, exp := sparkFixture(t, name)
			checkOps(t, dir, exp, refused)
		})
	}
}

// TestSparkColumnMapping: tables with column mapping (name and id mode,
// after RENAME, DROP and ADD COLUMN) read by display name as Spark reads
// them at every version; appends and OPTIMIZE write physical names and
// column ids, readable by delta-rs and by this library.
func TestSparkColumnMapping(t *testing.T) {
	for _, name := range []string{"colmap-name", "colmap-id"} {
		t.Run(name, func(t *testing.T) {
			dir, exp := sparkFixture(t, name)
			tbl := NewTable(localStore(t, dir))
			checkEveryVersion(t, tbl, exp)
			checkOps(t, dir, exp, nil)
			s, err := tbl.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			schema, _ := s.Schema()
			for _, a := range s.Files() {
				for k := range a.PartitionValues {
					if schema.Field(k) != nil {
						t.Errorf("%s: partition value keyed by display name %q", a.Path, k)
					}
				}
				if !strings.Contains(a.Stats, `"col-`) {
					t.Errorf("%s: stats not by physical name: %s", a.Path, a.Stats)
				}
				checkFieldIDs(t, dir, a, schema)
			}
		})
	}
}

// parquetFields are the top-level fields of a's data file.
func parquetFields(t *testing.T, dir string, a *Add) []parquet.Field {
	t.Helper()
	key, err := DecodePath(a.Path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, key))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return pf.Schema().Fields()
}

// parquetColumns are the names of the top-level columns of a's data file.
func parquetColumns(t *testing.T, dir string, a *Add) []string {
	t.Helper()
	var names []string
	for _, f := range parquetFields(t, dir, a) {
		names = append(names, f.Name())
	}
	return names
}

// checkFieldIDs fails unless the data file's columns have the physical
// names and column ids of the table's columns.
func checkFieldIDs(t *testing.T, dir string, a *Add, table *StructType) {
	t.Helper()
	for _, ff := range parquetFields(t, dir, a) {
		found := false
		for i := range table.Fields {
			if PhysicalName(&table.Fields[i]) == ff.Name() {
				id, _ := schema.FieldID(&table.Fields[i])
				found = id == ff.ID()
			}
		}
		if !found {
			t.Errorf("%s: column %q (field id %d) is no physical column of the table", a.Path, ff.Name(), ff.ID())
		}
	}
}

// TestSparkV2Checkpoint: tables with V2 checkpoints (JSON and Parquet
// top-level files, with sidecars) read as Spark reads them at every
// version, also when the commits before the checkpoint are gone; appends,
// OPTIMIZE and VACUUM work, and a classic checkpoint written here reads
// back as delta-rs reads it.
func TestSparkV2Checkpoint(t *testing.T) {
	for _, name := range []string{"v2checkpoint", "v2checkpoint-parquet"} {
		t.Run(name, func(t *testing.T) {
			dir, exp := sparkFixture(t, name)
			cp, _ := filepath.Glob(filepath.Join(dir, "_delta_log", "*.checkpoint.*"))
			sidecars, _ := filepath.Glob(filepath.Join(dir, "_delta_log", "_sidecars", "*.parquet"))
			if len(cp) != 1 || len(sidecars) == 0 {
				t.Fatalf("fixture: checkpoints %v, sidecars %v", cp, sidecars)
			}
			// Only the checkpoint can reconstruct versions up to it now.
			for v := range int64(3) {
				if err := os.Remove(logPath(dir, fmt.Sprintf("%020d.json", v))); err != nil {
					t.Fatal(err)
				}
			}
			tbl := NewTable(localStore(t, dir))
			for v, rows := range exp.RowsByVersion {
				version, _ := json.Number(v).Int64()
				s, err := tbl.SnapshotAt(t.Context(), version)
				if version < 3 {
					if !errors.Is(err, ErrVersionNotFound) {
						t.Errorf("version %d: got %v, want ErrVersionNotFound", version, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("version %d: %v", version, err)
				}
				if version == 3 && s.CheckpointVersion() != 3 {
					t.Errorf("version 3 not read from the checkpoint")
				}
				checkRows(t, tbl, s, rows)
			}
			checkOps(t, dir, exp, nil)
			s, err := tbl.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if err := tbl.Checkpoint(t.Context(), s); err != nil {
				t.Fatal(err)
			}
			compareWithDeltaRSArgs(t, tbl, dir, true, []string{"--query"})
		})
	}
}

// TestSparkInCommitTimestamps: history and time travel use the in-commit
// timestamps (commit files copied now all have about the same modification
// time), and commits here write inCommitTimestamp first in commitInfo,
// strictly increasing, also for OPTIMIZE and VACUUM.
func TestSparkInCommitTimestamps(t *testing.T) {
	dir, exp := sparkFixture(t, "ict")
	tbl := NewTable(localStore(t, dir))
	hist, err := tbl.History(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hist {
		want := exp.History[h.Version].Timestamp
		if got := h.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z"); got != want {
			t.Errorf("history version %d: %s, Spark says %s", h.Version, got, want)
		}
	}
	for _, h := range exp.History {
		ts, err := time.Parse(time.RFC3339Nano, h.Timestamp)
		if err != nil {
			t.Fatal(err)
		}
		s, err := tbl.SnapshotAtTime(t.Context(), ts)
		if err != nil || s.Version() != h.Version {
			t.Fatalf("as of %s: %v, want version %d", h.Timestamp, err, h.Version)
		}
		if !s.Timestamp().Equal(ts) {
			t.Errorf("version %d: snapshot timestamp %s, want %s", h.Version, s.Timestamp(), ts)
		}
		if s, err := tbl.SnapshotAtTime(t.Context(), ts.Add(-time.Millisecond)); h.Version > 0 && (err != nil || s.Version() != h.Version-1) {
			t.Errorf("1 ms before version %d: %v", h.Version, err)
		}
	}
	checkOps(t, dir, exp, nil)
	// Make the clock lag behind the last commit: timestamps still increase.
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	last := s.Timestamp()
	tbl.now = func() time.Time { return last.Add(-time.Hour) }
	if _, err := appendRows(t, tbl, s, []Row{{int64(9), "z"}}); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "_delta_log", "*.json"))
	slices.Sort(files)
	prev := int64(0)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(data), `{"commitInfo":{"inCommitTimestamp":`) {
			t.Errorf("%s does not start with commitInfo.inCommitTimestamp: %.80s", filepath.Base(f), data)
			continue
		}
		actions, err := ParseActions(f, data)
		if err != nil {
			t.Fatal(err)
		}
		ict := *actions[0].CommitInfo.InCommitTimestamp
		if ict <= prev {
			t.Errorf("%s: inCommitTimestamp %d not after %d", filepath.Base(f), ict, prev)
		}
		prev = ict
	}
	if got := s.Timestamp().UnixMilli(); got != prev || got != last.UnixMilli()+1 {
		t.Errorf("snapshot timestamp %d, last commit %d, want %d", got, prev, last.UnixMilli()+1)
	}
}

// TestAbsoluteDeletionVectorPaths: DVs stored by absolute path (storageType
// 'p', which delta-spark 3.2 does not write: the dv fixture's descriptors
// are rewritten) read the same, and VACUUM keeps their files.
func TestAbsoluteDeletionVectorPaths(t *testing.T) {
	dir, exp := sparkFixture(t, "dv")
	commits, _ := filepath.Glob(filepath.Join(dir, "_delta_log", "*.json"))
	rewritten := 0
	for _, f := range commits {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		actions, err := ParseActions(f, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range actions {
			var dv *DeletionVector
			if a.Add != nil {
				dv = a.Add.DeletionVector
			} else if a.Remove != nil {
				dv = a.Remove.DeletionVector
			}
			if dv == nil {
				continue
			}
			rel, _, err := dv.RelativePath()
			if err != nil {
				t.Fatal(err)
			}
			dv.StorageType, dv.PathOrInlineDv = "p", "file://"+filepath.ToSlash(filepath.Join(dir, rel))
			rewritten++
		}
		if data, err = EncodeActions(actions); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if rewritten == 0 {
		t.Fatal("no DV rewritten")
	}
	tbl := NewTable(localStore(t, dir))
	checkEveryVersion(t, tbl, exp)
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := tbl.Vacuum(t.Context(), s, VacuumOptions{Retention: time.Millisecond, Force: true}); err != nil {
		t.Fatal(err)
	}
	checkRows(t, tbl, s, exp.Rows)
}
