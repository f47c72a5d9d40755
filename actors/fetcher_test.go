package actors

import (
	"context"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/messages"
	"github.com/deltaflow/deltaflow/storage"
)

// scriptedConsumer is a Consumer whose polls the test hands out, and which
// records the seeks the fetch loop asks for.
type scriptedConsumer struct {
	mu    sync.Mutex
	owned []tp
	seeks []map[tp]int64
	// fetched is what the client has fetched and not returned yet: Pause
	// hands it over.
	fetched    []kafka.Batch
	fetchedErr error        // what Pause reports with fetched
	maxPoll    int          // MaxPollRecords; 0: 2048
	lag        map[tp]int64 // what Lag reports
}

func (c *scriptedConsumer) CommitOffsets(context.Context, map[tp]int64) error { return nil }
func (c *scriptedConsumer) Poll(context.Context) ([]kafka.Batch, error)       { return nil, nil }
func (c *scriptedConsumer) Resume(...tp) ([]kafka.Batch, error)               { return nil, nil }
func (c *scriptedConsumer) Owned() []tp                                       { return c.owned }
func (c *scriptedConsumer) Close()                                            {}
func (c *scriptedConsumer) EndOffsets(context.Context) (map[tp]int64, error)  { return nil, nil }
func (c *scriptedConsumer) Lag(context.Context) (map[tp]int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.lag), nil
}
func (c *scriptedConsumer) TopicLogs(context.Context, string) (ledger.TopicLogs, error) {
	return ledger.TopicLogs{}, nil
}
func (c *scriptedConsumer) Pause(...tp) ([]kafka.Batch, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fetched, err := c.fetched, c.fetchedErr
	c.fetched, c.fetchedErr = nil, nil
	return fetched, err
}

func (c *scriptedConsumer) MaxPollRecords() int {
	if c.maxPoll == 0 {
		return 2048
	}
	return c.maxPoll
}

func (c *scriptedConsumer) Seek(offsets map[tp]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seeks = append(c.seeks, maps.Clone(offsets))
}

// recordingReader is a reader actor that keeps the Fetches it gets.
type recordingReader struct {
	mu      sync.Mutex
	fetches []*messages.Fetch
}

func (r *recordingReader) Receive(c actor.Context) {
	if m, ok := c.Message().(*messages.Fetch); ok {
		r.mu.Lock()
		r.fetches = append(r.fetches, m)
		r.mu.Unlock()
		m.Done()
	}
}

func (r *recordingReader) offsets() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int64
	for _, f := range r.fetches {
		for _, rec := range f.Records {
			out = append(out, rec.Offset)
		}
	}
	return out
}

// fetchRig is a fetch loop over a scripted consumer of one partition, read
// by tables each with a recording reader.
type fetchRig struct {
	p       tp
	cons    *scriptedConsumer
	system  *actor.ActorSystem
	sinks   []*sink
	readers []*recordingReader
	f       *fetcher
}

func newFetchRig(t *testing.T, tables ...string) *fetchRig {
	g := &fetchRig{p: tp{Topic: "plugs", Partition: 0}, system: actor.NewActorSystem()}
	g.cons = &scriptedConsumer{owned: []tp{g.p}}
	for _, name := range tables {
		s := &sink{name: name, reg: newRegistry(), budget: NewBudget(1<<30, 4), gen: 1,
			committer: g.system.NewLocalPID("committer-" + name)}
		s.reg.reset(1)
		g.sinks = append(g.sinks, s)
		g.readers = append(g.readers, &recordingReader{})
	}
	g.f = newFetcher(fetcherDeps{cons: g.cons, sinks: g.sinks, system: g.system, metrics: NewMetrics(nil), logger: testLogger(t)})
	return g
}

// assign is Kafka assigning the partition, every table continuing at 0.
func (g *fetchRig) assign() {
	var starts []tableStarts
	for i := range g.sinks {
		starts = append(starts, tableStarts{sink: i, gen: 1, offsets: map[tp]int64{g.p: 0}})
	}
	g.f.assigned([]tp{g.p}, starts)
}

// spawn registers table i's reader.
func (g *fetchRig) spawn(i int) {
	pid := g.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return g.readers[i] }))
	g.sinks[i].reg.setReader(1, g.p, pid)
}

// poll dispatches a poll of the records at offsets [from, to) and waits
// until the readers took them.
func (g *fetchRig) poll(t *testing.T, from, to int64) {
	g.f.wait(t.Context(), g.f.dispatch([]kafka.Batch{g.batch(from, to)}, nil))
}

// batch is the partition's records at offsets [from, to).
func (g *fetchRig) batch(from, to int64) kafka.Batch {
	b := kafka.Batch{Topic: g.p.Topic, Partition: g.p.Partition, HighWatermark: 100}
	for off := from; off < to; off++ {
		b.Records = append(b.Records, &kgo.Record{Topic: g.p.Topic, Partition: g.p.Partition, Offset: off})
	}
	return b
}

// sought returns the seeks since the first n.
func (g *fetchRig) sought(n int) []map[tp]int64 {
	g.cons.mu.Lock()
	defer g.cons.mu.Unlock()
	return g.cons.seeks[n:]
}

// Two tables read one partition; the second's reader is not spawned yet
// when the first poll's records arrive (its committer answered the
// assignment; its pipeline spawns readers a moment later). Those records
// go by it, so once its reader is there the loop must seek back for it,
// and hand it nothing before: it handed the reader the next poll's
// records, and the table's txn moved past the ones it never saw
// (TestRoutesKillLoop lost 50 records of two partitions this way, one run
// in ten).
func TestFetcherRewindsForALateReader(t *testing.T) {
	g := newFetchRig(t, "early", "late")
	g.assign()
	g.spawn(0)
	g.f.between()
	g.poll(t, 0, 10)
	before := len(g.sought(0))
	// The late table's reader arrives while the next poll is out: that
	// poll's records are not its next ones either.
	g.spawn(1)
	g.poll(t, 10, 20)
	if got := g.readers[1].offsets(); len(got) != 0 {
		t.Fatalf("the late table's reader got offsets %v before Kafka was sought back for it", got)
	}
	g.f.between()
	if seeks := g.sought(before); len(seeks) != 1 || seeks[0][g.p] != 0 {
		t.Fatalf("seeks %v; want the partition sought back to 0 for the late table", seeks)
	}
	g.poll(t, 0, 20)
	if got := g.readers[1].offsets(); len(got) != 20 || got[0] != 0 {
		t.Fatalf("the late table's reader got offsets %v; want 0 to 19", got)
	}
	if got := g.readers[0].offsets(); len(got) != 20 || got[10] != 10 {
		t.Fatalf("the early table's reader got offsets %v; want 0 to 19, once", got)
	}
}

// franz-go starts fetching a partition once the engine answered where it
// starts, and the loop may poll its records before it applies the
// assignment: they go to no table, and Kafka is past them. The loop must
// seek the partition back to where the tables continue: before, it took
// the assignment's start for Kafka's position, waited for records that
// never came, and handed the tables later ones as if they followed
// (TestRoutesWhereAndUnrouted stalled, TestRoutesKillLoop lost records).
func TestFetcherSeeksAnAssignmentPolledBefore(t *testing.T) {
	g := newFetchRig(t, "plugs")
	g.spawn(0)
	g.poll(t, 0, 10) // before the loop heard of the assignment
	g.assign()
	g.f.between()
	if seeks := g.sought(0); len(seeks) != 1 || seeks[0][g.p] != 0 {
		t.Fatalf("seeks %v; want the partition sought back to 0", seeks)
	}
	g.poll(t, 0, 10)
	if got := g.readers[0].offsets(); len(got) != 10 || got[0] != 0 {
		t.Fatalf("the reader got offsets %v; want 0 to 9", got)
	}
}

// seekCounter counts the seeks the fetch loop asks of the consumer (franz-go
// logs each at INFO).
type seekCounter struct {
	Consumer
	seeks atomic.Int64
}

func (c *seekCounter) Seek(offsets map[tp]int64) {
	c.seeks.Add(1)
	c.Consumer.Seek(offsets)
}

// TestFetchWaitsForThePipeline: while a dropped epoch's pipeline waits out
// its rebuild backoff, the fetch loop waits for it instead of polling,
// finding no reader and rewinding over and over (issue 29, item 5: 880
// seeks, and as many log lines, a second). Each rebuild costs the loop a
// handful of seeks (its reset's, and a rewind per partition while the
// readers come up), however long the backoff.
func TestFetchWaitsForThePipeline(t *testing.T) {
	h := newHarness(t, nil)
	counter := &seekCounter{}
	h.wrap = func(c Consumer) Consumer {
		counter.Consumer = c
		return counter
	}
	faulty := storage.NewFaulty(h.store)
	h.produce(3_000, 0, 5)
	// The epochs' commits (version 1 records the start offsets) fail past
	// the retry budget: epochs are dropped, and each rebuild waits a
	// second, records waiting in Kafka meanwhile.
	faulty.Fail(storage.Rule{Op: storage.OpPutIfAbsent, Prefix: delta.LogDir, Times: 12,
		Match: func(key string) bool { return !strings.HasSuffix(key, "00000000000000000001.json") }})
	r := h.start(Config{MaxRetry: 100 * time.Millisecond, RetryBackoff: Backoff{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond},
		Backoff: Backoff{Initial: time.Second, Max: time.Second}}, faulty)
	// Records arrive while the pipeline is down.
	restarts := r.engine.deps.Metrics.Table(testTable).Restarts.WithLabelValues("pipeline")
	waitFor(t, func() bool { return value(t, restarts) > 0 })
	h.produce(3_000, 0, 6)
	h.waitCommitted(r, 60*time.Second)
	rebuilds := value(t, restarts)
	r.stop(t)
	h.checkExactlyOnce()
	// Per generation: the reset's seek and, at most, a rewind of each of
	// the 3 partitions before and after its readers come up.
	perGeneration := 1 + 2*3
	if seeks := counter.seeks.Load(); seeks > int64(perGeneration)*int64(rebuilds+1) {
		t.Fatalf("%d seeks over %v pipeline rebuilds (each after 1s of backoff); want at most %d per generation: "+
			"the fetch loop spins while the pipeline is down", seeks, rebuilds, perGeneration)
	}
	t.Logf("%d seeks over %v pipeline rebuilds", counter.seeks.Load(), rebuilds)
}

// deafReader is a reader whose generation was dropped: stopped with the
// Fetch in its mailbox, it never answers.
type deafReader struct{}

func (deafReader) Receive(actor.Context) {}

// A table's generation is dropped (its pipeline stopped: an abort) while
// its readers hold records the loop handed them, which they will never
// answer. The loop must not wait for them until the table's pipeline is
// rebuilt, a backoff later: the other tables reading the partition would
// wait as long.
func TestFetcherDoesNotWaitForADroppedGeneration(t *testing.T) {
	g := newFetchRig(t, "healthy", "broken")
	g.assign()
	g.spawn(0)
	deaf := g.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return deafReader{} }))
	g.sinks[1].reg.setReader(1, g.p, deaf)
	g.f.between()
	b := kafka.Batch{Topic: g.p.Topic, Partition: g.p.Partition, HighWatermark: 100,
		Records: []*kgo.Record{{Topic: g.p.Topic, Partition: g.p.Partition, Offset: 0}}}
	in := g.f.dispatch([]kafka.Batch{b}, nil)
	waited := make(chan struct{})
	go func() {
		g.f.wait(t.Context(), in)
		close(waited)
	}()
	g.sinks[1].reg.reset(2) // broken's committer drops the generation
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop still waits for the dropped generation's reader after 10s")
	}
}
