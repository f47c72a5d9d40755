package actors

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/sim"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/storage"
)

// routesRig is one Kafka cluster with several topics and several tables,
// each on its own store, fed by one engine: the route tests' harness.
type routesRig struct {
	t       *testing.T
	cluster *kfake.Cluster
	kcfg    kafka.Config
	bridge  *bridge.Bridge
	mapper  *mapping.Mapper
	tables  map[string]*routeTable
	// produced is every record produced, by topic: its offsets; events
	// what each was, by topic and coordinates.
	mu       sync.Mutex
	produced map[string][]int64
	events   map[string]map[int64]sim.Event
}

// routeTable is one table of the rig and what reads into it.
type routeTable struct {
	route Route
	store storage.Store
	// faulty, when set, sits between the table and its store.
	faulty *storage.Faulty
}

// coordinates are the columns that say which Kafka record a row is.
var coordinates = []mapping.Column{
	{Name: "device_id", Type: "string", Source: "device_id", Required: true},
	{Name: "device_type", Type: "string", Source: "device_type", Required: true},
	{Name: "kafka_topic", Type: "string", Source: "kafka.topic", Required: true},
	{Name: "kafka_partition", Type: "integer", Source: "kafka.partition", Required: true},
	{Name: "kafka_offset", Type: "long", Source: "kafka.offset", Required: true},
	{Name: "battery", Type: "integer", Source: "payload.battery"},
}

func newRoutesRig(t *testing.T, topics map[string]int32) *routesRig {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	for name, parts := range topics {
		opts = append(opts, kfake.SeedTopics(parts, name))
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	m, err := mapping.New(mapping.Config{Mode: mapping.Strict, Columns: coordinates}, []string{"device_type"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bridge.New(t.Context(), bridge.Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir()}, testLogger(t), bridge.WithTable("routes"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	kcfg := kafka.DefaultConfig()
	kcfg.Brokers = cluster.ListenAddrs()
	kcfg.Group = "deltaflow-routes"
	return &routesRig{t: t, cluster: cluster, kcfg: kcfg, bridge: b, mapper: m, tables: map[string]*routeTable{},
		produced: map[string][]int64{}, events: map[string]map[int64]sim.Event{}}
}

// table adds a table reading topics (and those matching regex, if set).
func (g *routesRig) table(name string, topics []string, regex string, faulty bool) *routeTable {
	g.t.Helper()
	local, err := storage.NewLocal(g.t.TempDir())
	if err != nil {
		g.t.Fatal(err)
	}
	rt := &routeTable{store: local}
	var store storage.Store = local
	if faulty {
		rt.faulty = storage.NewFaulty(local)
		store = rt.faulty
	}
	tbl := delta.NewTable(store)
	if _, err := tbl.Create(g.t.Context(), g.mapper.Schema(), []string{"device_type"}, nil); err != nil {
		g.t.Fatal(err)
	}
	rt.route = Route{Name: name, Topics: topics, Table: tbl, Mapper: g.mapper, PartitionColumns: []string{"device_type"},
		Outbox: NewOutbox(g.bridge)}
	if regex != "" {
		rt.route.TopicRegex = regexp.MustCompile(regex)
	}
	g.tables[name] = rt
	return rt
}

// produce sends n records to every partition of topic.
func (g *routesRig) produce(topic string, partitions int32, n int, seed int64) {
	g.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.kcfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		g.t.Fatal(err)
	}
	defer cl.Close()
	s := sim.New(sim.Config{Seed: seed, Events: n * int(partitions)})
	var recs []*kgo.Record
	evs := map[*kgo.Record]sim.Event{} // ProduceSync's results come in no set order
	for p := range partitions {
		for range n {
			key, value, ev := s.Next(nil)
			r := &kgo.Record{Topic: topic, Partition: p, Key: key, Value: value}
			recs = append(recs, r)
			evs[r] = ev
		}
	}
	res := cl.ProduceSync(g.t.Context(), recs...)
	if err := res.FirstErr(); err != nil {
		g.t.Fatal(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.events[topic] == nil {
		g.events[topic] = map[int64]sim.Event{}
	}
	for _, r := range res {
		c := int64(r.Record.Partition)<<40 | r.Record.Offset
		g.produced[topic] = append(g.produced[topic], c)
		g.events[topic][c] = evs[r.Record]
	}
}

// start runs an engine writing every table of the rig.
func (g *routesRig) start(cfg Config) *running {
	g.t.Helper()
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = 200 * time.Millisecond
	}
	if cfg.Backoff == (Backoff{}) {
		cfg.Backoff = Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	}
	if cfg.MaxRetry == 0 {
		cfg.MaxRetry = 5 * time.Second
	}
	var routes []Route
	var topics, regexes []string
	for _, name := range slices.Sorted(maps.Keys(g.tables)) {
		r := g.tables[name].route
		routes = append(routes, r)
		topics = append(topics, r.Topics...)
		if r.TopicRegex != nil {
			regexes = append(regexes, r.TopicRegex.String())
		}
	}
	slices.Sort(topics)
	e, err := NewEngine(cfg, Deps{Logger: testLogger(g.t)}, routes...)
	if err != nil {
		g.t.Fatal(err)
	}
	cons, err := kafka.NewConsumer(g.kcfg, e, testLogger(g.t), kafka.Subscribe(slices.Compact(topics), regexes))
	if err != nil {
		g.t.Fatal(err)
	}
	if err := e.Start(cons); err != nil {
		g.t.Fatal(err)
	}
	return &running{engine: e, cons: cons}
}

// rows returns the Kafka coordinates (partition<<40 | offset) of every row
// of table name, by topic.
func (g *routesRig) rows(name string) map[string][]int64 {
	g.t.Helper()
	rt := g.tables[name]
	tbl := delta.NewTable(rt.store)
	s, err := tbl.Snapshot(g.t.Context())
	if err != nil {
		g.t.Fatal(err)
	}
	schema, _ := s.Schema()
	out := map[string][]int64{}
	for _, a := range s.Files() {
		rows, err := delta.ReadDataFile(g.t.Context(), rt.store, schema, s.PartitionColumns(), a)
		if err != nil {
			g.t.Fatal(err)
		}
		for _, r := range rows {
			topic := r[schema.Index("kafka_topic")].(string)
			out[topic] = append(out[topic], int64(r[schema.Index("kafka_partition")].(int32))<<40|r[schema.Index("kafka_offset")].(int64))
		}
	}
	for _, offs := range out {
		slices.Sort(offs)
	}
	return out
}

// committed reports whether table name's offsets cover everything produced
// to topics.
func (g *routesRig) committed(name string, topics ...string) bool {
	g.t.Helper()
	s, err := delta.NewTable(g.tables[name].store).Snapshot(g.t.Context())
	if err != nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, topic := range topics {
		want := map[int32]int64{}
		for _, c := range g.produced[topic] {
			p, off := int32(c>>40), c&(1<<40-1)
			want[p] = max(want[p], off)
		}
		last := ledger.Last(s, "deltaflow", topic)
		for p, off := range want {
			if last[p] < off {
				return false
			}
		}
	}
	return true
}

// checkExactlyOnce asserts table name holds every record produced to
// topics once, and nothing else.
func (g *routesRig) checkExactlyOnce(name string, topics ...string) {
	g.t.Helper()
	g.checkTaken(name, func(sim.Event) bool { return true }, topics...)
}

// checkTaken asserts table name holds, once, every record produced to
// topics that take accepts, and nothing else.
func (g *routesRig) checkTaken(name string, take func(sim.Event) bool, topics ...string) {
	g.t.Helper()
	got := g.rows(name)
	g.mu.Lock()
	defer g.mu.Unlock()
	for topic := range got {
		if !slices.Contains(topics, topic) {
			g.t.Errorf("table %s holds %d rows of topic %s, which it does not read", name, len(got[topic]), topic)
		}
	}
	for _, topic := range topics {
		var want []int64
		for _, c := range g.produced[topic] {
			if take(g.events[topic][c]) {
				want = append(want, c)
			}
		}
		slices.Sort(want)
		if !slices.Equal(got[topic], want) {
			have := map[int64]int{}
			for _, c := range got[topic] {
				have[c]++
			}
			var wrong []string // the first few records not held once
			for _, c := range want {
				if have[c] != 1 && len(wrong) < 10 {
					wrong = append(wrong, fmt.Sprintf("%d@%d×%d", c>>40, c&(1<<40-1), have[c]))
				}
			}
			g.t.Errorf("table %s holds %d rows of %s (%d distinct); want the %d produced once (partition@offset×rows: %v)",
				name, len(got[topic]), topic, len(slices.Compact(slices.Clone(got[topic]))), len(want), wrong)
		}
	}
}

// TestRoutesFanOut: three tables in one engine, one consumer: "plugs" reads
// topic plugs, "all" reads plugs and doors (fan-out: plugs feeds two
// tables), "sensors" every topic matching ^doo. Each table holds every
// record of its topics once, and none of the others.
func TestRoutesFanOut(t *testing.T) {
	g := newRoutesRig(t, map[string]int32{"plugs": 3, "doors": 2})
	g.table("plugs", []string{"plugs"}, "", false)
	g.table("all", []string{"plugs", "doors"}, "", false)
	g.table("sensors", nil, "^doo", false)
	g.produce("plugs", 3, 400, 1)
	g.produce("doors", 2, 300, 2)
	r := g.start(Config{})
	defer r.stop(t)
	g.produce("plugs", 3, 100, 3) // while running
	waitFor(t, func() bool {
		return g.committed("plugs", "plugs") && g.committed("all", "plugs", "doors") && g.committed("sensors", "doors")
	})
	g.checkExactlyOnce("plugs", "plugs")
	g.checkExactlyOnce("all", "plugs", "doors")
	g.checkExactlyOnce("sensors", "doors")
}

// TestRoutesOneTableFailing: the store of table "broken" fails every
// upload, which it retries for a minute, its buffers holding their rows
// meanwhile: more than its share of the memory budget. "healthy", reading
// the same topic, goes on committing all the while: its budget and its
// pipeline are its own, and the fetch loop goes on feeding it (with one
// budget for both, broken's rows would fill it and stop both). Once the
// store works again, "broken" catches up: both hold every record once.
func TestRoutesOneTableFailing(t *testing.T) {
	g := newRoutesRig(t, map[string]int32{"plugs": 2})
	g.table("healthy", []string{"plugs"}, "", false)
	broken := g.table("broken", []string{"plugs"}, "", true)
	broken.faulty.Fail(storage.Rule{Op: storage.OpPutStream})
	broken.faulty.Fail(storage.Rule{Op: storage.OpPut, Prefix: "device_type="})
	g.produce("plugs", 2, 1000, 1)
	r := g.start(Config{MemoryBudget: 1 << 20, MaxRetry: time.Minute})
	defer r.stop(t)
	waitFor(t, func() bool { return g.committed("healthy", "plugs") })
	for i := range 3 {
		g.produce("plugs", 2, 1000, int64(10+i))
		waitFor(t, func() bool { return g.committed("healthy", "plugs") })
	}
	if g.committed("broken", "plugs") || len(g.rows("broken")["plugs"]) != 0 {
		t.Fatal("the broken table committed rows while its store failed every upload")
	}
	if held := r.engine.tables[slices.IndexFunc(r.engine.tables, func(t *table) bool { return t.route.Name == "broken" })].budget.Bytes(); held < 256<<10 {
		t.Fatalf("the broken table holds %d bytes; the case needs its share of the budget full", held)
	}
	broken.faulty.Reset()
	waitFor(t, func() bool { return g.committed("broken", "plugs") })
	g.checkExactlyOnce("healthy", "plugs")
	g.checkExactlyOnce("broken", "plugs")
}

// TestRoutesOneTableRebuilding: the log of table "broken" refuses every
// commit, so its epochs are dropped and its pipeline rebuilt after a long
// backoff (15 s), again and again. "healthy", reading the same topic, goes
// on committing meanwhile: the fetch loop does not wait for the dropped
// generation's readers, which will never answer what it handed them.
// Once broken's log takes commits, it catches up: both hold every record
// once.
func TestRoutesOneTableRebuilding(t *testing.T) {
	g := newRoutesRig(t, map[string]int32{"plugs": 2})
	g.table("healthy", []string{"plugs"}, "", false)
	broken := g.table("broken", []string{"plugs"}, "", true)
	g.produce("plugs", 2, 500, 1)
	r := g.start(Config{MaxRetry: 100 * time.Millisecond, RetryBackoff: Backoff{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond},
		Backoff: Backoff{Initial: 15 * time.Second, Max: 15 * time.Second}})
	defer r.stop(t)
	waitFor(t, func() bool { return g.committed("healthy", "plugs") && g.committed("broken", "plugs") })
	broken.faulty.Fail(storage.Rule{Op: storage.OpPutIfAbsent, Prefix: delta.LogDir})
	restarts := r.engine.deps.Metrics.Table("broken").Restarts.WithLabelValues("pipeline")
	g.produce("plugs", 2, 500, 10)
	waitFor(t, func() bool { return value(t, restarts) > 0 }) // broken waits out its backoff from now
	for i := range 3 {
		g.produce("plugs", 2, 500, int64(11+i))
		waitFor(t, func() bool { return g.committed("healthy", "plugs") })
	}
	broken.faulty.Reset()
	waitWithin(t, time.Minute, func() bool { return g.committed("broken", "plugs") }) // after the 15 s backoff
	g.checkExactlyOnce("healthy", "plugs")
	g.checkExactlyOnce("broken", "plugs")
}

// TestRoutesKillLoop: engines writing three tables (one topic feeding two
// of them) are killed without a final commit again and again while a
// producer streams; each table ends up with every record of its topics
// exactly once.
func TestRoutesKillLoop(t *testing.T) {
	g := newRoutesRig(t, map[string]int32{"plugs": 3, "doors": 2})
	g.table("plugs", []string{"plugs"}, "", false)
	g.table("all", []string{"plugs", "doors"}, "", false)
	g.table("doors", []string{"doors"}, "", false)
	killWhileProducing(t, g.start, func(i int) {
		g.produce("plugs", 3, 50, int64(100+i))
		g.produce("doors", 2, 30, int64(200+i))
	})
	r := g.start(Config{})
	defer r.stop(t)
	waitFor(t, func() bool {
		return g.committed("plugs", "plugs") && g.committed("all", "plugs", "doors") && g.committed("doors", "doors")
	})
	for _, name := range []string{"plugs", "all", "doors"} {
		topics := map[string][]string{"plugs": {"plugs"}, "all": {"plugs", "doors"}, "doors": {"doors"}}[name]
		g.checkExactlyOnce(name, topics...)
	}
}

// killWhileProducing starts engines (start) and kills each without a final
// commit, six times, while produce(i) runs 20 times 50 ms apart.
func killWhileProducing(t *testing.T, start func(Config) *running, produce func(i int)) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; ctx.Err() == nil && i < 20; i++ {
			produce(i)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	for i := range 6 {
		r := start(Config{FlushInterval: 100 * time.Millisecond})
		time.Sleep(time.Duration(150+i*70) * time.Millisecond)
		r.kill()
	}
	<-produced
}

// TestRoutesWhereAndUnrouted: one topic feeds two tables through their
// filters: plugs (device_type = 'smart_plug') and healthy doors (door
// sensors with battery > 50). Each table holds exactly the records its
// filter takes; a door sensor with a low battery is taken by neither: it
// is counted in deltaflow_unrouted_records_total, and with unrouted: dlq
// dead-lettered once (by the topic's first table), naming both filters.
func TestRoutesWhereAndUnrouted(t *testing.T) {
	for _, mode := range []string{UnroutedSkip, UnroutedDLQ} {
		t.Run(mode, func(t *testing.T) {
			g := newRoutesRig(t, map[string]int32{"sensors": 2})
			g.table("doors", []string{"sensors"}, "", false).route.Where = "device_type = 'door_window' AND battery > 50"
			g.table("plugs", []string{"sensors"}, "", false).route.Where = "device_type = 'smart_plug'"
			g.produce("sensors", 2, 500, 1)
			r := g.start(Config{Unrouted: mode})
			defer r.stop(t)
			waitFor(t, func() bool { return g.committed("doors", "sensors") && g.committed("plugs", "sensors") })
			plug := func(ev sim.Event) bool { return ev.DeviceType == sim.SmartPlug }
			healthyDoor := func(ev sim.Event) bool { return ev.DeviceType == sim.DoorWindow && ev.Battery > 50 }
			g.checkTaken("plugs", plug, "sensors")
			g.checkTaken("doors", healthyDoor, "sensors")
			lost := 0
			for _, ev := range g.events["sensors"] {
				if !plug(ev) && !healthyDoor(ev) {
					lost++
				}
			}
			if lost == 0 {
				t.Fatal("no record is left out by both filters; the case needs some")
			}
			if n := testutil.ToFloat64(r.engine.deps.Metrics.Unrouted.WithLabelValues("sensors")); int(n) != lost {
				t.Errorf("deltaflow_unrouted_records_total = %v, want %d", n, lost)
			}
			letters := 0
			dlq, err := g.bridge.DLQ(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if err := dlq.Letters(t.Context(), 1, func(l bridge.StoredLetter) error {
				if !strings.Contains(l.Reason, "unrouted") || !strings.Contains(l.Reason, "battery > 50") || !strings.Contains(l.Reason, "smart_plug") {
					t.Errorf("letter reason %q; want it unrouted, naming both filters", l.Reason)
				}
				letters++
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if want := map[string]int{UnroutedSkip: 0, UnroutedDLQ: lost}[mode]; letters != want {
				t.Errorf("%d dead letters, want %d", letters, want)
			}
			// deltaflow_dlq_records_total says they were unrouted.
			var unrouted float64
			for _, tb := range r.engine.tables {
				unrouted += testutil.ToFloat64(tb.metrics.DeadLetters.WithLabelValues(reasonUnrouted))
			}
			if want := map[string]int{UnroutedSkip: 0, UnroutedDLQ: lost}[mode]; int(unrouted) != want {
				t.Errorf("deltaflow_dlq_records_total{reason=unrouted} %v, want %d", unrouted, want)
			}
		})
	}
}
