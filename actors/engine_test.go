package actors

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/deltaflow/deltaflow/actors/mapping"
	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/sim"
	"github.com/deltaflow/deltaflow/messages"
	"github.com/deltaflow/deltaflow/storage"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// protoactor's actor system keeps package-level goroutines.
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.(*ActorSystem).Shutdown"),
		goleak.IgnoreTopFunction("github.com/lithammer/shortuuid/v4.init"),
		goleak.IgnoreTopFunction("time.Sleep"),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.(*deadLetterProcess).SendUserMessage"),
	)
}

const topic = "sensor-events"

// harness is one Kafka cluster, one table and one embedded NATS, shared by
// the engines a test starts one after another.
type harness struct {
	t       *testing.T
	cluster *kfake.Cluster
	store   storage.Store
	table   *delta.Table
	bridge  *bridge.Bridge
	mapper  *mapping.Mapper
	kcfg    kafka.Config
	events  []sim.Event // what was produced, in order
	records int
}

func newHarness(t *testing.T, store storage.Store) *harness {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	if store == nil {
		store, err = storage.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
	}
	m, err := mapping.New(mapping.DefaultConfig(), mapping.DefaultPartitionColumns)
	if err != nil {
		t.Fatal(err)
	}
	tbl := delta.NewTable(store)
	if _, err := tbl.Create(t.Context(), m.Schema(), mapping.DefaultPartitionColumns, nil); err != nil {
		t.Fatal(err)
	}
	b, err := bridge.New(t.Context(), bridge.Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir()}, testLogger(t), bridge.WithTable("sensor_events"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	kcfg := kafka.DefaultConfig()
	kcfg.Brokers = cluster.ListenAddrs()
	kcfg.Topic = topic
	kcfg.Group = "deltaflow-test"
	return &harness{t: t, cluster: cluster, store: store, table: tbl, bridge: b, mapper: m, kcfg: kcfg}
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

// produce sends n simulated events (badRatio of them malformed).
func (h *harness) produce(n int, badRatio float64, seed int64) {
	h.t.Helper()
	p, err := kafka.NewProducer(h.kcfg, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	defer p.Close()
	s := sim.New(sim.Config{Seed: seed, Events: n, Span: 72 * time.Hour, BadRatio: badRatio})
	var buf []byte
	for range n {
		key, value, ev := s.Next(buf[:0])
		rec := &kgo.Record{Topic: topic, Key: slices.Clone(key), Value: slices.Clone(value)}
		p.ProduceAsync(h.t.Context(), rec)
		h.events = append(h.events, ev)
	}
	if err := p.Flush(h.t.Context()); err != nil {
		h.t.Fatal(err)
	}
	h.records += n
}

// running is one engine with its consumer.
type running struct {
	engine *Engine
	cons   *kafka.Consumer
	cancel context.CancelFunc
}

func (h *harness) start(cfg Config, store storage.Store) *running {
	h.t.Helper()
	if store == nil {
		store = h.store
	}
	cfg.Topic = topic
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = 300 * time.Millisecond
	}
	cfg.Backoff = Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	if cfg.MaxRetry == 0 {
		cfg.MaxRetry = 5 * time.Second
	}
	e, err := NewEngine(cfg, Deps{Table: delta.NewTable(store), Mapper: h.mapper, Outbox: NewOutbox(h.bridge), Logger: testLogger(h.t)})
	if err != nil {
		h.t.Fatal(err)
	}
	cons, err := kafka.NewConsumer(h.kcfg, e, testLogger(h.t))
	if err != nil {
		h.t.Fatal(err)
	}
	if err := e.Start(cons, cons, store, mapping.DefaultPartitionColumns); err != nil {
		h.t.Fatal(err)
	}
	return &running{engine: e, cons: cons}
}

// waitCommitted waits until the table holds every produced offset.
func (h *harness) waitCommitted(r *running, timeout time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		s, err := h.table.Snapshot(h.t.Context())
		if err == nil {
			var n int64
			for p := int32(0); p < 3; p++ {
				if v, ok := s.TxnVersion(TxnAppID("deltaflow", topic, p)); ok {
					n += v + 1
				}
			}
			if n == int64(h.records) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.t.Fatalf("not all %d records committed within %s", h.records, timeout)
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.engine.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	r.engine.system.Shutdown()
}

// rowKey identifies a row by (device_id, event_time) — unique per event.
type rowKey struct {
	device string
	at     int64
}

// tableRows reads every row of the table.
func (h *harness) tableRows() map[rowKey][]delta.Row {
	h.t.Helper()
	s, err := h.table.Snapshot(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	schema, _ := s.Schema()
	out := map[rowKey][]delta.Row{}
	for _, a := range s.Files() {
		rows, err := delta.ReadDataFile(h.t.Context(), h.store, schema, s.PartitionColumns(), a)
		if err != nil {
			h.t.Fatal(err)
		}
		for _, r := range rows {
			k := rowKey{r[0].(string), r[2].(time.Time).UnixMicro()}
			out[k] = append(out[k], r)
		}
	}
	return out
}

// checkExactlyOnce asserts each good event is in the table once, with the
// values sent, and nothing else is.
func (h *harness) checkExactlyOnce() {
	h.t.Helper()
	rows := h.tableRows()
	good := 0
	for _, ev := range h.events {
		if ev.Bad {
			continue
		}
		good++
		k := rowKey{ev.DeviceID, ev.IngestedAt.UnixMicro()}
		got := rows[k]
		if len(got) != 1 {
			h.t.Fatalf("event %s@%s is in the table %d times", ev.DeviceID, ev.IngestedAt.Format(time.RFC3339Nano), len(got))
		}
		r := got[0]
		if r[1] != ev.DeviceType || r[3] != int32(ev.LinkQuality) {
			h.t.Fatalf("event %s: row %v does not match %+v", ev.DeviceID, r, ev)
		}
		if ev.DeviceType == sim.SmartPlug && (r[6] != ev.Power || r[10] != ev.State) {
			h.t.Fatalf("plug %s: power/state %v/%v, sent %v/%v", ev.DeviceID, r[6], r[10], ev.Power, ev.State)
		}
		if ev.DeviceType == sim.DoorWindow && (r[4] != ev.Contact || r[5] != int32(ev.Battery)) {
			h.t.Fatalf("door %s: contact/battery %v/%v, sent %v/%v", ev.DeviceID, r[4], r[5], ev.Contact, ev.Battery)
		}
	}
	if len(rows) != good {
		h.t.Fatalf("table has %d distinct rows, %d good events were sent", len(rows), good)
	}
}

func TestEndToEnd(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(100_000, 0, 1)
	r := h.start(Config{}, nil)
	h.waitCommitted(r, 60*time.Second)
	r.stop(t)
	h.checkExactlyOnce()
	// Partition directories are named as Spark names them.
	s, _ := h.table.Snapshot(t.Context())
	dirs := map[string]bool{}
	for _, a := range s.Files() {
		key, _ := delta.DecodePath(a.Path)
		dirs[key[:len(key)-len("/part-00000-00000000-0000-0000-0000-000000000000.c000.snappy.parquet")]] = true
	}
	for _, want := range []string{"device_type=smart_plug/event_date=2026-06-22", "device_type=door_window/event_date=2026-06-24"} {
		if !dirs[want] {
			t.Errorf("no files under %s (have %v)", want, dirs)
		}
	}
}

var _ = sync.Mutex{}
var _ = fmt.Sprint
var _ = messages.Seal{}
