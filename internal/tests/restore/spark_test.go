package restore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// sparkView is a table as scripts/spark/restore_check.py reads it with Spark.
type sparkView struct {
	Rows       []map[string]any  `json:"rows"`
	Files      []string          `json:"files"`
	Columns    []string          `json:"columns"`
	Version    int64             `json:"version"`
	Operation  string            `json:"operation"`
	Parameters map[string]any    `json:"operationParameters"`
	Metrics    map[string]string `json:"operationMetrics"`
}

// cliRun is one `deltaflow restore` the script ran.
type cliRun struct {
	RC     int    `json:"rc"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

type checkOutput struct {
	Latest int64 `json:"latest"`
	Cases  map[string]struct {
		DeltaflowDir string     `json:"deltaflowDir"`
		SparkDir     string     `json:"sparkDir"`
		DeltaflowRun cliRun     `json:"deltaflowRun"`
		Deltaflow    *sparkView `json:"deltaflow"`
		Spark        sparkView  `json:"spark"`
	} `json:"cases"`
	Vacuumed struct {
		Dir           string  `json:"dir"`
		VersionBefore int64   `json:"versionBefore"`
		VersionAfter  int64   `json:"versionAfter"`
		SparkError    *string `json:"sparkError"`
		DryRun        cliRun  `json:"dryRun"`
		Run           cliRun  `json:"run"`
	} `json:"vacuumed"`
}

// TestRestoreMatchesSpark: on copies of one table Spark made (appends,
// OPTIMIZE, deletion vectors, ADD COLUMNS), `deltaflow restore` and Spark's
// RESTORE TABLE, to a version and to a time, leave the same live files
// (with the same deletion vectors), rows and schema, and a RESTORE commit
// with the same operationParameters and operationMetrics as Spark shows
// them; Spark, delta-rs and DuckDB read deltaflow's result alike. After
// VACUUM, both refuse a version whose files are gone, deltaflow naming
// them, and neither commits.
func TestRestoreMatchesSpark(t *testing.T) {
	py, dir := testenv.Spark(t)
	bin := scenario.Binary(t)
	work := t.TempDir()
	var res checkOutput
	testenv.RunSparkJSON(t, &res, py, dir, "restore_check.py", "--deltaflow", bin, "--dir", work)
	if len(res.Cases) != 3 {
		t.Fatalf("%d cases, want 3", len(res.Cases))
	}
	for name, c := range res.Cases {
		t.Run(name, func(t *testing.T) {
			if c.DeltaflowRun.RC != 0 || c.Deltaflow == nil {
				t.Fatalf("deltaflow restore: exit %d\n%s", c.DeltaflowRun.RC, c.DeltaflowRun.Stderr)
			}
			ours, theirs := c.Deltaflow, &c.Spark
			if theirs.Operation != "RESTORE" || ours.Operation != "RESTORE" || ours.Version != res.Latest+1 || theirs.Version != res.Latest+1 {
				t.Fatalf("last commits: ours %s at %d, Spark's %s at %d; want RESTORE at %d", ours.Operation, ours.Version, theirs.Operation, theirs.Version, res.Latest+1)
			}
			if !reflect.DeepEqual(ours.Parameters, theirs.Parameters) || !reflect.DeepEqual(ours.Metrics, theirs.Metrics) {
				t.Errorf("RESTORE commit as DESCRIBE HISTORY shows it:\nours:  %v %v\nSpark: %v %v", ours.Parameters, ours.Metrics, theirs.Parameters, theirs.Metrics)
			}
			if len(theirs.Rows) == 0 || !reflect.DeepEqual(ours.Rows, theirs.Rows) {
				t.Errorf("Spark reads %d rows of ours, %d of Spark's restore; they differ", len(ours.Rows), len(theirs.Rows))
			}
			if !reflect.DeepEqual(relative(ours.Files, c.DeltaflowDir), relative(theirs.Files, c.SparkDir)) {
				t.Errorf("Spark reads these files of ours:\n%v\nand of Spark's restore:\n%v", ours.Files, theirs.Files)
			}
			if !reflect.DeepEqual(ours.Columns, theirs.Columns) {
				t.Errorf("columns %v, Spark's restore %v", ours.Columns, theirs.Columns)
			}
			if a, b := liveFiles(t, c.DeltaflowDir), liveFiles(t, c.SparkDir); a != b {
				t.Errorf("live files (with deletion vectors) differ:\nours:  %s\nSpark: %s", a, b)
			}
			// delta-rs (DataFusion applies the deletion vectors) and DuckDB
			// read what Spark reads.
			raw := testenv.DeltaRS(t, nil, "read", c.DeltaflowDir, "--rows", "--query", "--duckdb")
			testenv.CheckDuckDB(t, raw)
			var rs struct {
				Rows []map[string]any `json:"rows"`
			}
			if err := json.Unmarshal(raw, &rs); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rs.Rows, theirs.Rows) {
				t.Errorf("delta-rs reads %d rows, Spark %d; they differ", len(rs.Rows), len(theirs.Rows))
			}
		})
	}

	v := res.Vacuumed
	if v.SparkError == nil {
		t.Errorf("Spark restored a version whose files VACUUM deleted")
	}
	gone := goneFiles(t, v.Dir, 3)
	if len(gone) == 0 {
		t.Fatal("VACUUM deleted none of version 3's files")
	}
	for _, r := range []cliRun{v.DryRun, v.Run} {
		if r.RC != 1 || r.Stdout != "" || !strings.Contains(r.Stderr, fmt.Sprintf("%d files of version 3 are gone (vacuumed or deleted)", len(gone))) ||
			!strings.Contains(r.Stderr, gone[0]) {
			t.Errorf("deltaflow restore of a vacuumed version: exit %d, stdout %q, stderr %q; want exit 1 naming %s", r.RC, r.Stdout, r.Stderr, gone[0])
		}
	}
	if v.VersionAfter != v.VersionBefore {
		t.Errorf("a refused restore committed: version %d, was %d", v.VersionAfter, v.VersionBefore)
	}
}

// relative strips each table's own directory from the file URIs Spark reads.
func relative(files []string, dir string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = strings.TrimPrefix(strings.TrimPrefix(f, "file:"), dir+"/")
	}
	return out
}

// liveFiles lists the table's live files with their deletion vectors, as
// deltaflow replays the log.
func liveFiles(t *testing.T, dir string) string {
	t.Helper()
	s := snapshot(t, dir, -1)
	var out []string
	for _, a := range s.Files() {
		out = append(out, a.Path+" dv="+a.DeletionVector.UniqueID())
	}
	return strings.Join(out, "\n       ")
}

// goneFiles are the paths (as in the log) of version's live files that are
// no longer on disk.
func goneFiles(t *testing.T, dir string, version int64) []string {
	t.Helper()
	var gone []string
	for _, a := range snapshot(t, dir, version).Files() {
		key, err := delta.DecodePath(a.Path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, key)); errors.Is(err, fs.ErrNotExist) {
			gone = append(gone, a.Path)
		}
	}
	return gone
}

func snapshot(t *testing.T, dir string, version int64) *delta.Snapshot {
	t.Helper()
	store, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	tbl := delta.NewTable(store)
	var s *delta.Snapshot
	if version < 0 {
		s, err = tbl.Snapshot(t.Context())
	} else {
		s, err = tbl.SnapshotAt(t.Context(), version)
	}
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return s
}
