package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/sim"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/messages"
	"github.com/deltaflow/deltaflow/storage"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// protoactor's actor system keeps package-level goroutines.
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.(*ActorSystem).Shutdown"),
		goleak.IgnoreTopFunction("github.com/lithammer/shortuuid/v4.init"),
		goleak.IgnoreTopFunction("time.Sleep"),
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		// The same throttle timer as named by newer compilers (inlined
		// differently): it ends one throttle period after the last event.
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewThrottle.func1.1"),
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
	outbox  Outbox // the engines' outbox; nil: the bridge's
	// wrap, if set, wraps each engine's consumer (to count its calls).
	wrap func(Consumer) Consumer
	// schemas and health, if set, are the engines' Deps'.
	schemas SchemaFetcher
	health  *Health
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

// testTable is the name of the harness's table.
const testTable = "sensor_events"

// metrics is the metrics of the engine's table.
func (r *running) metrics() *Metrics { return r.engine.tables[0].metrics }

// tps are partitions of the harness's topic.
func tps(ps ...int32) []tp {
	out := make([]tp, len(ps))
	for i, p := range ps {
		out[i] = tp{Topic: topic, Partition: p}
	}
	return out
}

// partKey is the Health key of partition p of the harness's table held.
func partKey(p int32) string { return TableKey(testTable, heldKey(tp{Topic: topic, Partition: p})) }

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
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = 300 * time.Millisecond
	}
	if cfg.Backoff == (Backoff{}) {
		cfg.Backoff = Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	}
	if cfg.MaxRetry == 0 {
		cfg.MaxRetry = 5 * time.Second
	}
	outbox := h.outbox
	if outbox == nil {
		outbox = NewOutbox(h.bridge)
	}
	e, err := NewEngine(cfg, Deps{Logger: testLogger(h.t), Schemas: h.schemas, Health: h.health}, Route{Name: testTable, Topics: []string{topic},
		Table: delta.NewTable(store), Mapper: h.mapper, PartitionColumns: h.mapper.PartitionColumns(), Outbox: outbox})
	if err != nil {
		h.t.Fatal(err)
	}
	cons, err := kafka.NewConsumer(h.kcfg, e, testLogger(h.t))
	if err != nil {
		h.t.Fatal(err)
	}
	var c Consumer = cons
	if h.wrap != nil {
		c = h.wrap(cons)
	}
	if err := e.Start(c); err != nil {
		h.t.Fatal(err)
	}
	return &running{engine: e, cons: cons}
}

// waitCommitted waits until the table holds every produced offset.
func (h *harness) waitCommitted(r *running, timeout time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if committedRecords(h) == int64(h.records) {
			return
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
		for _, id := range []string{"committer", "committer/pipeline-1", "committer/pipeline-2", "committer/pipeline-3"} {
			_, ok := r.engine.system.ProcessRegistry.GetLocal(id)
			t.Logf("%s alive: %v", id, ok)
		}
		for g := 1; g <= 3; g++ {
			for i := 1; i < 12; i++ {
				id := fmt.Sprintf("committer/pipeline-%d/buffer-%d", g, i)
				if _, ok := r.engine.system.ProcessRegistry.GetLocal(id); ok {
					t.Logf("%s alive", id)
				}
			}
			for p := 0; p < 3; p++ {
				id := fmt.Sprintf("committer/pipeline-%d/reader-sensor-events-%d", g, p)
				if _, ok := r.engine.system.ProcessRegistry.GetLocal(id); ok {
					t.Logf("%s alive", id)
				}
			}
		}
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
	// delta-rs, an independent reader, sees the same rows.
	out := testenv.DeltaRS(t, nil, "read", h.store.(*storage.Local).Root(), "--rows")
	var view struct {
		Version int64            `json:"version"`
		Rows    []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(out, &view); err != nil {
		t.Fatal(err)
	}
	if len(view.Rows) != h.records || view.Version != s.Version() {
		t.Fatalf("delta-rs reads %d rows at version %d; want %d rows at %d", len(view.Rows), view.Version, h.records, s.Version())
	}
}

// kill tears the engine down the way a crash would: no final epoch, no
// clean consumer shutdown handshake with the committer.
func (r *running) kill() {
	e := r.engine
	e.cancel()
	<-e.loopDone
	e.stopping.Store(true)
	r.cons.Close()
	// A killed process does nothing more: wait until the committers (which
	// may be retrying a commit) are really gone.
	for _, t := range e.tables {
		_ = e.system.Root.StopFuture(t.committer).Wait()
	}
	e.system.Shutdown()
}

// TestPanicInBufferMidEpoch: a buffer panics while rows of an epoch are in
// flight; the generation is dropped and re-read, and every record lands
// exactly once.
func TestPanicInBufferMidEpoch(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(30_000, 0, 2)
	var once sync.Once
	var panicked atomic.Bool
	r := h.start(Config{beforeRows: func(key string) {
		once.Do(func() {
			panicked.Store(true)
			panic("injected fault in buffer " + key)
		})
	}}, nil)
	h.waitCommitted(r, 60*time.Second)
	r.stop(t)
	if !panicked.Load() {
		t.Fatal("the fault was never injected")
	}
	h.checkExactlyOnce()
}

// TestStorageErrors: uploads and commits fail for a while (retried inside
// the actors), and once for longer than the retry budget (the epoch is
// dropped and re-read); nothing is lost or duplicated.
func TestStorageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule storage.Rule
	}{
		{"upload-retried", storage.Rule{Op: storage.OpPutStream, Times: 3}},
		{"commit-retried", storage.Rule{Op: storage.OpPutIfAbsent, Prefix: delta.LogDir, Times: 3}},
		{"upload-exhausted", storage.Rule{Op: storage.OpPutStream, Times: 40}},
		{"commit-exhausted", storage.Rule{Op: storage.OpPutIfAbsent, Prefix: delta.LogDir, Times: 40}},
		{"commit-lost-response", storage.Rule{Op: storage.OpPutIfAbsent, Prefix: delta.LogDir, Times: 2, After: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			faulty := storage.NewFaulty(h.store)
			h.produce(20_000, 0, 3)
			faulty.Fail(tc.rule)
			r := h.start(Config{MaxRetry: 300 * time.Millisecond}, faulty)
			h.waitCommitted(r, 60*time.Second)
			r.stop(t)
			h.checkExactlyOnce()
		})
	}
}

// TestCrashBetweenUploadAndCommit: the process dies after its data files
// are uploaded but before the commit lands; a new process resumes from the
// log and commits every record exactly once.
func TestCrashBetweenUploadAndCommit(t *testing.T) {
	h := newHarness(t, nil)
	faulty := storage.NewFaulty(h.store)
	h.produce(10_000, 0, 4)
	r := h.start(Config{FlushInterval: time.Hour, MaxRetry: 200 * time.Millisecond}, faulty) // epochs only on request
	waitFor(t, func() bool {
		return r.engine.Position()[tp{Topic: topic, Partition: 0}] > 0 && r.engine.tables[0].budget.Bytes() > 0
	})
	// Block every commit: the epoch's files upload, its commit never lands.
	blocked := make(chan struct{})
	var blockOnce sync.Once
	var mu sync.Mutex
	var uploaded []string
	faulty.Before(func(op storage.Op, key string) error {
		if op == storage.OpPutStream {
			mu.Lock()
			uploaded = append(uploaded, key)
			mu.Unlock()
		}
		if op == storage.OpPutIfAbsent && strings.HasPrefix(key, delta.LogDir) {
			blockOnce.Do(func() { close(blocked) })
			return errors.New("crashed")
		}
		return nil
	})
	flushCtx, cancelFlush := context.WithCancel(context.Background())
	defer cancelFlush()
	go r.engine.CommitNow(flushCtx) //nolint:errcheck // the process "dies" before it answers
	<-blocked
	r.kill()
	s, _ := h.table.Snapshot(t.Context())
	if s.NumFiles() != 0 {
		t.Fatalf("data committed before the crash (version %d)", s.Version())
	}
	faulty.Before(nil)
	r2 := h.start(Config{}, nil)
	h.waitCommitted(r2, 60*time.Second)
	r2.stop(t)
	h.checkExactlyOnce()
	// The crashed epoch's files were uploaded and are orphans now: in
	// storage, not in the table.
	mu.Lock()
	defer mu.Unlock()
	if len(uploaded) == 0 {
		t.Fatal("no data file was uploaded before the crash")
	}
	s, _ = h.table.Snapshot(t.Context())
	for _, key := range uploaded {
		if s.File(delta.EncodePath(key)) != nil {
			t.Errorf("file %s of the crashed epoch is live", key)
		}
		if _, err := h.store.Stat(t.Context(), key); err != nil {
			t.Errorf("file %s of the crashed epoch: %v", key, err)
		}
	}
}

// TestRestartResumesFromLog: a second run continues where the log says,
// whatever the KV mirror holds.
func TestRestartResumesFromLog(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(5_000, 0, 5)
	r := h.start(Config{}, nil)
	h.waitCommitted(r, 30*time.Second)
	r.stop(t)
	// Corrupt the hint: one partition missing, one behind, one ahead.
	ctx := t.Context()
	h.bridge.DeleteOffset(ctx, topic, 0)
	h.bridge.PutOffset(ctx, topic, 1, bridge.OffsetRecord{Offset: 1, Version: 1})
	h.bridge.PutOffset(ctx, topic, 2, bridge.OffsetRecord{Offset: 1 << 40, Version: 99})
	h.produce(5_000, 0, 6)
	r = h.start(Config{}, nil)
	h.waitCommitted(r, 30*time.Second)
	r.stop(t)
	h.checkExactlyOnce()
	// The mirror follows the log again.
	h.waitMirrorMatchesLog()
}

// TestIdleBuffersRetire: buffers of partition values that stop receiving
// rows are stopped after a few idle epochs; rows that arrive for them later
// go to fresh buffers, and nothing is lost on the way.
func TestIdleBuffersRetire(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(2_000, 0, 8)
	r := h.start(Config{FlushInterval: 30 * time.Millisecond}, nil)
	h.waitCommitted(r, 30*time.Second)
	if n := len(h.bufferRegistry(r)); n == 0 {
		t.Fatal("no buffers after the first batch")
	}
	waitFor(t, func() bool { return len(h.bufferRegistry(r)) == 0 })
	h.produce(2_000, 0, 9)
	h.waitCommitted(r, 30*time.Second)
	r.stop(t)
	h.checkExactlyOnce()
}

func (h *harness) bufferRegistry(r *running) map[string]*actor.PID {
	return r.engine.tables[0].reg.bufferList()
}

// TestMemoryBudget: with a small budget the fetch loop pauses Kafka while
// buffers are full; buffered bytes stay near the budget (plus the two polls
// the loop may have in flight) and every record still lands once.
func TestMemoryBudget(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(60_000, 0, 10)
	const budget = 512 << 10
	h.kcfg.MaxPollRecords = 1000
	r := h.start(Config{MemoryBudget: budget, FlushMaxBytes: budget / 2, FlushInterval: time.Hour}, nil)
	var peak atomic.Int64
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
				if b := r.engine.tables[0].budget.Bytes(); b > peak.Load() {
					peak.Store(b)
				}
			}
		}
	}()
	// The budget drives every commit but the last: the tail left once all
	// records are read is below both the budget and flush.max_bytes, and
	// the flush timer is an hour away, so ask for that one.
	deadline := time.Now().Add(60 * time.Second)
	for read := int64(0); read < int64(h.records); {
		if time.Now().After(deadline) {
			t.Fatalf("read %d of %d records within 60s", read, h.records)
		}
		time.Sleep(20 * time.Millisecond)
		read = 0
		for _, next := range r.engine.Position() {
			read += next
		}
	}
	if err := r.engine.CommitNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.waitCommitted(r, 60*time.Second)
	close(done)
	r.stop(t)
	h.checkExactlyOnce()
	const inFlight = 2 * 1000 * 600 // polls × records × generous mapped row size (~400 B)
	if p := peak.Load(); p > budget+inFlight {
		t.Fatalf("buffered bytes peaked at %d, budget %d", p, budget)
	}
	s, _ := h.table.Snapshot(t.Context())
	if s.Version() < 5 {
		t.Fatalf("a %d-byte budget should force many small epochs; got %d commits", budget, s.Version())
	}
}

// TestDeadLetters: malformed records go to the DLQ stream with their
// reasons, not to the table: rows + DLQ messages = records produced.
func TestDeadLetters(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(10_000, 0.1, 7)
	r := h.start(Config{}, nil)
	h.waitCommitted(r, 30*time.Second)
	r.stop(t)
	h.checkExactlyOnce()
	bad := 0
	for _, ev := range h.events {
		if ev.Bad {
			bad++
		}
	}
	nc, err := nats.Connect(h.bridge.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := js.Stream(ctx(t), bridge.DefaultDLQStream("sensor_events"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := stream.Info(ctx(t))
	if bad == 0 || int(info.State.Msgs) != bad {
		t.Fatalf("DLQ holds %d records, %d bad ones were produced", info.State.Msgs, bad)
	}
	msg, err := stream.GetMsg(ctx(t), 1)
	if err != nil || msg.Header.Get("Deltaflow-Error") == "" || msg.Header.Get("Deltaflow-Offset") == "" {
		t.Fatalf("DLQ message without reason or offset: %v %v", err, msg)
	}
	if rows := len(h.tableRows()); rows+int(info.State.Msgs) != h.records {
		t.Fatalf("%d rows + %d dead letters != %d records", rows, info.State.Msgs, h.records)
	}
	// deltaflow_dlq_records_total says why: the mapping refused them.
	dead := r.metrics().DeadLetters
	if n := testutil.ToFloat64(dead.WithLabelValues(reasonMapping)); int(n) != bad ||
		testutil.ToFloat64(dead.WithLabelValues(reasonUnrouted))+testutil.ToFloat64(dead.WithLabelValues(reasonTooLarge)) != 0 {
		t.Errorf("dead letters by reason: mapping %v (want %d), unrouted %v, too_large %v", n, bad,
			testutil.ToFloat64(dead.WithLabelValues(reasonUnrouted)), testutil.ToFloat64(dead.WithLabelValues(reasonTooLarge)))
	}
}

// TestEventsAndOffsets: a subscriber on deltaflow.> sees commit, flush,
// checkpoint and actor-restart events; the KV bucket shows each
// partition's committed offset.
func TestEventsAndOffsets(t *testing.T) {
	h := newHarness(t, nil)
	nc, err := nats.Connect(h.bridge.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var mu sync.Mutex
	kinds := map[string]int{}
	sub, err := nc.Subscribe("deltaflow.>", func(m *nats.Msg) {
		mu.Lock()
		kinds[m.Subject]++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	var once sync.Once
	r := h.start(Config{FlushInterval: 50 * time.Millisecond, beforeRows: func(string) {
		once.Do(func() { panic("injected") })
	}}, nil)
	for i := range 12 { // at least ten commits, so a checkpoint is written
		h.produce(200, 0, int64(100+i))
		h.waitCommitted(r, 30*time.Second)
	}
	r.stop(t)
	h.checkExactlyOnce()
	for _, kind := range []string{"commit", "flush", "checkpoint", "actor"} {
		subject := "deltaflow.sensor_events.events." + kind
		waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return kinds[subject] > 0 })
	}
	h.waitMirrorMatchesLog()
}

// waitMirrorMatchesLog waits until the KV mirror holds, for every
// partition, the offset the table's txn says.
func (h *harness) waitMirrorMatchesLog() {
	h.t.Helper()
	ctx := h.t.Context()
	s, err := h.table.Snapshot(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	waitFor(h.t, func() bool {
		kv, err := h.bridge.Offsets(ctx, topic)
		if err != nil || len(kv) != 3 {
			return false
		}
		for p, rec := range kv {
			if v, _ := s.TxnVersion(ledger.AppID("deltaflow", topic, p)); rec.Offset != v {
				return false
			}
		}
		return true
	})
}

func ctx(t *testing.T) context.Context { return t.Context() }

// waitFor polls cond for up to 30 s: a hang detector, not a timing
// check. Many first waits hold an engine's start (a Kafka group join),
// which under -race on a loaded CI machine once took more than 10 s
// (TestRecordsWaitForTheirSchema, TestUpsertKeyIndex; both pass in 1–3 s
// and in 50 runs each here).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	waitWithin(t, 30*time.Second, cond)
}

// waitWithin polls cond for up to d.
func waitWithin(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUserPause: the control service's pause stops fetching once Pause
// returns — records produced after it are not read — and resume reads
// them.
func TestUserPause(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(1_000, 0, 11)
	r := h.start(Config{FlushInterval: 50 * time.Millisecond}, nil)
	h.waitCommitted(r, 30*time.Second)
	if err := r.engine.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := r.engine.Position()
	h.produce(1_000, 0, 12)
	time.Sleep(2 * time.Second)
	if after := r.engine.Position(); !maps.Equal(before, after) {
		t.Fatalf("paused, yet positions moved from %v to %v", before, after)
	}
	// What waits is the lag, per partition of the table (the lag events).
	p := r.engine.Progress(t.Context())
	if len(p.Lag) != 1 || p.Lag[0].Table != testTable || len(p.Lag[0].Uncommitted) != 3 {
		t.Fatalf("lag %+v; want the table's 3 partitions", p.Lag)
	}
	var waiting int64
	for _, n := range p.Lag[0].Uncommitted {
		waiting += n
	}
	if waiting != 1_000 || p.Uncommitted != 1_000 {
		t.Errorf("lag sums to %d, uncommitted %d; want the 1000 records produced while paused", waiting, p.Uncommitted)
	}
	if secs := testutil.ToFloat64(r.metrics().PendingSeconds); secs < 1 {
		t.Errorf("deltaflow_uncommitted_seconds %v while records waited 2 s", secs)
	}
	r.engine.Resume()
	h.waitCommitted(r, 30*time.Second)
	r.stop(t)
	h.checkExactlyOnce()
}

// statsRows is the number of rows in the snapshot's live files, by their
// stats.
func statsRows(t *testing.T, s *delta.Snapshot) int64 {
	t.Helper()
	var rows int64
	for _, a := range s.Files() {
		st, err := delta.ParseStats(a.Stats)
		if err != nil {
			t.Fatal(err)
		}
		rows += st.NumRecords
	}
	return rows
}

// produceTo sends n simulated events to partition p.
func (h *harness) produceTo(p int32, n int, seed int64) {
	h.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.kcfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	s := sim.New(sim.Config{Seed: seed, Events: n})
	recs := make([]*kgo.Record, n)
	for i := range recs {
		key, value, _ := s.Next(nil)
		recs[i] = &kgo.Record{Topic: topic, Partition: p, Key: key, Value: value}
	}
	if err := cl.ProduceSync(h.t.Context(), recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

// TestForeignCommitOfOwnedPartitionDropsTheEpoch: another writer commits a
// partition this engine reads (it owned it after our snapshot was read, or
// we are a zombie), and our next commit of another partition absorbs that
// commit without a conflict. The epoch that then holds records of the
// partition re-read what the other writer committed: it must be dropped and
// the partition re-read from the other writer's offset, never committed
// over it (a duplicate per re-read record). The scale-out scenario's
// conflicts on partitions handed over by a rebalance led here.
func TestForeignCommitOfOwnedPartitionDropsTheEpoch(t *testing.T) {
	h := newHarness(t, nil)
	r := h.start(Config{}, nil)
	defer r.stop(t)
	txn := func(p int32) int64 {
		s, err := h.table.Snapshot(t.Context())
		if err != nil {
			return -2
		}
		v, ok := s.TxnVersion(ledger.AppID("deltaflow", topic, p))
		if !ok {
			return -1
		}
		return v
	}
	h.produceTo(0, 100, 1)
	waitFor(t, func() bool { return txn(0) == 99 })

	// The other writer committed partition 1's offsets 0..29.
	snap, err := h.table.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Now().UnixMilli()
	if _, err := h.table.Commit(t.Context(), snap, []delta.Action{{Txn: &delta.Txn{AppID: ledger.AppID("deltaflow", topic, 1), Version: 29, LastUpdated: &ms}}},
		delta.Operation{Name: "STREAMING UPDATE"}); err != nil {
		t.Fatal(err)
	}
	// Our next commit (partition 0 only) absorbs it without a conflict.
	h.produceTo(0, 100, 2)
	waitFor(t, func() bool { return txn(0) == 199 })

	h.produceTo(1, 50, 3)
	waitFor(t, func() bool { return txn(1) == 49 })
	s, err := h.table.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rows := statsRows(t, s)
	// 200 of partition 0, and of partition 1 only offsets 30..49.
	if rows != 220 {
		t.Fatalf("table holds %d rows, want 220: partition 1's offsets 0..29, committed by the other writer, were committed again", rows)
	}
}

// TestCatchUp: with a flush interval far away, CatchUp commits everything
// the topic held when it started (an empty partition included) and returns;
// a cancelled CatchUp returns the context's error.
func TestCatchUp(t *testing.T) {
	h := newHarness(t, nil)
	h.produceTo(0, 3000, 1)
	h.produceTo(1, 2000, 2) // partition 2 stays empty
	h.records = 5000
	r := h.start(Config{FlushInterval: time.Hour}, nil)
	defer r.stop(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := r.engine.CatchUp(ctx); err != nil {
		t.Fatalf("CatchUp: %v", err)
	}
	s, err := h.table.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Partition 2's start (offset 0: txn version -1) was recorded before it was read.
	if got := ledger.Last(s, "deltaflow", topic); !maps.Equal(got, map[int32]int64{0: 2999, 1: 1999, 2: -1}) {
		t.Fatalf("committed offsets after CatchUp: %v", got)
	}

	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if err := r.engine.CatchUp(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled CatchUp: %v", err)
	}
}

// TestEngineBeforeStart: the methods that need the fetch loop are safe on
// an engine not started: Pause fails, Resume does nothing, Position is
// empty and Stop has nothing to stop.
func TestEngineBeforeStart(t *testing.T) {
	m, err := mapping.New(mapping.DefaultConfig(), mapping.DefaultPartitionColumns)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(Config{}, Deps{}, Route{Name: testTable, Topics: []string{topic}, Table: delta.NewTable(storage.NewMem()), Mapper: m, Outbox: NewOutbox(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.system.Shutdown()
	if err := e.Pause(t.Context()); !errors.Is(err, errNotStarted) {
		t.Fatalf("Pause before Start = %v, want %v", err, errNotStarted)
	}
	e.Resume()
	if pos := e.Position(); len(pos) != 0 {
		t.Fatalf("Position before Start = %v", pos)
	}
	if err := e.Stop(t.Context()); err != nil {
		t.Fatalf("Stop before Start = %v", err)
	}
}

// flushReasons is an Outbox that records the reasons of the flush events.
type flushReasons struct {
	Outbox
	mu      sync.Mutex
	reasons []messages.Reason
}

func (o *flushReasons) Publish(ev bridge.Event) {
	if f, ok := ev.(*bridge.FlushEvent); ok {
		o.mu.Lock()
		o.reasons = append(o.reasons, messages.Reason(f.Reason))
		o.mu.Unlock()
	}
	o.Outbox.Publish(ev)
}

func (o *flushReasons) get() []messages.Reason {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.reasons)
}

// waitRead waits until the fetch loop has handed every produced record to
// the readers.
func (h *harness) waitRead(r *running) {
	h.t.Helper()
	waitFor(h.t, func() bool {
		var n int64
		for _, next := range r.engine.Position() {
			n += next
		}
		return n == int64(h.records)
	})
}

// TestFlushEventReasons: the flush event says why its epoch was sealed:
// request for CommitNow, shutdown for Stop's final commit, timer for the
// flush interval.
func TestFlushEventReasons(t *testing.T) {
	h := newHarness(t, nil)
	out := &flushReasons{Outbox: NewOutbox(h.bridge)}
	h.outbox = out
	// No timer: the request, then Stop, seal the epochs.
	r := h.start(Config{FlushInterval: time.Hour}, nil)
	h.produce(300, 0, 31)
	h.waitRead(r)
	if err := r.engine.CommitNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := out.get(); !slices.Equal(got, []messages.Reason{messages.ReasonRequest}) {
		t.Fatalf("after CommitNow: flush reasons %q, want [request]", got)
	}
	h.produce(300, 0, 32)
	h.waitRead(r)
	r.stop(t)
	if got := out.get(); !slices.Equal(got, []messages.Reason{messages.ReasonRequest, messages.ReasonShutdown}) {
		t.Fatalf("after Stop: flush reasons %q, want [request shutdown]", got)
	}
	// The timer alone.
	r = h.start(Config{FlushInterval: 50 * time.Millisecond}, nil)
	h.produce(300, 0, 33)
	h.waitCommitted(r, 30*time.Second)
	r.stop(t)
	h.checkExactlyOnce()
	got := out.get()
	if len(got) < 3 {
		t.Fatalf("flush reasons %q: no timer epoch", got)
	}
	for _, reason := range got[2:] {
		if reason != messages.ReasonTimer {
			t.Fatalf("flush reasons %q: want only timer after [request shutdown]", got)
		}
	}
}
