package daemon

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/actors"
	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/sim"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/storage"
)

const testTopic = "sensor-events"

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

func logOutput() io.Writer {
	if testing.Verbose() {
		return os.Stderr
	}
	return io.Discard
}

// freeAddr returns a local address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// newCluster starts an in-process Kafka with the topic in 3 partitions.
func newCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, testTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// testConfig is a valid configuration for a table, embedded NATS and HTTP
// server of the test's own.
func testConfig(t *testing.T, brokers []string) *Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Table.URI = filepath.Join(t.TempDir(), "sensor_events")
	cfg.Kafka.Brokers = brokers
	cfg.Kafka.Group = "test-" + strings.ReplaceAll(t.Name(), "/", "-")
	cfg.NATS.Listen = "127.0.0.1:-1"
	cfg.NATS.StoreDir = t.TempDir()
	cfg.HTTP.Listen = freeAddr(t)
	cfg.Log.Level = "warn"
	if testing.Verbose() {
		cfg.Log.Level = "info"
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return &cfg
}

// produce sends n good simulated records.
func produce(t *testing.T, brokers []string, n int, seed int64) {
	t.Helper()
	s := sim.New(sim.Config{Seed: seed, Events: n})
	produceWith(t, brokers, n, func(int) (key, value []byte) {
		key, value, _ = s.Next(nil)
		return key, value
	})
}

// produceWith sends n records, the i-th made by next(i).
func produceWith(t *testing.T, brokers []string, n int, next func(i int) (key, value []byte)) {
	t.Helper()
	kcfg := kafka.DefaultConfig()
	kcfg.Brokers = brokers
	p, err := kafka.NewProducer(kcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range n {
		key, value := next(i)
		p.ProduceAsync(t.Context(), &kgo.Record{Topic: testTopic, Key: key, Value: value})
	}
	if err := p.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// startRun runs the daemon with cfg until the test ends (when Run must
// return nil) and returns the base URL of its HTTP server.
func startRun(t *testing.T, cfg *Config) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, RunOptions{LogOutput: logOutput()}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return "http://" + cfg.HTTP.Listen
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func waitUntil(t *testing.T, what string, within time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tableRecords sums numRecords over the live files and returns the txn
// versions by appId.
func tableRecords(t *testing.T, uri string) (int64, map[string]int64) {
	t.Helper()
	store, err := storage.Open(t.Context(), uri, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := delta.NewTable(store).Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, a := range s.Files() {
		st, err := delta.ParseStats(a.Stats)
		if err != nil {
			t.Fatal(err)
		}
		n += st.NumRecords
	}
	return n, s.Txns()
}

func TestRunUntilLatest(t *testing.T) {
	cluster := newCluster(t)
	brokers := cluster.ListenAddrs()
	produce(t, brokers, 10_000, 1)
	cfg := testConfig(t, brokers)
	// The default 60 s flush interval stays: until-latest must flush by itself.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	start := time.Now()
	if err := Run(ctx, cfg, RunOptions{UntilLatest: true, LogOutput: logOutput()}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatal("Run returned only when the test's deadline passed")
	}
	n, txns := tableRecords(t, cfg.Table.URI)
	if n != 10_000 {
		t.Fatalf("table holds %d records, want 10000", n)
	}
	hw := testenv.HighWatermarks(t, brokers, "sensor-events")
	for p, h := range hw {
		if got := txns[ledger.AppID("deltaflow", testTopic, p)]; got != h-1 {
			t.Errorf("partition %d: txn version %d, high watermark %d", p, got, h)
		}
	}
	t.Logf("10000 records committed in %s", took.Round(time.Millisecond))

	// A second run has nothing to do and returns promptly.
	start = time.Now()
	if err := Run(ctx, cfg, RunOptions{UntilLatest: true, LogOutput: logOutput()}); err != nil {
		t.Fatalf("second Run: %v", err)
	}
	if n, _ := tableRecords(t, cfg.Table.URI); n != 10_000 {
		t.Fatalf("after a second run the table holds %d records", n)
	}
	t.Logf("caught-up run took %s", time.Since(start).Round(time.Millisecond))
}

func TestHTTPEndpoints(t *testing.T) {
	cluster := newCluster(t)
	brokers := cluster.ListenAddrs()
	produce(t, brokers, 500, 2)
	cfg := testConfig(t, brokers)
	cfg.Flush.Interval = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, RunOptions{LogOutput: logOutput()}) }()
	base := "http://" + cfg.HTTP.Listen

	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("/healthz", func() bool { code, _ := get("/healthz"); return code == 200 })
	waitFor("/readyz", func() bool { code, _ := get("/readyz"); return code == 200 })
	waitFor("a commit and the watchdog's first look in /metrics", func() bool {
		_, body := get("/metrics")
		return strings.Contains(body, "deltaflow_commits_total ") && !strings.Contains(body, "deltaflow_commits_total 0\n") &&
			strings.Contains(body, "deltaflow_uncommitted_records{")
	})
	_, body := get("/metrics")
	for _, m := range []string{`deltaflow_rows_committed_total{table="sensor_events"} 500`, "deltaflow_table_version", "go_goroutines",
		`deltaflow_build_info{goversion="go`, `deltaflow_maintenance_runs_total{result="noop",table="sensor_events",task="vacuum"} 0`} {
		if !strings.Contains(body, m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}
	for _, m := range []string{"deltaflow_last_commit_timestamp_seconds", "deltaflow_newest_event_timestamp_seconds", "deltaflow_event_freshness_seconds"} {
		if v := metricValue(t, body, m+`{table="sensor_events"}`); v <= 0 {
			t.Errorf("%s = %v after a commit, want > 0", m, v)
		}
	}
	checkMonitoring(t, body)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of cancel")
	}
	if code, _ := get("/healthz"); code != 0 {
		t.Errorf("HTTP server still answers after Run returned (%d)", code)
	}
}

func TestReadinessReasons(t *testing.T) {
	r := &readiness{health: actors.NewHealth()}
	if rs := r.reasons(); !slices.Contains(rs, "table: not loaded yet") || !slices.Contains(rs, "nats: not connected yet") {
		t.Errorf("reasons before start: %v", rs)
	}
	r.tableLoaded.Store(true)
	r.health.Degrade("storage", "put: connection refused")
	r.stopping.Store(true)
	rs := r.reasons()
	if !slices.Contains(rs, "storage: put: connection refused") || !slices.Contains(rs, "shutting down") || slices.Contains(rs, "table: not loaded yet") {
		t.Errorf("reasons: %v", rs)
	}
}

// newMapper builds a mapper for cfg's columns.
func newMapper(t *testing.T, cols []mapping.Column, parts []string) *mapping.Mapper {
	t.Helper()
	c := mapping.DefaultConfig()
	c.Columns = cols
	m, err := mapping.New(c, parts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEnsureTableNamesTheKey: the table is created with the configured
// checkpoint interval, and a refused schema change names the configuration
// key to fix (delta's TestEnsureSchema covers the rest).
func TestEnsureTableNamesTheKey(t *testing.T) {
	tbl := delta.NewTable(storage.NewMem())
	defaults := mapping.DefaultConfig().Columns
	parts := mapping.DefaultPartitionColumns
	s, err := ensureTable(t.Context(), tbl, newMapper(t, defaults, parts), TableConfig{CheckpointInterval: 10}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	if s.Version() != 0 || s.Metadata().Configuration["delta.checkpointInterval"] != "10" {
		t.Fatalf("created table: version %d, configuration %v", s.Version(), s.Metadata().Configuration)
	}

	changed := slices.Clone(defaults)
	for i := range changed {
		if changed[i].Name == "battery" {
			changed[i].Type = "long"
		}
	}
	_, err = ensureTable(t.Context(), tbl, newMapper(t, changed, parts), TableConfig{CheckpointInterval: 10}, testLogger())
	if err == nil || !strings.Contains(err.Error(), `table.columns: column "battery"`) || !strings.Contains(err.Error(), "integer") ||
		!strings.Contains(err.Error(), "long") {
		t.Fatalf("type change: %v", err)
	}
	_, err = ensureTable(t.Context(), tbl, newMapper(t, defaults, []string{"device_type"}), TableConfig{CheckpointInterval: 10}, testLogger())
	if err == nil || !strings.Contains(err.Error(), "table.partition_columns") {
		t.Fatalf("partition change: %v", err)
	}
	// A timestamp_ntz column the table's protocol has no feature for.
	local := append(slices.Clone(defaults), mapping.Column{Name: "local_time", Type: "timestamp_ntz", Source: "payload.local_time"})
	_, err = ensureTable(t.Context(), tbl, newMapper(t, local, parts), TableConfig{CheckpointInterval: 10}, testLogger())
	if err == nil || !strings.Contains(err.Error(), `table.columns: column "local_time": `) || !strings.Contains(err.Error(), "timestampNtz") {
		t.Fatalf("a timestamp_ntz column without the table feature: %v", err)
	}
}

// TestEnsureUpsertTable: a table made for upserts allows deletion vectors
// (and lists the feature); an existing table that does not is refused,
// naming the property. A table with a change data feed is taken (upserts
// write its change data files), with column mapping too (they use its
// physical names).
func TestEnsureUpsertTable(t *testing.T) {
	defaults := mapping.DefaultConfig().Columns
	parts := mapping.DefaultPartitionColumns
	upserts := TableConfig{CheckpointInterval: 10, WriteMode: WriteUpsert, KeyColumns: []string{"device_id"}}
	s, err := ensureTable(t.Context(), delta.NewTable(storage.NewMem()), newMapper(t, defaults, parts), upserts, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Protocol(); p.MinReaderVersion != 3 || !slices.Contains(p.ReaderFeatures, "deletionVectors") || !slices.Contains(p.WriterFeatures, "deletionVectors") {
		t.Errorf("an upsert table's protocol %+v, want reader 3 with deletionVectors", p)
	}
	// Copy-on-write needs no deletion vectors: its table has none, and a
	// table without them takes it.
	cow := upserts
	cow.UpsertStrategy = UpsertCopyOnWrite
	plain := delta.NewTable(storage.NewMem())
	for range 2 {
		s, err := ensureTable(t.Context(), plain, newMapper(t, defaults, parts), cow, testLogger())
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(s.Protocol().ReaderFeatures, "deletionVectors") || s.Metadata().Configuration[deletionVectorsProperty] != "" {
			t.Errorf("a copy-on-write table allows deletion vectors: %+v", s.Protocol())
		}
	}
	create := func(conf map[string]string) *delta.Table {
		tbl := delta.NewTable(storage.NewMem())
		if _, err := tbl.Create(t.Context(), newMapper(t, defaults, parts).Schema(), parts, conf); err != nil {
			t.Fatal(err)
		}
		return tbl
	}
	if _, err := ensureTable(t.Context(), create(nil), newMapper(t, defaults, parts), upserts, testLogger()); err == nil ||
		!strings.Contains(err.Error(), "delta.enableDeletionVectors = true") {
		t.Errorf("a table without deletion vectors: %v, want a refusal naming delta.enableDeletionVectors", err)
	}
	cdf := map[string]string{"delta.enableChangeDataFeed": "true", deletionVectorsProperty: "true"}
	for _, strategy := range []TableConfig{upserts, cow} {
		if _, err := ensureTable(t.Context(), create(cdf), newMapper(t, defaults, parts), strategy, testLogger()); err != nil {
			t.Errorf("%s upserts into a table with a change data feed: %v", orAbsent(strategy.UpsertStrategy), err)
		}
	}
	tbl := create(cdf)
	s, err = tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := s.Schema()
	mapped, conf, err := delta.AssignColumnMapping(schema, map[string]string{"delta.columnMapping.mode": "name"})
	if err != nil {
		t.Fatal(err)
	}
	meta := s.Metadata()
	meta.SchemaString, meta.Configuration = mapped.SchemaString(), maps.Clone(meta.Configuration)
	maps.Copy(meta.Configuration, conf)
	if _, err := tbl.Commit(t.Context(), s, []delta.Action{{MetaData: &meta}}, delta.Operation{Name: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureTable(t.Context(), tbl, newMapper(t, defaults, parts), upserts, testLogger()); err != nil {
		t.Errorf("upserts into a table with a change data feed and column mapping: %v", err)
	}
}

// TestMemoryLimit: the daemon's soft memory limit is the budget plus the
// overhead, and a little more for each table beyond the first, unless
// GOMEMLIMIT says otherwise.
func TestMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	for tables, want := range map[int]int64{1: 16<<20 + memoryLimitOverhead, 3: 16<<20 + memoryLimitOverhead + 2*memoryLimitPerTable} {
		if got := memoryLimit(16<<20, tables, getenv); got != want || debug.SetMemoryLimit(-1) != want {
			t.Fatalf("%d tables: limit %d, want %d", tables, got, want)
		}
	}
	debug.SetMemoryLimit(prev)
	env["GOMEMLIMIT"] = "1GiB"
	if got := memoryLimit(16<<20, 1, getenv); got != prev || debug.SetMemoryLimit(-1) != prev {
		t.Fatalf("with GOMEMLIMIT set the limit changed to %d (was %d)", got, prev)
	}
}

// metricValue returns the value of the unlabelled metric name in a
// /metrics body.
func metricValue(t *testing.T, body, name string) float64 {
	t.Helper()
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics lacks %s", name)
	return 0
}

// Toolchain is go.mod's toolchain line, and a build with an older Go is
// told what to do (issue 30: GOTOOLCHAIN=local built silently with
// go1.26.8).
func TestToolchainWarning(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "\ntoolchain "+Toolchain+"\n") {
		t.Errorf("go.mod's toolchain line is not %s: update daemon.Toolchain", Toolchain)
	}
	if w := ToolchainWarning("go1.26.8"); !strings.Contains(w, "older than the "+Toolchain) || !strings.Contains(w, "GOTOOLCHAIN="+Toolchain) {
		t.Errorf("go1.26.8: %q", w)
	}
	for _, v := range []string{Toolchain, "go1.27.4", "go1.28rc1", "devel go1.28-abcdef"} {
		if w := ToolchainWarning(v); w != "" {
			t.Errorf("%s: %q, want no warning", v, w)
		}
	}
}
