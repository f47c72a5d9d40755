package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/storage"
)

// topicColumn is the Kafka topic of each row, beside the scenario's
// partition and offset columns: a table reading several topics says which
// record each row is.
const topicColumn = "kafka_topic"

// routesRig is a deltaflow process writing several local tables from
// several topics of the real broker.
type routesRig struct {
	t      *testing.T
	bin    string
	prefix string // of this rig's topics
	group  string
	dir    string
	tables []map[string]any // the tables list of the config
	extra  map[string]any   // more top-level sections
}

func newRoutesRig(t *testing.T, topics map[string]int32) *routesRig {
	t.Helper()
	r := &routesRig{t: t, bin: scenario.Binary(t), prefix: scenario.Unique("routes"), group: scenario.Unique("routes-group"),
		dir: t.TempDir(), extra: map[string]any{}}
	for name, parts := range topics {
		r.createTopic(name, parts)
	}
	return r
}

// topic is the full name of the rig's topic name.
func (r *routesRig) topic(name string) string { return r.prefix + "-" + name }

func (r *routesRig) createTopic(name string, parts int32) {
	r.t.Helper()
	kcfg := kafka.DefaultConfig()
	kcfg.Brokers = testenv.Kafka(r.t)
	if err := kafka.CreateTopic(r.t.Context(), kcfg, r.topic(name), parts, -1); err != nil {
		r.t.Fatal(err)
	}
}

// table adds a route: table name reading topics (rig names), with the
// scenario's columns and the topic's.
func (r *routesRig) table(name string, topics []string, extra map[string]any) string {
	uri := filepath.Join(r.dir, name)
	full := make([]string, len(topics))
	for i, t := range topics {
		full[i] = r.topic(t)
	}
	entry := map[string]any{"name": name, "uri": uri, "partition_columns": mapping.DefaultPartitionColumns,
		"columns": append(scenario.Columns(), mapping.Column{Name: topicColumn, Type: "string", Source: "kafka.topic", Required: true})}
	if len(full) > 0 {
		entry["topics"] = full
	}
	for k, v := range extra {
		entry[k] = v
	}
	r.tables = append(r.tables, entry)
	return uri
}

// config writes the rig's configuration.
func (r *routesRig) config() string {
	r.t.Helper()
	doc := map[string]any{
		"tables":   r.tables,
		"flush":    map[string]any{"interval": "1s"},
		"log":      map[string]any{"level": "info", "format": "json"},
		"watchdog": map[string]any{"stall_intervals": 300},
		"nats":     map[string]any{"dlq_max_bytes": "16MiB"},
		"kafka":    map[string]any{"group": r.group},
	}
	for k, v := range r.extra {
		doc[k] = v
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		r.t.Fatal(err)
	}
	path := filepath.Join(r.t.TempDir(), "deltaflow.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		r.t.Fatal(err)
	}
	return path
}

// env is a deltaflow process's environment: the servers, no topic or
// table (the config names them).
func (r *routesRig) env() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"KAFKA_BOOTSTRAP=" + strings.Join(testenv.Kafka(r.t), ","), "NATS_URL=" + testenv.NATS(r.t),
		fmt.Sprintf("DELTAFLOW_HTTP_LISTEN=127.0.0.1:%d", scenario.FreePort(r.t))}
}

// run starts `deltaflow run` (with args) on config.
func (r *routesRig) run(config string, args ...string) *scenario.Daemon {
	return scenario.Start(r.t, "deltaflow", r.bin, r.env(), append([]string{"run", "--config", config}, args...)...)
}

// produce starts `deltaflow produce` writing count records (0: until
// stopped) to the rig's topic name at rate per second.
func (r *routesRig) produce(name string, count, rate int, seed int64) *scenario.Daemon {
	return scenario.Start(r.t, "producer-"+name, r.bin, r.env(), "produce", "--topic", r.topic(name),
		"--count", strconv.Itoa(count), "--rate", strconv.Itoa(rate), "--seed", strconv.FormatInt(seed, 10))
}

// record is one Kafka record of the rig: its coordinates and device type.
type record struct {
	topic      string
	partition  int32
	offset     int64
	deviceType string
}

// records reads every record the rig's topic name holds now.
func (r *routesRig) records(name string) []record {
	r.t.Helper()
	topic := r.topic(name)
	ends := testenv.HighWatermarks(r.t, testenv.Kafka(r.t), topic)
	cl, err := kgo.NewClient(kgo.SeedBrokers(testenv.Kafka(r.t)...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	var out []record
	want := int64(0)
	for _, end := range ends {
		want += end
	}
	ctx, cancel := context.WithTimeout(r.t.Context(), time.Minute)
	defer cancel()
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			r.t.Fatalf("read %d of %d records of %s: %v", len(out), want, topic, err)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			var v struct {
				DeviceType string `json:"device_type"`
			}
			_ = json.Unmarshal(rec.Value, &v)
			out = append(out, record{topic: rec.Topic, partition: rec.Partition, offset: rec.Offset, deviceType: v.DeviceType})
		})
	}
	return out
}

// coordinates renders records as sorted "topic/partition/offset".
func coordinates(recs []record, take func(record) bool) []string {
	var out []string
	for _, rec := range recs {
		if take(rec) {
			out = append(out, fmt.Sprintf("%s/%d/%d", rec.topic, rec.partition, rec.offset))
		}
	}
	slices.Sort(out)
	return out
}

// rows reads the table at uri with delta-rs and renders its rows'
// coordinates as coordinates does.
func rows(t *testing.T, uri string) []string {
	t.Helper()
	var out []string
	for _, row := range scenario.DeltaRS(t, nil, uri).Rows {
		p, _ := row[scenario.PartitionColumn].(float64)
		o, _ := row[scenario.OffsetColumn].(float64)
		out = append(out, fmt.Sprintf("%s/%d/%d", row[topicColumn], int32(p), int64(o)))
	}
	slices.Sort(out)
	return out
}

// committedRows counts the rows of the table at uri (0 while it is not
// there), by the files' statistics.
func committedRows(t *testing.T, uri string) int {
	store, err := storage.NewLocal(uri)
	if err != nil {
		t.Fatal(err)
	}
	s, err := delta.NewTable(store).Snapshot(t.Context())
	if err != nil {
		return 0
	}
	n := 0
	for _, a := range s.Files() {
		if st, err := delta.ParseStats(a.Stats); err == nil && st != nil {
			n += int(st.NumRecords)
		}
	}
	return n
}

// checkTable asserts the table at uri holds exactly the records take
// accepts, once each, as delta-rs reads it.
func checkTable(t *testing.T, name, uri string, recs []record, take func(record) bool) {
	t.Helper()
	got, want := rows(t, uri), coordinates(recs, take)
	if !slices.Equal(got, want) {
		dup := len(got) - len(slices.Compact(slices.Clone(got)))
		t.Errorf("table %s: %d rows (%d duplicated), want the %d records its route takes once", name, len(got), dup, len(want))
	} else {
		t.Logf("table %s: %d rows, each record its route takes once", name, len(got))
	}
}

// TestRoutesSIGKILL: one process writes three tables on the real broker:
// "ta" reads topic a, "tb" topic b, and "plugs" both, taking only smart
// plugs (fan-out: a feeds two tables, one of them filtered). It is
// SIGKILLed again and again while producers stream into both topics;
// then each table, read by delta-rs, holds every record its route takes
// exactly once.
func TestRoutesSIGKILL(t *testing.T) {
	r := newRoutesRig(t, map[string]int32{"a": 3, "b": 2})
	ta := r.table("ta", []string{"a"}, nil)
	tb := r.table("tb", []string{"b"}, nil)
	plugs := r.table("plugs", []string{"a", "b"}, map[string]any{"where": "device_type = 'smart_plug'"})
	// Static membership, as the shipped configuration has it: each run
	// takes over the killed one's partitions at once. Without it the
	// killed members keep theirs until their sessions expire, and the
	// final `run --until-latest` catches up only the partitions it owned
	// at start, as documented.
	r.extra["kafka"] = map[string]any{"group": r.group, "instance_id": "deltaflow-routes-sigkill"}
	cfg := r.config()
	pa, pb := r.produce("a", 6000, 1500, 1), r.produce("b", 4000, 1000, 2)
	kills := 5
	for i := range kills {
		d := r.run(cfg)
		time.Sleep(time.Duration(1500+500*i) * time.Millisecond)
		d.Kill()
	}
	for _, p := range []*scenario.Daemon{pa, pb} {
		if err := scenario.WaitFor(2*time.Minute, func() bool { _, done := p.Exited(); return done }); err != nil {
			t.Fatal("producers did not finish")
		}
	}
	d := r.run(cfg, "--until-latest")
	if err := scenario.WaitFor(3*time.Minute, func() bool { _, done := d.Exited(); return done }); err != nil {
		t.Fatalf("run --until-latest did not end\n%s", d.Tail(4000))
	}
	if err, _ := d.Exited(); err != nil {
		t.Fatalf("run --until-latest: %v\n%s", err, d.Tail(4000))
	}
	recsA, recsB := r.records("a"), r.records("b")
	all := append(slices.Clone(recsA), recsB...)
	t.Logf("%d SIGKILLs; produced %d to a, %d to b", kills, len(recsA), len(recsB))
	checkTable(t, "ta", ta, recsA, func(record) bool { return true })
	checkTable(t, "tb", tb, recsB, func(record) bool { return true })
	checkTable(t, "plugs", plugs, all, func(rec record) bool { return rec.deviceType == "smart_plug" })
	if t.Failed() {
		t.Logf("the last run:\n%s", d.Tail(8000))
	}
}

// TestRoutesTopicPattern: a topic created while deltaflow runs that a
// table's topic_regex matches is read within kafka.metadata_max_age.
func TestRoutesTopicPattern(t *testing.T) {
	r := newRoutesRig(t, map[string]int32{"known": 1})
	known := r.table("known", []string{"known"}, nil)
	later := r.table("later", nil, map[string]any{"topic_regex": "^" + r.prefix + `-new-`})
	r.extra["kafka"] = map[string]any{"group": r.group, "metadata_max_age": "5s"}
	d := r.run(r.config())
	r.produce("known", 50, 0, 1)
	time.Sleep(3 * time.Second) // running, the new topic not there yet
	r.createTopic("new-1", 2)
	r.produce("new-1", 300, 0, 2)
	want := r.records("new-1")
	if err := scenario.WaitFor(time.Minute, func() bool { return committedRows(t, later) == len(want) }); err != nil {
		t.Fatalf("the table of pattern ^%s-new- holds %d rows, want the %d of the topic created later\n%s",
			r.prefix, committedRows(t, later), len(want), d.Tail(4000))
	}
	checkTable(t, "later", later, want, func(record) bool { return true })
	checkTable(t, "known", known, r.records("known"), func(record) bool { return true })
}

// releaseBeforeRoutes is the last landed main before routes: a table it
// wrote must go on without a record twice or missing.
const releaseBeforeRoutes = "6fe586a6fdceb7e6100ee3eac9db85abeb92743e"

// TestRoutesUpgrade: the release before routes fills a table in the single
// form; this one goes on with the same configuration, then with a tables
// list naming the same table (its app_id kept): the offsets are the same
// txn appIds, so no record is read twice and none is skipped.
func TestRoutesUpgrade(t *testing.T) {
	r := newRoutesRig(t, map[string]int32{"a": 3})
	uri := filepath.Join(r.dir, "sensor_events")
	single := scenario.WriteConfig(t, "sensor_events", map[string]any{
		"kafka": map[string]any{"group": r.group, "topic": r.topic("a")},
		"table": map[string]any{"uri": uri, "columns": append(scenario.Columns(),
			mapping.Column{Name: topicColumn, Type: "string", Source: "kafka.topic", Required: true})},
	})
	until := func(bin, config string) {
		t.Helper()
		d := scenario.Start(t, "deltaflow", bin, r.env(), "run", "--config", config, "--until-latest")
		if err := scenario.WaitFor(3*time.Minute, func() bool { _, done := d.Exited(); return done }); err != nil {
			t.Fatalf("run --until-latest did not end\n%s", d.Tail(4000))
		}
		if err, _ := d.Exited(); err != nil {
			t.Fatalf("run --until-latest: %v\n%s", err, d.Tail(4000))
		}
	}
	old := scenario.ReleaseBinary(t, releaseBeforeRoutes)
	waitProduced := func(p *scenario.Daemon) {
		t.Helper()
		if err := scenario.WaitFor(time.Minute, func() bool { _, done := p.Exited(); return done }); err != nil {
			t.Fatal("producer did not finish")
		}
	}
	waitProduced(r.produce("a", 500, 0, 1))
	until(old, single)
	waitProduced(r.produce("a", 300, 0, 2))
	until(r.bin, single)
	waitProduced(r.produce("a", 200, 0, 3))
	r.table("sensor_events", []string{"a"}, map[string]any{"uri": uri})
	until(r.bin, r.config())
	checkTable(t, "sensor_events", uri, r.records("a"), func(record) bool { return true })
}

// TestRoutesScaleOut: two processes with the same configuration of three
// tables share every topic's partitions through the group; one is
// SIGKILLed and started again while producers stream. Each table holds
// every record of its topics exactly once.
func TestRoutesScaleOut(t *testing.T) {
	r := newRoutesRig(t, map[string]int32{"a": 4, "b": 2})
	ta := r.table("ta", []string{"a"}, nil)
	tb := r.table("tb", []string{"b"}, nil)
	all := r.table("all", []string{"a", "b"}, nil)
	cfg := r.config()
	pa, pb := r.produce("a", 6000, 1200, 1), r.produce("b", 3000, 600, 2)
	first, second := r.run(cfg), r.run(cfg)
	time.Sleep(3 * time.Second)
	second.Kill()
	time.Sleep(2 * time.Second)
	second = r.run(cfg)
	for _, p := range []*scenario.Daemon{pa, pb} {
		if err := scenario.WaitFor(2*time.Minute, func() bool { _, done := p.Exited(); return done }); err != nil {
			t.Fatal("producers did not finish")
		}
	}
	recsA, recsB := r.records("a"), r.records("b")
	want := map[string]int{ta: len(recsA), tb: len(recsB), all: len(recsA) + len(recsB)}
	if err := scenario.WaitFor(2*time.Minute, func() bool {
		for uri, n := range want {
			if committedRows(t, uri) < n {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("the tables did not catch up\n%s\n%s", first.Tail(3000), second.Tail(3000))
	}
	for _, d := range []*scenario.Daemon{first, second} {
		if err := d.Stop(30 * time.Second); err != nil {
			t.Errorf("stop: %v\n%s", err, d.Tail(3000))
		}
	}
	checkTable(t, "ta", ta, recsA, func(record) bool { return true })
	checkTable(t, "tb", tb, recsB, func(record) bool { return true })
	checkTable(t, "all", all, append(slices.Clone(recsA), recsB...), func(record) bool { return true })
}
