package cli

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/runtime/daemon"
	"github.com/deltaflow/deltaflow/storage"
)

// TestUsageErrors: a usage error is one message naming what was wrong and
// a hint, exit 2; no command shows the help, exit 2.
func TestUsageErrors(t *testing.T) {
	dir := newCLITable(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"vacuum", "--table", dir, "--bogus"},
			"deltaflow vacuum: unknown flag: --bogus\nRun 'deltaflow vacuum --help' for usage.\n"},
		{[]string{"inspect", "snapshot", "-table", dir},
			"deltaflow inspect snapshot: unknown shorthand flag: 't' in -table (long flags take two dashes: --table)\nRun 'deltaflow inspect snapshot --help' for usage.\n"},
		{[]string{"bogus"}, "deltaflow: unknown command \"bogus\" for \"deltaflow\"\nRun 'deltaflow --help' for usage.\n"},
		{[]string{"inspect", "bogus", "--table", dir},
			"deltaflow inspect: unknown command \"bogus\" for \"deltaflow inspect\"\nRun 'deltaflow inspect --help' for usage.\n"},
		{[]string{"help", "bogus"}, "deltaflow help: unknown help topic \"bogus\"\nRun 'deltaflow help --help' for usage.\n"},
		{[]string{"verify", "--table", dir, "extra"},
			"deltaflow verify: unexpected argument \"extra\"\nRun 'deltaflow verify --help' for usage.\n"},
		{[]string{"inspect", "snapshot", "--version", "x", "--table", dir},
			"deltaflow inspect snapshot: invalid argument \"x\" for \"--version\" flag: not an integer\nRun 'deltaflow inspect snapshot --help' for usage.\n"},
		// Out-of-range numbers are usage errors, not another meaning.
		{[]string{"cat", "--table", dir, "--version", "-1"},
			"deltaflow cat: invalid argument \"-1\" for \"--version\" flag: must be >= 0\nRun 'deltaflow cat --help' for usage.\n"},
		{[]string{"inspect", "snapshot", "--table", dir, "--version", "-5"},
			"deltaflow inspect snapshot: invalid argument \"-5\" for \"--version\" flag: must be >= 0\nRun 'deltaflow inspect snapshot --help' for usage.\n"},
		{[]string{"cat", "--table", dir, "--limit", "-3"},
			"deltaflow cat: invalid argument \"-3\" for \"--limit\" flag: must be >= 0\nRun 'deltaflow cat --help' for usage.\n"},
		{[]string{"inspect", "history", "--table", dir, "--limit", "-1"},
			"deltaflow inspect history: invalid argument \"-1\" for \"--limit\" flag: must be >= 0\nRun 'deltaflow inspect history --help' for usage.\n"},
		{[]string{"takeover", "--table", dir, "--from-spark-checkpoint", dir, "--quiet-for", "-2m"},
			"deltaflow takeover: invalid argument \"-2m\" for \"--quiet-for\" flag: must be >= 0s\nRun 'deltaflow takeover --help' for usage.\n"},
		{[]string{"healthcheck", "--timeout", "0s"},
			"deltaflow healthcheck: invalid argument \"0s\" for \"--timeout\" flag: must be >= 1ms\nRun 'deltaflow healthcheck --help' for usage.\n"},
	} {
		code, out, errs := run(t, tc.args...)
		if code != 2 || out != "" || errs != tc.want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errs, tc.want)
		}
	}
	for _, args := range [][]string{nil, {"inspect"}} {
		code, out, errs := run(t, args...)
		if code != 2 || !strings.Contains(out, "Usage:") || errs != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
}

// TestErrorPrefixOnce: a library error that starts with the command's name
// is not prefixed with it twice.
func TestErrorPrefixOnce(t *testing.T) {
	dir, _ := newRowsTable(t, 2)
	files, err := filepath.Glob(filepath.Join(dir, "p=a", "*.parquet"))
	if err != nil || len(files) != 2 {
		t.Fatalf("fixture: %v %v", files, err)
	}
	if err := os.WriteFile(files[0], []byte("not parquet"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run(t, "optimize", "--table", dir)
	if code != 1 || !strings.HasPrefix(errs, "deltaflow optimize: ") || strings.Contains(errs, "optimize: optimize:") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

func TestVersion(t *testing.T) {
	_, long, _ := run(t, "--version")
	code, out, errs := run(t, "version")
	if code != 0 || out != long || !strings.HasPrefix(out, "deltaflow "+daemon.Version()+" (revision ") {
		t.Errorf("version: exit %d, %q (--version: %q) %s", code, out, long, errs)
	}
	code, out, errs = run(t, "version", "--json")
	var v versionJSON
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.Build != daemon.BuildInfo() || v.OS == "" || v.Arch == "" {
		t.Errorf("version --json: exit %d, %v: %s%s", code, err, out, errs)
	}
}

// TestTableFromEnvAndConfig: --table beats $DELTAFLOW_TABLE_URI, which
// beats --config's table.uri; --config may come from $DELTAFLOW_CONFIG.
func TestTableFromEnvAndConfig(t *testing.T) {
	dir := newCLITable(t)
	empty := t.TempDir()
	config := func(uri string) string {
		path := filepath.Join(t.TempDir(), "deltaflow.yaml")
		if err := os.WriteFile(path, []byte("table:\n  uri: "+uri+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	snapshotVersion := func(args ...string) int64 {
		t.Helper()
		code, out, errs := run(t, append([]string{"inspect", "snapshot", "--json"}, args...)...)
		var s struct{ Version int64 }
		if err := json.Unmarshal([]byte(out), &s); code != 0 || err != nil {
			t.Fatalf("%v: exit %d, %v: %s", args, code, err, errs)
		}
		return s.Version
	}
	if v := snapshotVersion("--config", config(dir)); v != 2 {
		t.Errorf("--config: version %d", v)
	}
	t.Setenv(configEnv, config(dir))
	if v := snapshotVersion(); v != 2 {
		t.Errorf("$%s: version %d", configEnv, v)
	}
	t.Setenv(configEnv, config(empty))
	t.Setenv(tableEnv, dir)
	if v := snapshotVersion(); v != 2 {
		t.Errorf("$%s over the config: version %d", tableEnv, v)
	}
	if code, _, errs := run(t, "verify", "--table", empty); code != 1 || !strings.Contains(errs, "table not found") {
		t.Errorf("--table over $%s: exit %d, %s", tableEnv, code, errs)
	}
}

// TestJSONOutput: the maintenance commands print JSON with --json, and
// timestamps in JSON are RFC 3339 UTC.
func TestJSONOutput(t *testing.T) {
	dir, _ := newRowsTable(t, 2)
	decode := func(v any, args ...string) {
		t.Helper()
		code, out, errs := run(t, args...)
		if err := json.Unmarshal([]byte(out), v); code != 0 || err != nil {
			t.Fatalf("%v: exit %d, %v: %s%s", args, code, err, out, errs)
		}
	}
	var ver verifyJSON
	decode(&ver, "verify", "--table", dir, "--deep", "--json")
	if !ver.OK || ver.Files != 4 || ver.Rows != 20 || !ver.Deep || ver.Version != 2 || ver.Failures == nil {
		t.Errorf("verify: %+v", ver)
	}
	var opt optimizeJSON
	decode(&opt, "optimize", "--table", dir, "--dry-run", "--json")
	if !opt.DryRun || opt.CommittedVersion != nil || len(opt.Bins) != 2 || opt.Bins[0].Partition != "p=a" || opt.Bins[0].NumFiles != 2 {
		t.Errorf("optimize --dry-run: %+v", opt)
	}
	decode(&opt, "optimize", "--table", dir, "--json")
	if opt.DryRun || opt.CommittedVersion == nil || *opt.CommittedVersion != 3 || opt.FilesRemoved != 4 || opt.FilesAdded != 2 {
		t.Errorf("optimize: %+v", opt)
	}
	var vac vacuumJSON
	decode(&vac, "vacuum", "--table", dir, "--retain", "0", "--force", "--dry-run", "--json")
	if !vac.DryRun || len(vac.Files) != 4 || vac.Retention != "0s" || vac.Version != 3 {
		t.Errorf("vacuum --dry-run: %+v", vac)
	}
	decode(&vac, "vacuum", "--table", dir, "--retain", "0", "--force", "--json", "--single-writer")
	if vac.DryRun || len(vac.Files) != 4 || vac.LogRetention == "" || vac.Version != 5 {
		t.Errorf("vacuum: %+v", vac)
	}
	var snap struct{ Timestamp string }
	decode(&snap, "inspect", "snapshot", "--table", dir, "--json")
	if ts, err := time.Parse(time.RFC3339Nano, snap.Timestamp); err != nil || !strings.HasSuffix(snap.Timestamp, "Z") || time.Since(ts) > time.Hour {
		t.Errorf("snapshot timestamp %q: %v", snap.Timestamp, err)
	}
}

// seekCluster is a kfake cluster with topic t1 of two partitions, closed
// with the test.
func seekCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return cluster
}

// TestSeekJSON: seek --json prints the plan and the version it wrote.
func TestSeekJSON(t *testing.T) {
	cluster := seekCluster(t)
	table := filepath.Join(t.TempDir(), "table")
	code, out, errs := run(t, "seek", "--table", table, "--brokers", cluster.ListenAddrs()[0], "--topic", "t1", "--offsets", "0:0,1:0", "--json")
	var js startJSON
	if err := json.Unmarshal([]byte(out), &js); code != 0 || err != nil {
		t.Fatalf("exit %d, %v: %s%s", code, err, out, errs)
	}
	if js.DryRun || js.Version == nil || js.Topic != "t1" || len(js.Partitions) != 2 || js.Partitions[1].From == nil || *js.Partitions[1].From != 0 {
		t.Errorf("%s", out)
	}
	if code, _, errs := run(t, "seek", "--table", table, "--brokers", cluster.ListenAddrs()[0], "--topic", "t1", "--offsets", "0:0", "--group", "g"); code != 2 || !strings.Contains(errs, "none of the others can be") {
		t.Errorf("two sources: exit %d, %s", code, errs)
	}
}

// TestSeekRecordsTopicID: seek records the topic's ID with the offsets;
// after the topic is recreated, a seek that leaves a partition at an offset
// of the old topic is refused (under the new ID it would look valid), and
// one that sets every partition records the new ID.
func TestSeekRecordsTopicID(t *testing.T) {
	cluster := seekCluster(t)
	broker := cluster.ListenAddrs()[0]
	table := filepath.Join(t.TempDir(), "table")
	topicID := func() string {
		t.Helper()
		store, err := storage.NewLocal(table)
		if err != nil {
			t.Fatal(err)
		}
		s, err := delta.NewTable(store).Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return s.Metadata().Configuration[ledger.TopicIDProperty("deltaflow", "t1")]
	}
	if code, _, errs := run(t, "seek", "--table", table, "--brokers", broker, "--topic", "t1", "--offsets", "0:0,1:0"); code != 0 {
		t.Fatalf("seek: exit %d: %s", code, errs)
	}
	first := topicID()
	if first == "" {
		t.Fatal("seek recorded no topic ID")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.DeleteTopics(t.Context(), "t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopics(t.Context(), 2, 1, nil, "t1"); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run(t, "seek", "--table", table, "--brokers", broker, "--topic", "t1", "--offsets", "0:0", "--force")
	if code != 1 || !strings.Contains(errs, "deleted and created again") || !strings.Contains(errs, "partitions [1] would keep offsets of the old topic") {
		t.Fatalf("partial seek after recreation: exit %d: %s", code, errs)
	}
	if code, _, errs := run(t, "seek", "--table", table, "--brokers", broker, "--topic", "t1", "--offsets", "0:0,1:0", "--force"); code != 0 {
		t.Fatalf("full seek after recreation: exit %d: %s", code, errs)
	}
	if now := topicID(); now == first || now == "" {
		t.Errorf("topic ID %q after seeking the recreated topic; want the new one, not %q", now, first)
	}
}

// TestSeekFromApp: seek --from-app writes, under the configured app, the
// offsets another app stopped at (a renamed table.app_id continues where
// the old one stopped instead of reading the topic again); an app with no
// offsets is refused, naming those that have some.
func TestSeekFromApp(t *testing.T) {
	cluster := seekCluster(t)
	broker := cluster.ListenAddrs()[0]
	table := filepath.Join(t.TempDir(), "table")
	seek := func(args ...string) (int, string) {
		code, _, errs := run(t, append([]string{"seek", "--table", table, "--brokers", broker, "--topic", "t1"}, args...)...)
		return code, errs
	}
	if code, errs := seek("--offsets", "0:0,1:0"); code != 0 {
		t.Fatalf("seek: exit %d: %s", code, errs)
	}
	if code, errs := seek("--app", "renamed", "--from-app", "deltaflow"); code != 0 {
		t.Fatalf("seek --from-app: exit %d: %s", code, errs)
	}
	store, err := storage.NewLocal(table)
	if err != nil {
		t.Fatal(err)
	}
	s, err := delta.NewTable(store).Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ledger.Last(s, "renamed", "t1"), ledger.Last(s, "deltaflow", "t1"); len(got) != 2 || !maps.Equal(got, want) {
		t.Errorf("renamed holds %v; want deltaflow's %v", got, want)
	}
	if code, errs := seek("--app", "third", "--from-app", "nobody"); code != 1 || !strings.Contains(errs, "apps with offsets of it: deltaflow, renamed") {
		t.Errorf("--from-app of an app without offsets: exit %d, %s", code, errs)
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, out, errs := run(t, "completion", shell)
		if code != 0 || !strings.Contains(out, "deltaflow") || errs != "" {
			t.Errorf("%s: exit %d, %d bytes, %s", shell, code, len(out), errs)
		}
	}
	// Flag values and subcommands complete.
	if _, out, _ := run(t, "__complete", "cat", "--format", ""); !strings.Contains(out, "jsonl\ncsv\n") {
		t.Errorf("cat --format: %q", out)
	}
	if _, out, _ := run(t, "__complete", "inspect", ""); !strings.Contains(out, "snapshot") {
		t.Errorf("inspect: %q", out)
	}
}

// TestTableNotFound: a table that is not there says why: a missing path, a
// directory that is not a Delta table, or the _delta_log directory given
// instead of the table's root; reading creates nothing.
func TestTableNotFound(t *testing.T) {
	table := newCLITable(t)
	missing := filepath.Join(t.TempDir(), "typo")
	for _, tc := range []struct{ table, want string }{
		{missing, "delta: table not found: no such directory: " + missing},
		{t.TempDir(), "is not a Delta table: it has no _delta_log directory"},
		{filepath.Join(table, "_delta_log"), "this is the table's _delta_log directory; give the table's root, file://" + table},
	} {
		code, _, errs := run(t, "inspect", "snapshot", "--table", tc.table)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d, %q; want 1 and %q", tc.table, code, errs, tc.want)
		}
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("inspect created %s", missing)
	}
}

// TestSeekDryRunPredictsRefusals: seek --dry-run refuses what seek would
// refuse (exit 1), writes nothing, and creates no table.
func TestSeekDryRunPredictsRefusals(t *testing.T) {
	cluster := seekCluster(t)
	seek := func(table string, extra ...string) (int, string, string) {
		return run(t, append([]string{"seek", "--table", table, "--brokers", cluster.ListenAddrs()[0], "--topic", "t1",
			"--offsets", "0:0,1:0"}, extra...)...)
	}
	table := filepath.Join(t.TempDir(), "table")
	if code, out, errs := seek(table, "--dry-run"); code != 0 || !strings.Contains(out, "does not exist yet") {
		t.Fatalf("dry run on a new table: exit %d: %s%s", code, out, errs)
	}
	if _, err := os.Stat(table); err == nil {
		t.Fatal("a dry run created the table's directory")
	}
	if code, _, errs := seek(table); code != 0 {
		t.Fatalf("seek: exit %d: %s", code, errs)
	}
	code, _, errs := seek(table, "--dry-run")
	if code != 1 || !strings.Contains(errs, "already holds deltaflow offsets") {
		t.Fatalf("dry run where seek refuses: exit %d, %q; want 1 and the refusal", code, errs)
	}
	if code, out, errs := seek(table, "--dry-run", "--force"); code != 0 || !strings.Contains(out, "stays at version 1") {
		t.Fatalf("dry run with --force: exit %d: %s%s", code, out, errs)
	}
}
