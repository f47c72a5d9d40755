package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/storage"
)

// run runs the CLI and returns exit code, stdout and stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// newCLITable writes a small partitioned table with two commits.
func newCLITable(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	store, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	schema := &delta.StructType{Fields: []delta.StructField{
		{Name: "id", Type: delta.Long, Nullable: true},
		{Name: "p", Type: delta.String, Nullable: true},
	}}
	tbl := delta.NewTable(store)
	s, err := tbl.Create(t.Context(), schema, []string{"p"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []string{"a/b", "c"} {
		pv := map[string]*string{"p": &p}
		add, err := delta.WriteDataFile(t.Context(), store, schema, []string{"p"}, pv, []delta.Row{{int64(i), nil}, {int64(i + 10), nil}}, delta.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Commit(t.Context(), s, []delta.Action{{Add: add}, {Txn: &delta.Txn{AppID: "app-x-0", Version: int64(i)}}},
			delta.Operation{Name: "STREAMING UPDATE", Metrics: map[string]any{"numOutputRows": "2"}}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestInspectJSON(t *testing.T) {
	dir := newCLITable(t)
	code, out, errs := run(t, "inspect", "snapshot", "--table", dir, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var snap struct {
		Version          int64            `json:"version"`
		NumFiles         int              `json:"numFiles"`
		PartitionColumns []string         `json:"partitionColumns"`
		Schema           map[string]any   `json:"schema"`
		Txn              map[string]int64 `json:"txn"`
	}
	if err := json.Unmarshal([]byte(out), &snap); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if snap.Version != 2 || snap.NumFiles != 2 || snap.PartitionColumns[0] != "p" || snap.Schema["type"] != "struct" || snap.Txn["app-x-0"] != 1 {
		t.Fatalf("snapshot %+v", snap)
	}

	code, out, _ = run(t, "inspect", "files", "--table", "file://"+dir, "--json", "--version", "1")
	var files []struct {
		Path            string             `json:"path"`
		Size            int64              `json:"size"`
		PartitionValues map[string]*string `json:"partitionValues"`
		NumRecords      int64              `json:"numRecords"`
	}
	if err := json.Unmarshal([]byte(out), &files); code != 0 || err != nil || len(files) != 1 {
		t.Fatalf("files at version 1: %d %v %s", code, err, out)
	}
	if f := files[0]; !strings.HasPrefix(f.Path, "p=a%252Fb/part-") || f.Size == 0 || *f.PartitionValues["p"] != "a/b" || f.NumRecords != 2 {
		t.Fatalf("file %+v", f)
	}

	code, out, _ = run(t, "inspect", "history", "--table", dir, "--json")
	var hist []struct {
		Version          int64          `json:"version"`
		Timestamp        string         `json:"timestamp"`
		Operation        string         `json:"operation"`
		OperationMetrics map[string]any `json:"operationMetrics"`
	}
	if err := json.Unmarshal([]byte(out), &hist); code != 0 || err != nil || len(hist) != 3 {
		t.Fatalf("history: %d %v %s", code, err, out)
	}
	if hist[0].Version != 2 || hist[0].Operation != "STREAMING UPDATE" || hist[2].Operation != "CREATE TABLE" ||
		hist[0].OperationMetrics["numOutputRows"] != "2" {
		t.Fatalf("history %+v", hist)
	}
	if ts, err := time.Parse(time.RFC3339Nano, hist[0].Timestamp); err != nil || ts.Location() != time.UTC {
		t.Fatalf("timestamp %q: %v", hist[0].Timestamp, err)
	}
}

func TestInspectHuman(t *testing.T) {
	dir := newCLITable(t)
	for what, want := range map[string]string{
		"snapshot": "txn app-x-0", "files": "p=a%252Fb/part-", "history": "CREATE TABLE",
		"schema": "id      long", "partitions": "p=a%2Fb",
	} {
		code, out, errs := run(t, "inspect", what, "--table", dir)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("inspect %s: exit %d, stdout %q lacks %q (stderr %s)", what, code, out, want, errs)
		}
	}
}

// TestInspectFilesAligned: paths start in one column whatever the widths
// of the numbers before them, which are right-aligned.
func TestInspectFilesAligned(t *testing.T) {
	dir := newCLITable(t)
	code, out, errs := run(t, "inspect", "files", "--table", dir)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("exit %d, %q %s", code, out, errs)
	}
	at := strings.Index(lines[0], "PATH")
	for _, l := range lines[1:] {
		if i := strings.Index(l, "p="); i != at {
			t.Errorf("path of %q starts at %d, the header's at %d", l, i, at)
		}
		if !strings.HasPrefix(l, "      2") {
			t.Errorf("%q: records not right-aligned under RECORDS", l)
		}
	}
}

func TestInspectErrors(t *testing.T) {
	code, _, errs := run(t, "inspect", "snapshot", "--table", t.TempDir())
	if code != 1 || !strings.Contains(errs, "table not found") {
		t.Errorf("empty dir: exit %d, stderr %q", code, errs)
	}
	code, _, errs = run(t, "inspect", "snapshot")
	if code != 2 || !strings.Contains(errs, "--table is required") {
		t.Errorf("no table: exit %d, stderr %q", code, errs)
	}
	code, _, _ = run(t, "inspect", "bogus", "--table", t.TempDir())
	if code != 2 {
		t.Errorf("bogus target: exit %d", code)
	}
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("supersecret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs = run(t, "inspect", "snapshot", "--table", "s3://b/t", "--s3-endpoint", "127.0.0.1:1", "--s3-access-key", "k", "--s3-secret-key-file", keyFile)
	if code != 1 || strings.Contains(errs, "supersecret") {
		t.Errorf("unreachable s3: exit %d, stderr %q", code, errs)
	}
}

// TestTableByName: with a configuration of several tables, --table NAME
// picks one for every table command; without it, or with a name the
// configuration lacks, the command says which names exist.
func TestTableByName(t *testing.T) {
	a, b := newCLITable(t), newCLITable(t)
	// beta one version ahead, so the two tell apart.
	store, err := storage.NewLocal(b)
	if err != nil {
		t.Fatal(err)
	}
	tbl := delta.NewTable(store)
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(t.Context(), s, []delta.Action{{Txn: &delta.Txn{AppID: "app-x-0", Version: 5}}}, delta.Operation{Name: "SEEK"}); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "deltaflow.yaml")
	doc := fmt.Sprintf("tables:\n  - {name: alpha, uri: %q, topics: [a]}\n  - {name: beta, uri: %q, topics: [b]}\n", a, b)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, "inspect", "snapshot", "--config", cfg, "--table", "beta", "--json")
	var snap struct{ Version int64 }
	if err := json.Unmarshal([]byte(out), &snap); code != 0 || err != nil || snap.Version != 3 {
		t.Errorf("inspect --table beta: exit %d, %v: %s%s", code, err, out, errs)
	}
	for _, args := range [][]string{{"--table", "gamma"}, {}} {
		code, _, errs := run(t, append([]string{"inspect", "history", "--config", cfg}, args...)...)
		if code != 2 || !strings.Contains(errs, "tables: alpha, beta") {
			t.Errorf("inspect history %v: exit %d, %s; want a usage error naming the tables", args, code, errs)
		}
	}
}
