package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/runtime/daemon"
	"github.com/deltaflow/deltaflow/storage"
)

// TestRestore: a table of three appends (versions 1-3), deltaflow's offset
// of partition 0 recorded (4), compacted (5), the offset moved on (6);
// restore to 4 re-adds the six appended files, removes the compacted two,
// keeps the offsets and says how to ingest again; restore to 5 after
// VACUUM refuses, naming the vacuumed file, on a dry run too; on disk and
// on MinIO.
func TestRestore(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		dir, tbl := newRowsTable(t, 3)
		testRestore(t, dir, tbl)
	})
	t.Run("minio", func(t *testing.T) {
		cfg := testenv.MinIO(t)
		cfg.Prefix = "tables/restore"
		store, err := storage.NewS3(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("MINIO_ENDPOINT", cfg.Endpoint)
		t.Setenv("MINIO_ACCESS_KEY", cfg.AccessKey)
		t.Setenv("MINIO_SECRET_KEY", string(cfg.SecretKey))
		testRestore(t, "s3://"+cfg.Bucket+"/"+cfg.Prefix, writeRowsTable(t, store, 3))
	})
}

func testRestore(t *testing.T, dir string, tbl *delta.Table) {
	cfg := daemon.DefaultConfig()
	appID := ledger.AppID(cfg.Table.AppID, cfg.Kafka.Topic, 0)
	setOffset := func(v int64) {
		t.Helper()
		s, err := tbl.Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Commit(t.Context(), s, []delta.Action{{Txn: &delta.Txn{AppID: appID, Version: v}}}, delta.Operation{Name: "STREAMING UPDATE"}); err != nil {
			t.Fatal(err)
		}
	}
	setOffset(10)
	mustRun(t, "optimize", "--table", dir)
	setOffset(20)
	rows4 := mustRun(t, "cat", "--table", dir, "--version", "4")

	out := mustRun(t, "restore", "--table", dir, "--version", "4", "--dry-run")
	for _, want := range []string{
		"dry run: restoring version 4 over version 6 would re-add 6 files", "remove 2 files", "leaving 6 files",
		"partition 0: next offset 11 at version 4, 21 kept",
		"deltaflow seek --table " + dir + " --offsets 0:11 --force",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("dry run output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "would re-add p=") != 6 || strings.Count(out, "would remove p=") != 2 {
		t.Fatalf("dry run lists the wrong files:\n%s", out)
	}
	if s, _ := tbl.Snapshot(t.Context()); s.Version() != 6 {
		t.Fatalf("dry run committed: version %d", s.Version())
	}

	var js restoreJSON
	if err := json.Unmarshal([]byte(mustRun(t, "restore", "--table", dir, "--version", "4", "--json")), &js); err != nil {
		t.Fatal(err)
	}
	if js.CommittedVersion == nil || *js.CommittedVersion != 7 || js.NumRestoredFiles != 6 || js.NumRemovedFiles != 2 ||
		js.NumOfFilesAfterRestore != 6 || len(js.Offsets) != 1 || *js.Offsets[0].Restored != 11 || js.Offsets[0].Kept != 21 {
		t.Fatalf("restore --json: %+v", js)
	}
	if got := mustRun(t, "cat", "--table", dir); got != rows4 {
		t.Fatalf("rows after restore differ from version 4's:\n%s\nwant\n%s", got, rows4)
	}
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.TxnVersion(appID); v != 20 {
		t.Fatalf("offset after restore %d, want 20 (kept)", v)
	}
	var hist []struct {
		Operation string         `json:"operation"`
		Metrics   map[string]any `json:"operationMetrics"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "inspect", "history", "--table", dir, "--json", "--limit", "1")), &hist); err != nil {
		t.Fatal(err)
	}
	if hist[0].Operation != "RESTORE" || hist[0].Metrics["numRestoredFiles"] != "6" || hist[0].Metrics["numRemovedFiles"] != "2" {
		t.Fatalf("history: %+v", hist)
	}

	// VACUUM deletes the compacted files restore removed; version 5 needs them.
	time.Sleep(5 * time.Millisecond)
	mustRun(t, "vacuum", "--table", dir, "--retain", "0h", "--force")
	s5, err := tbl.SnapshotAt(t.Context(), 5)
	if err != nil {
		t.Fatal(err)
	}
	gone := s5.Files()[0].Path
	for _, dry := range []string{"--dry-run", "--json"} {
		code, out, errs := run(t, "restore", "--table", dir, "--version", "5", dry)
		if code != 1 || out != "" || !strings.Contains(errs, "2 files of version 5 are gone (vacuumed or deleted)") ||
			!strings.Contains(errs, gone) {
			t.Fatalf("restore of a vacuumed version (%s): exit %d, stdout %q, stderr %q", dry, code, out, errs)
		}
	}
	if s, _ := tbl.Snapshot(t.Context()); s.Version() != 9 { // 8 and 9: VACUUM START, END
		t.Fatalf("refused restore committed: version %d", s.Version())
	}
}

func TestRestoreUsage(t *testing.T) {
	dir, _ := newRowsTable(t, 2)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"restore", "--table", dir}, 2, "at least one of the flags in the group [version timestamp] is required"},
		{[]string{"restore", "--table", dir, "--version", "1", "--timestamp", "2026-01-01"}, 2, "none of the others can be"},
		{[]string{"restore", "--table", dir, "--version", "-1"}, 2, "must be >= 0"},
		{[]string{"restore", "--table", dir, "--timestamp", "yesterday"}, 2, "--timestamp"},
		{[]string{"restore", "--table", dir, "--version", "2"}, 1, "nothing to restore: version 2 is not older than the latest version 2"},
		{[]string{"restore", "--table", dir, "--version", "9", "--dry-run"}, 1, "nothing to restore: version 9 is not older than the latest version 2"},
		{[]string{"restore", "--table", dir, "--timestamp", "2000-01-01"}, 1, "no commit at or before 2000-01-01"},
		{[]string{"restore", "--table", dir, "--timestamp", time.Now().Add(time.Hour).Format(time.RFC3339)}, 1, "nothing to restore"},
		{[]string{"restore", "--table", filepath.Join(dir, "missing"), "--version", "0"}, 1, "table not found"},
	} {
		code, _, errs := run(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
	// A dry run refuses a store the real run refuses (the single-writer
	// opt-in must be a boolean), as it refuses everything else.
	t.Setenv(daemon.SingleWriterEnv, "maybe")
	if code, _, errs := run(t, "restore", "--table", dir, "--version", "1", "--dry-run"); code != 2 || !strings.Contains(errs, daemon.SingleWriterEnv) {
		t.Errorf("dry run with %s=maybe: exit %d, stderr %q", daemon.SingleWriterEnv, code, errs)
	}
}

// TestRestoreBeforeTheTable: restore --timestamp before the table's first
// commit says there is no commit at or before it, as cat --timestamp
// does, not that the log was cleaned up (nothing was).
func TestRestoreBeforeTheTable(t *testing.T) {
	dir, _ := newRowsTable(t, 3)
	code, out, errs := run(t, "restore", "--table", dir, "--timestamp", "2001-01-01T00:00:00Z")
	if code != 1 || out != "" || !strings.Contains(errs, "no commit at or before 2001-01-01T00:00:00Z") ||
		strings.Contains(errs, "cleaned up") || !strings.Contains(errs, "inspect history") {
		t.Fatalf("restore before the table: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}
