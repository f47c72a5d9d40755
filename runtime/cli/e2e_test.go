package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds cmd/deltaflow once per test process.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "deltaflow-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "deltaflow")
		out, err := exec.Command("go", "build", "-o", binPath, "../../cmd/deltaflow").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// streamer produces simulated records into a cluster until stopped.
type streamer struct {
	cancel context.CancelFunc
	done   chan error
	count  atomic.Int64
}

func startStreaming(t *testing.T, brokers []string, rate float64) *streamer {
	t.Helper()
	kcfg := kafka.DefaultConfig()
	kcfg.Brokers = brokers
	p, err := kafka.NewProducer(kcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &streamer{cancel: cancel, done: make(chan error, 1)}
	go func() {
		defer p.Close()
		res, err := produceSim(ctx, p, "sensor-events", produceOptions{rate: rate, devices: 20, seed: 7},
			func(n int64) { s.count.Store(n) })
		s.count.Store(res.produced)
		s.done <- err
	}()
	return s
}

func (s *streamer) stop(t *testing.T) int64 {
	t.Helper()
	s.cancel()
	if err := <-s.done; err != nil {
		t.Fatal(err)
	}
	return s.count.Load()
}

func writeConfig(t *testing.T, dir string, brokers []string) string {
	t.Helper()
	cfg := fmt.Sprintf(`table:
  uri: %s
kafka:
  brokers: [%s]
  group: sigterm-test
nats:
  listen: 127.0.0.1:-1
  store_dir: %s
flush:
  interval: 1s
http:
  listen: 127.0.0.1:0
`, filepath.Join(dir, "sensor_events"), brokers[0], filepath.Join(dir, "nats"))
	path := filepath.Join(dir, "deltaflow.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// tableState returns the committed rows (sum of numRecords), the txn
// versions and the number of distinct (device_id, event_time) rows.
func tableState(t *testing.T, uri string) (rows int64, txns map[string]int64, distinct int) {
	t.Helper()
	store, err := storage.NewLocal(uri)
	if err != nil {
		t.Fatal(err)
	}
	s, err := delta.NewTable(store).Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := s.Schema()
	seen := map[string]bool{}
	for _, a := range s.Files() {
		rows += *numRecords(a)
		data, err := delta.ReadDataFile(t.Context(), store, schema, s.PartitionColumns(), a)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range data {
			seen[fmt.Sprint(r[0], r[2])] = true
		}
	}
	return rows, s.Txns(), len(seen)
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestSIGTERM runs the daemon binary while records stream in, stops it with
// SIGTERM, and checks it exits 0 within 10 s and that the table, after a
// second run with --until-latest, holds every record exactly once.
func TestSIGTERM(t *testing.T) {
	bin := binary(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "sensor-events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	dir := t.TempDir()
	config := writeConfig(t, dir, brokers)
	stream := startStreaming(t, brokers, 2000)

	var stderr bytes.Buffer
	cmd := exec.Command(bin, "run", "--config", config)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // a few flush intervals, mid-stream
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		took := time.Since(sent)
		if code := exitCode(err); code != 0 {
			t.Fatalf("exit code %d after SIGTERM\n%s", code, stderr.String())
		}
		if took > 10*time.Second {
			t.Fatalf("exit took %s", took)
		}
		t.Logf("exited 0 %s after SIGTERM", took.Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("still running 10s after SIGTERM\n%s", stderr.String())
	}
	rows, _, _ := tableState(t, filepath.Join(dir, "sensor_events"))
	if rows == 0 {
		t.Fatalf("nothing committed before SIGTERM\n%s", stderr.String())
	}
	produced := stream.stop(t)
	t.Logf("%d rows committed by the first run, %d records produced", rows, produced)

	stderr.Reset()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd = exec.CommandContext(ctx, bin, "run", "--config", config, "--until-latest")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("run --until-latest: %v\n%s", err, stderr.String())
	}
	rows, txns, distinct := tableState(t, filepath.Join(dir, "sensor_events"))
	if rows != produced || int64(distinct) != produced {
		t.Fatalf("table holds %d rows (%d distinct), %d records were produced", rows, distinct, produced)
	}
	hw := testenv.HighWatermarks(t, brokers, "sensor-events")
	var sum int64
	for p, h := range hw {
		sum += h
		id := "deltaflow-sensor-events-" + strconv.Itoa(int(p))
		if v, ok := txns[id]; !ok || v != h-1 {
			t.Errorf("txn %s = %d (present %t), high watermark %d", id, v, ok, h)
		}
	}
	if sum != produced {
		t.Errorf("high watermarks sum to %d, produced %d", sum, produced)
	}
}

var finalLine = regexp.MustCompile(`(?m)^produced (\d+) events \((\d+) malformed\), committed (\d+) rows, (\d+) dead letters in stream DELTAFLOW_DLQ_SENSOR_EVENTS$`)

// TestDemo: the demo with malformed records commits every good one once,
// stores every bad one in the DLQ and says so; its events are of today (the
// simulator's clock is the wall clock), so the table looks fresh; delta-rs
// and DuckDB read its rows.
func TestDemo(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "demo", "--duration", "10s", "--bad-ratio", "0.02", "--data", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	m := finalLine.FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no final line in:\n%s", stdout.String())
	}
	n := func(i int) int64 { v, _ := strconv.ParseInt(m[i], 10, 64); return v }
	if produced, bad, rows, letters := n(1), n(2), n(3), n(4); bad == 0 || rows != produced-bad || letters != bad {
		t.Fatalf("final line %q: want rows = produced - malformed and one dead letter per malformed event", m[0])
	}
	rows, _, distinct := tableState(t, filepath.Join(dir, "sensor_events"))
	if strconv.FormatInt(rows, 10) != m[3] || strconv.Itoa(distinct) != m[3] {
		t.Fatalf("table holds %d rows (%d distinct), demo said %s", rows, distinct, m[3])
	}
	if newest := newestEventTime(t, filepath.Join(dir, "sensor_events")); newest.Before(start) || newest.After(time.Now().Add(time.Minute)) {
		t.Errorf("newest event_time %s; want it during the demo (started %s)", newest, start)
	}
	// The README's DuckDB query on the demo's table reads those rows, as
	// delta-rs does.
	raw := testenv.DeltaRS(t, nil, "read", filepath.Join(dir, "sensor_events"), "--rows", "--duckdb")
	testenv.CheckDuckDB(t, raw)
	var view struct {
		Rows []json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(raw, &view); err != nil || strconv.Itoa(len(view.Rows)) != m[3] {
		t.Fatalf("delta-rs and DuckDB read %d rows (%v), demo said %s", len(view.Rows), err, m[3])
	}
	readmeDuckDB(t, filepath.Join(dir, "sensor_events"), n(3))
	// The hint after the final line lists the letters, the demo stopped
	// (issue 30: it said "while it runs: nats ...").
	hint := regexp.MustCompile(`\(DELTAFLOW_TABLE_URI=(\S+) deltaflow dlq ls lists them\)`).FindStringSubmatch(stdout.String())
	if hint == nil {
		t.Fatalf("no dlq ls hint after the final line:\n%s", stdout.String())
	}
	t.Setenv("DELTAFLOW_TABLE_URI", hint[1])
	code, ls, errs := run(t, "dlq", "ls", "--limit", "0", "--json")
	var letters []letterJSON
	if err := json.Unmarshal([]byte(ls), &letters); code != 0 || err != nil || strconv.Itoa(len(letters)) != m[4] {
		t.Errorf("the hint's dlq ls: exit %d, %d letters (%v), want %s: %s", code, len(letters), err, m[4], errs)
	}
	t.Logf("%s (demo took %s)", m[0], time.Since(start).Round(time.Millisecond))
}

// readmeDuckDB runs the README quickstart's DuckDB command on the table at
// dir (the README's ./data/sensor_events): its counts per device type must
// add up to rows.
func readmeDuckDB(t *testing.T, dir string, rows int64) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := readmeDuckDBLine.FindStringSubmatch(string(readme))
	if m == nil {
		t.Fatal(`the README has no duckdb -c "..." command`)
	}
	sql := strings.ReplaceAll(m[1], "./data/sensor_events", dir)
	var got []struct{ N int64 }
	if err := json.Unmarshal(testenv.DeltaRS(t, nil, "duckdb-sql", sql), &got); err != nil {
		t.Fatalf("duckdb %q: %v", sql, err)
	}
	var sum int64
	for _, g := range got {
		sum += g.N
	}
	if len(got) != 2 || sum != rows {
		t.Errorf("the README's DuckDB query counts %v (%d rows), want the 2 device types' %d", got, sum, rows)
	}
}

var readmeDuckDBLine = regexp.MustCompile(`(?m)^duckdb -c "([^"]+)"$`)

// newestEventTime is the newest event_time the table at uri holds, by its
// files' stats.
func newestEventTime(t *testing.T, uri string) time.Time {
	t.Helper()
	store, err := storage.NewLocal(uri)
	if err != nil {
		t.Fatal(err)
	}
	s, err := delta.NewTable(store).Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var newest time.Time
	for _, a := range s.Files() {
		st, err := delta.ParseStats(a.Stats)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(st.MaxValues["event_time"]))
		if err != nil {
			t.Fatalf("max event_time %v: %v", st.MaxValues["event_time"], err)
		}
		if ts.After(newest) {
			newest = ts
		}
	}
	return newest
}

func TestProduce(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	code, out, errs := run(t, "produce", "--brokers", cluster.ListenAddrs()[0], "--topic", "t1", "--partitions", "2",
		"--count", "500", "--bad-ratio", "0.1", "--seed", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	m := regexp.MustCompile(`^produced 500, bad (\d+) `).FindStringSubmatch(out)
	if m == nil || m[1] == "0" {
		t.Fatalf("summary %q", out)
	}
	if hw := testenv.HighWatermarks(t, cluster.ListenAddrs(), "t1"); len(hw) != 2 || hw[0]+hw[1] != 500 {
		t.Fatalf("topic t1: %v", hw)
	}
	// Unpaced, the records cover the last 72 h up to now; --start pins them.
	o := produceOptions{count: 500, devices: 50}
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	if c := o.simConfig(500, now); !c.Start.Equal(now.Add(-simSpan)) || c.Span != simSpan {
		t.Errorf("unpaced: start %s span %s; want the 72 h before now", c.Start, c.Span)
	}
	o.rate = 100
	if c := o.simConfig(500, now); !c.Start.Equal(now) || c.Span != 5*time.Second {
		t.Errorf("paced at 100/s: start %s span %s; want now and the 5 s the 500 records take", c.Start, c.Span)
	}
	o.start = time.Date(2026, 6, 22, 0, 0, 0, 0, time.UTC)
	if c := o.simConfig(500, now); !c.Start.Equal(o.start) {
		t.Errorf("--start: start %s, want %s", c.Start, o.start)
	}
	if code, _, _ := run(t, "produce", "--bad-ratio", "2"); code != 2 {
		t.Errorf("bad flag: exit %d", code)
	}
}

// TestREADMEMonitoringRecipe runs the README's monitoring recipe after its
// quickstart, as written but for the durations and directories: a second
// demo starts beside the first one's table (before issue 30 it refused,
// and `nats sub` found no server), and the nats CLI sees its commit
// events.
func TestREADMEMonitoringRecipe(t *testing.T) {
	bin, natsCLI := binary(t), testenv.Tool(t, "nats")
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, recipe, _ := strings.Cut(string(readme), "While a demo runs")
	_, recipe, _ = strings.Cut(recipe, "```sh\n")
	recipe, _, _ = strings.Cut(recipe, "```")
	lines := strings.Split(strings.TrimSpace(recipe), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "./deltaflow demo ") || !strings.HasPrefix(lines[1], "nats sub ") {
		t.Fatalf("the README's monitoring recipe is not a demo and a nats sub:\n%s", recipe)
	}
	dir := t.TempDir()
	// The quickstart's demo ran before, in ./data.
	if code, _, errs := run(t, "demo", "--duration", "2s", "--data", filepath.Join(dir, "data")); code != 0 {
		t.Fatalf("the quickstart's demo: exit %d: %s", code, errs)
	}
	args := strings.Fields(strings.TrimSuffix(strings.TrimSpace(strings.Split(lines[0], "#")[0]), "&"))
	for i, a := range args {
		switch {
		case a == "2m":
			args[i] = "20s"
		case strings.HasPrefix(a, "./data"):
			args[i] = filepath.Join(dir, strings.TrimPrefix(a, "./"))
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	demo := exec.CommandContext(ctx, bin, args[1:]...)
	demo.Dir = dir
	stdout, err := demo.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	demo.Stderr = &stderr
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = demo.Process.Kill(); _ = demo.Wait() }()
	// The demo says where its NATS listens (4222, the nats CLI's default,
	// unless taken).
	out := bufio.NewScanner(stdout)
	server := ""
	for server == "" && out.Scan() {
		if f := strings.Fields(out.Text()); len(f) > 1 && f[0] == "nats" {
			server = f[1]
		}
	}
	if server == "" {
		t.Fatalf("the second demo did not start: %s", stderr.String())
	}
	go func() {
		for out.Scan() {
		}
	}()
	subArgs := strings.Fields(strings.Split(lines[1], "#")[0])[1:]
	for i, a := range subArgs {
		subArgs[i] = strings.Trim(a, "'")
	}
	sub := exec.CommandContext(ctx, natsCLI, append([]string{"--server", server}, append(subArgs, "--count", "12", "--raw")...)...)
	got, err := sub.CombinedOutput()
	if err != nil || !bytes.Contains(got, []byte(`"type":"io.deltaflow.v1.commit"`)) {
		t.Fatalf("nats sub: %v\n%s\ndemo stderr:\n%s", err, got, stderr.String())
	}
}
