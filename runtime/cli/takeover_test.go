package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/storage"
)

// writeFiles writes files (relative path → content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// copyTree copies the files under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func tableVersion(t *testing.T, dir string) int64 {
	t.Helper()
	store, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := delta.NewTable(store).Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s.Version()
}

// TestTakeoverBadInput: a bad checkpoint, another topic or a bad table is
// a clear error (exit 1, the cause and the remedy on stderr) and writes no
// commit. None of these reach Kafka: the checks come first. (The
// scenarios on real Spark and Kafka are in internal/tests/takeover.)
func TestTakeoverBadInput(t *testing.T) {
	table := newCLITable(t)
	before := tableVersion(t, table)
	meta := `{"id":"6a4d2e5c-0f3b-4a57-9d0e-1b2c3d4e5f60"}`
	batch := "v1\n{\"batchWatermarkMs\":0,\"batchTimestampMs\":1,\"conf\":{}}\n"
	for _, tc := range []struct {
		name  string
		files map[string]string // nil: the checkpoint directory does not exist
		want  []string
	}{
		{"missing", nil, []string{"no such file or directory", "checkpointLocation"}},
		{"not spark", map[string]string{"part-0.parquet": "PAR1"}, []string{"not a Spark streaming checkpoint", "no metadata file"}},
		{"truncated offsets", map[string]string{"metadata": meta, "offsets/0": "v1\n{\"batchWat"}, []string{"corrupt", "offsets/0"}},
		{"newer spark", map[string]string{"metadata": meta, "offsets/0": "v2\n{}\n{}"}, []string{"v2", "newer Spark"}},
		{"other topic", map[string]string{"metadata": meta, "offsets/0": batch + `{"other-events":{"0":5}}`, "commits/0": "v1\n{}"},
			[]string{`reads topic "other-events"`, `kafka.topic is "sensor-events"`, "--topic"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ck := filepath.Join(t.TempDir(), "ckpt")
			if tc.files != nil {
				writeFiles(t, ck, tc.files)
			}
			code, out, errOut := run(t, "takeover", "--from-spark-checkpoint", ck, "--table", table, "--brokers", "127.0.0.1:1")
			if code != 1 {
				t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if v := tableVersion(t, table); v != before {
				t.Errorf("table at version %d after a refused takeover, want %d", v, before)
			}
		})
	}
	t.Run("another job's checkpoint", func(t *testing.T) {
		ck := filepath.Join(t.TempDir(), "ckpt")
		writeFiles(t, ck, map[string]string{"metadata": meta, "offsets/0": batch + `{"sensor-events":{"0":5}}`, "commits/0": "v1\n{}"})
		code, _, errOut := run(t, "takeover", "--from-spark-checkpoint", ck, "--table", table, "--brokers", "127.0.0.1:1")
		if code != 1 || !strings.Contains(errOut, "holds no txn of Spark query 6a4d2e5c") || !strings.Contains(errOut, "same Spark job") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if v := tableVersion(t, table); v != before {
			t.Errorf("table at version %d, want %d", v, before)
		}
	})
	t.Run("Spark wrote the table just now", func(t *testing.T) {
		// The checkpoint is an hour old, but the table's txn of the query
		// was updated a moment ago: the query is alive.
		ck := filepath.Join(t.TempDir(), "ckpt")
		writeFiles(t, ck, map[string]string{"metadata": meta, "offsets/0": batch + `{"sensor-events":{"0":5}}`, "commits/0": "v1\n{}"})
		old := time.Now().Add(-time.Hour)
		for _, f := range []string{"offsets/0", "commits/0"} {
			if err := os.Chtimes(filepath.Join(ck, f), old, old); err != nil {
				t.Fatal(err)
			}
		}
		live := filepath.Join(t.TempDir(), "live")
		copyTree(t, table, live)
		store, err := storage.NewLocal(live)
		if err != nil {
			t.Fatal(err)
		}
		tbl := delta.NewTable(store)
		snap, err := tbl.Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UnixMilli()
		txn := &delta.Txn{AppID: "6a4d2e5c-0f3b-4a57-9d0e-1b2c3d4e5f60", Version: 0, LastUpdated: &now}
		if _, err := tbl.Commit(t.Context(), snap, []delta.Action{{Txn: txn}}, delta.Operation{Name: "STREAMING UPDATE"}); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := run(t, "takeover", "--from-spark-checkpoint", ck, "--table", live, "--brokers", "127.0.0.1:1")
		if code != 1 || !strings.Contains(errOut, "looks alive: it wrote the table") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
	t.Run("no table", func(t *testing.T) {
		ck := filepath.Join(t.TempDir(), "ckpt")
		writeFiles(t, ck, map[string]string{"metadata": meta, "offsets/0": batch + `{"sensor-events":{"0":5}}`, "commits/0": "v1\n{}"})
		code, _, errOut := run(t, "takeover", "--from-spark-checkpoint", ck, "--table", filepath.Join(t.TempDir(), "none"))
		if code != 1 || !strings.Contains(errOut, "no such file or directory") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
	t.Run("usage", func(t *testing.T) {
		if code, _, errOut := run(t, "takeover", "--table", table); code != 2 || !strings.Contains(errOut, "--from-spark-checkpoint is required") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
}

// TestParseOffsets pins seek's --offsets syntax.
func TestParseOffsets(t *testing.T) {
	got, err := parseOffsets("0:123, 1:456")
	if err != nil || len(got) != 2 || got[0] != 123 || got[1] != 456 {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "0:x", "-1:5", "0:-5", "0:1,0:2"} {
		if _, err := parseOffsets(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
