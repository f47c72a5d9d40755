package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
)

func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		rows = append(rows, r)
	}
	return rows
}

func TestCat(t *testing.T) {
	dir, tbl := newRowsTable(t, 4) // ids 0-4 a, 5-9 b, 10-14 a, ... 35-39 b

	out := mustRun(t, "cat", "--table", dir)
	rows := jsonLines(t, out)
	if len(rows) != 40 {
		t.Fatalf("cat: %d rows", len(rows))
	}
	if out := mustRun(t, "cat", "--table", dir, "--where", "id = 0"); out != `{"id":0,"name":null,"ts":"2024-06-01T12:00:00.123456Z","p":"a"}`+"\n" {
		t.Errorf("id = 0: %s", out)
	}
	if got := jsonLines(t, mustRun(t, "cat", "--table", dir, "--limit", "3")); len(got) != 3 {
		t.Errorf("--limit 3: %d rows", len(got))
	}

	// Time travel: version 1 holds the first commit, ids 0-9.
	out = mustRun(t, "cat", "--table", dir, "--version", "1", "--where", "p = 'b'", "--columns", "id")
	if got := jsonLines(t, out); len(got) != 5 || got[0]["id"] != 5.0 {
		t.Errorf("version 1: %v", got)
	}
	if got := jsonLines(t, mustRun(t, "cat", "--table", dir, "--version", "2", "--where", "id >= 20")); len(got) != 0 {
		t.Errorf("version 2, id >= 20: %v", got)
	}

	// Partition pruning: only b's files are read.
	code, out, errs := run(t, "cat", "--table", dir, "--where", "p = 'b' AND id >= 30", "--stats", "--columns", "id,p")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if got := jsonLines(t, out); len(got) != 5 || got[0]["id"] != 35.0 || len(got[0]) != 2 {
		t.Fatalf("p = 'b' AND id >= 30: %v", got)
	}
	if !strings.Contains(errs, "files: 8 in snapshot 4, 4 pruned by partition, 3 skipped by statistics, 1 read; rows: 5 read, 5 printed") {
		t.Errorf("stats: %s", errs)
	}

	// Statistics skipping: corrupt every file whose ids are all below 20;
	// cat must never open them.
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range s.Files() {
		st, _ := delta.ParseStats(a.Stats)
		if max, _ := st.MaxValues["id"].(json.Number).Int64(); max < 20 {
			key, _ := delta.DecodePath(a.Path)
			if err := os.WriteFile(filepath.Join(dir, key), []byte("not parquet"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	code, out, errs = run(t, "cat", "--table", dir, "--where", "id > 21 AND id < 24 AND name != null", "--stats")
	if code != 0 {
		t.Fatalf("stats skipping: exit %d: %s", code, errs)
	}
	// 22 and 23; 21 and 24 are out, and multiples of 3 have no name.
	if got := jsonLines(t, out); len(got) != 2 || got[0]["id"] != 22.0 || got[1]["id"] != 23.0 {
		t.Fatalf("exact filter: %v", got)
	}
	if !strings.Contains(errs, "7 skipped by statistics, 1 read") {
		t.Errorf("stats: %s", errs)
	}
	// Reading a corrupt file fails (so the skipping above was real).
	if code, _, errs = run(t, "cat", "--table", dir, "--where", "id = 3"); code != 1 || !strings.Contains(errs, "read data file") {
		t.Errorf("corrupt file read: exit %d, %s", code, errs)
	}

	// Timestamps (stats floored to ms, rows compared exactly), nulls, CSV.
	out = mustRun(t, "cat", "--table", dir, "--where",
		"ts >= '2024-06-01T12:00:30.123456Z' AND ts < '2024-06-01 12:00:33.123456' AND name = null",
		"--format", "csv", "--columns", "id,name,ts")
	if want := "id,name,ts\n30,,2024-06-01T12:00:30.123456Z\n"; out != want {
		t.Errorf("csv: %q, want %q", out, want)
	}
	if _, err := csv.NewReader(strings.NewReader(out)).ReadAll(); err != nil {
		t.Error(err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--where", "nope = 1"}, `no column "nope"`},
		{[]string{"--where", "id = 'x'"}, "column id is long: want an integer"},
		{[]string{"--columns", "id,zzz"}, `--columns: no column "zzz"`},
		{[]string{"--format", "xml"}, "--format"},
		{[]string{"--version", "1", "--timestamp", "2024-01-01"}, "exclude each other"},
	} {
		code, _, errs := run(t, append([]string{"cat", "--table", dir}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, %q; want %q", tc.args, code, errs, tc.want)
		}
	}
}

func TestCatTimeTravelByTimestamp(t *testing.T) {
	dir, _ := newRowsTable(t, 2)
	// Time travel by timestamp uses the commit files' modification times;
	// commits written in the same millisecond cannot be told apart, so pin
	// them a second apart.
	v1 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for v, at := range map[int64]time.Time{0: v1.Add(-time.Second), 1: v1, 2: v1.Add(time.Second)} {
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(delta.CommitKey(v))), at, at); err != nil {
			t.Fatal(err)
		}
	}
	out := mustRun(t, "cat", "--table", dir, "--timestamp", v1.Format("2006-01-02T15:04:05.000Z07:00"), "--columns", "id")
	if got := jsonLines(t, out); len(got) != 10 {
		t.Errorf("as of version 1's time: %d rows, want 10", len(got))
	}
	if code, _, errs := run(t, "cat", "--table", dir, "--timestamp", "2000-01-01"); code != 1 || !strings.Contains(errs, "version not found") {
		t.Errorf("before the table: exit %d, %s", code, errs)
	}
}

func TestInspectOffsets(t *testing.T) {
	dir := newCLITable(t) // txn app-x-0 = 1
	t.Setenv("NATS_URL", "")
	t.Setenv("KAFKA_BOOTSTRAP", "")
	out := mustRun(t, "inspect", "offsets", "--table", dir, "--app", "app", "--topic", "x")
	if !strings.Contains(out, "0          1                    -          -           -             -") ||
		!strings.Contains(out, "note: nats: skipped (no --nats or NATS_URL)") {
		t.Errorf("table only:\n%s", out)
	}

	b, err := bridge.New(t.Context(), bridge.Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir()}, nil, bridge.WithTable("events"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.PutOffset(t.Context(), "x", 0, bridge.OffsetRecord{Offset: 1, Version: 2}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutOffset(t.Context(), "x", 3, bridge.OffsetRecord{Offset: 9, Version: 1}); err != nil {
		t.Fatal(err)
	}

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "x"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("x"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for range 3 {
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "x", Partition: 0, At: 2, LeaderEpoch: -1})
	if _, err := kadm.NewClient(cl).CommitOffsets(context.Background(), "g", offs); err != nil {
		t.Fatal(err)
	}

	out = mustRun(t, "inspect", "offsets", "--table", dir, "--app", "app", "--topic", "x", "--name", "events",
		"--nats", b.ClientURL(), "--brokers", strings.Join(cluster.ListenAddrs(), ","), "--group", "g", "--json")
	var got offsetsJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got.Partitions) != 3 || len(got.Notes) != 0 {
		t.Fatalf("offsets: %s", out)
	}
	p0, p1, p3 := got.Partitions[0], got.Partitions[1], got.Partitions[2]
	if *p0.TxnVersion != 1 || p0.KV.Offset != 1 || p0.KV.Version != 2 || *p0.GroupOffset != 2 || *p0.EndOffset != 3 {
		t.Errorf("partition 0: %s", out)
	}
	if p1.Partition != 1 || p1.TxnVersion != nil || p1.KV != nil || *p1.EndOffset != 0 {
		t.Errorf("partition 1: %s", out)
	}
	if p3.Partition != 3 || p3.TxnVersion != nil || p3.KV.Offset != 9 {
		t.Errorf("partition 3: %s", out)
	}
	if *p0.Lag != 1 || *p1.Lag != 0 {
		t.Errorf("lag: %s", out)
	}

	// A group that never committed: the end offsets and the lag all the same.
	out = mustRun(t, "inspect", "offsets", "--table", dir, "--app", "app", "--topic", "x",
		"--brokers", strings.Join(cluster.ListenAddrs(), ","), "--group", "never-committed")
	if !strings.Contains(out, "GROUP (NEXT)  END  LAG\n0          1                    -          -           -             3    1\n") {
		t.Errorf("group without offsets:\n%s", out)
	}

	// Unreachable servers are skipped with a note, quickly.
	out = mustRun(t, "inspect", "offsets", "--table", dir, "--app", "app", "--topic", "x",
		"--nats", "nats://127.0.0.1:1", "--brokers", "127.0.0.1:1")
	if !strings.Contains(out, "note: nats: skipped: connect nats://127.0.0.1:1") || !strings.Contains(out, "note: kafka: end offsets of x") {
		t.Errorf("unreachable:\n%s", out)
	}

	// With --config, the app, topic, table name, brokers and group are the
	// configuration's (as `run` writes them); flags still win.
	cfg := filepath.Join(t.TempDir(), "deltaflow.yaml")
	yaml := "table: {uri: " + dir + ", app_id: app, name: events}\nkafka: {topic: x, group: g, brokers: [" + cluster.ListenAddrs()[0] + "]}\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	out = mustRun(t, "inspect", "offsets", "--config", cfg)
	if !strings.Contains(out, "app app, topic x") || !strings.Contains(out, "\n0          1                    -          -           2             3    1\n") {
		t.Errorf("with --config:\n%s", out)
	}
	if out = mustRun(t, "inspect", "offsets", "--config", cfg, "--topic", "y"); !strings.Contains(out, `no txn for app "app" topic "y"`) {
		t.Errorf("with --config and --topic:\n%s", out)
	}
	// The KV mirror of an embedded server is found at nats.listen, as dlq
	// ls finds it (issue 30: it was skipped without --nats).
	listen := strings.TrimPrefix(b.ClientURL(), "nats://")
	if err := os.WriteFile(cfg, []byte(yaml+"nats: {listen: '"+listen+"'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out = mustRun(t, "inspect", "offsets", "--config", cfg, "--json")
	got = offsetsJSON{}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Partitions) == 0 || got.Partitions[0].KV == nil || got.Partitions[0].KV.Offset != 1 {
		t.Errorf("with --config and an embedded server at nats.listen: %v\n%s", err, out)
	}
}
