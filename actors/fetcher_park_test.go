package actors

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/messages"
)

// startsAtZero is a kafka.Handler that reads every partition from 0.
type startsAtZero struct{}

func (startsAtZero) Assigned(_ context.Context, _ string, ps []int32) (map[int32]int64, error) {
	out := map[int32]int64{}
	for _, p := range ps {
		out[p] = 0
	}
	return out, nil
}

func (startsAtZero) Revoked(context.Context, string, []int32) {}

// fillingReader is a reader whose table holds every record it is handed
// (recordCost bytes of its budget) until the test's committer frees them,
// and which checks, as the real reader does, that each Fetch starts where
// it continues.
type fillingReader struct {
	budget *Budget
	mu     sync.Mutex
	next   int64
	got    []int64
	wrong  []string
}

const recordCost = 1000

func (r *fillingReader) Receive(c actor.Context) {
	m, ok := c.Message().(*messages.Fetch)
	if !ok {
		return
	}
	defer m.Done()
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.From != r.next {
		r.wrong = append(r.wrong, fmt.Sprintf("a Fetch from %d where the reader continues at %d", m.From, r.next))
		return
	}
	for _, rec := range m.Records {
		r.got = append(r.got, rec.Offset)
	}
	if len(m.Records) > 0 {
		r.next = m.Records[len(m.Records)-1].Offset + 1
		r.budget.Add(0, int64(len(m.Records))*recordCost)
	}
}

func (r *fillingReader) offsets() ([]int64, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got), slices.Clone(r.wrong)
}

// A table whose budget fills (its epochs sealed by memory_budget, as each
// of several tables' share does) is detached and its partition paused
// once an epoch; it resumes when the epoch's commit frees the budget.
// franz-go drops what it had fetched of a paused partition, and fetches
// and decompresses it again on resume: with three tables that was a third
// more decompression than one table's (docs/performance.md, "Several
// tables"). The loop now keeps those records and hands them out first on
// resume: they are not fetched again, and the table reads every record
// once, in order.
func TestFetcherKeepsAPausedTablesRecords(t *testing.T) {
	const topicName, records = "parked", 3000
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topicName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	// The offsets each fetch asks for (the consumer's one partition).
	var fetchMu sync.Mutex
	var asked []int64
	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		for _, rt := range req.(*kmsg.FetchRequest).Topics {
			for _, rp := range rt.Partitions {
				fetchMu.Lock()
				asked = append(asked, rp.FetchOffset)
				fetchMu.Unlock()
			}
		}
		return nil, nil, false
	})
	produceSmall(t, cluster.ListenAddrs(), topicName, records)

	cfg := kafka.DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Group = cluster.ListenAddrs(), topicName, "g-"+t.Name()
	cfg.Mode, cfg.Partitions = kafka.ModePartitions, []int32{0}
	// Small polls and fetches of ~140 records: franz-go holds a fetch's
	// rest while the loop hands out the first records of it.
	cfg.MaxPollRecords, cfg.FetchMaxBytes, cfg.FetchMaxPartitionBytes = 20, 64<<10, 64<<10
	cons, err := kafka.NewConsumer(cfg, startsAtZero{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Close)

	system := actor.NewActorSystem()
	p := tp{Topic: topicName, Partition: 0}
	s := &sink{name: "parked", reg: newRegistry(), budget: NewBudget(100*recordCost, 4), gen: 1,
		committer: system.NewLocalPID("committer-parked")}
	s.reg.reset(1)
	reader := &fillingReader{budget: s.budget}
	s.reg.setReader(1, p, system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return reader })))
	f := newFetcher(fetcherDeps{cons: cons, sinks: []*sink{s}, system: system, metrics: NewMetrics(nil), logger: testLogger(t)})
	f.assigned([]tp{p}, []tableStarts{{sink: 0, gen: 1, offsets: map[tp]int64{p: 0}}})

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	loop := make(chan error, 1)
	go func() { loop <- f.run(ctx) }()
	// The committer: each time the budget is full, the epoch commits a
	// moment later (franz-go has fetched ahead meanwhile) and frees it.
	pauses := 0
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, wrong := reader.offsets()
		if len(wrong) > 0 {
			t.Fatalf("the reader was handed %v", wrong)
		}
		if len(got) == records {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reader got %d of %d records in 30s", len(got), records)
		}
		if s.budget.Exhausted() {
			pauses++
			time.Sleep(50 * time.Millisecond)
			s.budget.Release(0, s.budget.Bytes())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-loop
	if got, _ := reader.offsets(); !slices.Equal(got, seqOffsets(0, records)) {
		t.Fatalf("the reader got %v; want 0 to %d once each, in order", got, records-1)
	}
	if pauses < 5 {
		t.Fatalf("the table's budget filled %d times; want several pauses to test", pauses)
	}
	// Each fetch brings perFetch records (or the rest): a fetch that
	// starts within what the one before brought fetches again records the
	// client had fetched and the loop let go. One at the same offset
	// fetches again a fetch dropped whole: in flight as the partition
	// paused, or sent in the moment between Pause taking what the client
	// holds and pausing; that is not what this test is about.
	fetchMu.Lock()
	loopAsked := slices.Clone(asked)
	fetchMu.Unlock()
	perFetch := recordsPerFetch(t, cfg)
	dropped := 0
	for i := 1; i < len(loopAsked); i++ {
		prev, off := loopAsked[i-1], loopAsked[i]
		switch {
		case off == prev && off < records:
			dropped++
		case off < prev+perFetch && off < records:
			t.Fatalf("a fetch at %d after one at %d (%d records a fetch): records fetched before were fetched again "+
				"(%d pauses); fetch offsets %v", off, prev, perFetch, pauses, loopAsked)
		}
	}
	t.Logf("%d fetches of %d records, %d pauses, %d fetches dropped whole", len(loopAsked), perFetch, pauses, dropped)
}

// recordsPerFetch is how many records one fetch of cfg's sizes brings
// from the start of its partition.
func recordsPerFetch(t *testing.T, cfg kafka.Config) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		cfg.Topic: {0: kgo.NewOffset().AtStart()}}), kgo.FetchMaxBytes(cfg.FetchMaxBytes), kgo.FetchMaxPartitionBytes(cfg.FetchMaxPartitionBytes))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fs := cl.PollFetches(t.Context())
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	return int64(fs.NumRecords())
}

// produceSmall writes n 400-byte records to partition 0 of topic, one a
// batch: a fetch of a given size brings as many records from any offset.
func produceSmall(t *testing.T, brokers []string, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(512))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	batch := make([]*kgo.Record, n)
	for i := range batch {
		value := make([]byte, 400) // random: compressed, as large
		for j := range value {
			value[j] = byte(rng.Uint32())
		}
		batch[i] = &kgo.Record{Topic: topic, Partition: 0, Value: value}
	}
	if err := cl.ProduceSync(t.Context(), batch...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func seqOffsets(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// readTen is a fetch rig whose one table has read offsets 0 to 9.
func readTen(t *testing.T) *fetchRig {
	t.Helper()
	g := newFetchRig(t, "plugs")
	g.assign()
	g.spawn(0)
	g.f.between()
	g.poll(t, 0, 10)
	return g
}

// parkedRig is a fetch rig whose one table read offsets 0 to 9 and then
// ran out of room, while the client held 10 to 19 fetched: the loop paused
// the partition and parked those.
func parkedRig(t *testing.T) *fetchRig {
	t.Helper()
	g := readTen(t)
	g.fullWithFetched(10, 20, nil)
	g.f.between()
	if pk := g.f.parked[g.p]; pk == nil || pk.from != 10 || len(pk.batch.Records) != 10 {
		t.Fatalf("parked %+v; want offsets 10 to 19, from 10", pk)
	}
	if g.f.active[g.p] {
		t.Fatal("the partition is still fetched with its table out of room")
	}
	return g
}

// fullWithFetched fills table 0's budget while the client holds the
// records at offsets [from, to) fetched, and err: Pause hands them over.
func (g *fetchRig) fullWithFetched(from, to int64, err error) {
	g.fill(0)
	g.cons.mu.Lock()
	defer g.cons.mu.Unlock()
	g.cons.fetched, g.cons.fetchedErr = []kafka.Batch{g.batch(from, to)}, err
}

// fill exhausts table i's budget; free empties it.
func (g *fetchRig) fill(i int) { g.sinks[i].budget.Add(0, 1<<40) }
func (g *fetchRig) free(i int) { g.sinks[i].budget.Release(0, g.sinks[i].budget.Bytes()) }

// dispatchParked is the loop's turn after between: the parked records of
// the partitions fetched again go out, instead of a poll.
func (g *fetchRig) dispatchParked(t *testing.T) {
	g.f.wait(t.Context(), g.f.dispatch(g.f.unparked()))
}

// handed lists reader r's Fetches as "gen/from:first-last".
func handed(r *recordingReader) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, f := range r.fetches {
		s := fmt.Sprintf("%d/%d:", f.Gen, f.From)
		if n := len(f.Records); n > 0 {
			s += fmt.Sprintf("%d-%d", f.Records[0].Offset, f.Records[n-1].Offset)
		}
		out = append(out, s)
	}
	return out
}

// The table has room again: its parked records go out first, without a
// seek (Kafka is past them), then what Kafka fetches after them.
func TestFetcherHandsOutParkedRecordsFirst(t *testing.T) {
	g := parkedRig(t)
	seeks := len(g.sought(0))
	g.free(0)
	g.f.between()
	if !g.f.active[g.p] {
		t.Fatal("the partition is not fetched again once its table has room")
	}
	g.dispatchParked(t)
	g.poll(t, 20, 30)
	if got, want := handed(g.readers[0]), []string{"1/0:0-9", "1/10:10-19", "1/20:20-29"}; !slices.Equal(got, want) {
		t.Fatalf("the reader was handed %v; want %v", got, want)
	}
	if s := g.sought(seeks); len(s) != 0 {
		t.Fatalf("seeks %v; want none: Kafka continues after the parked records", s)
	}
	if g.f.parkedBytes != 0 || len(g.f.parked) != 0 {
		t.Fatalf("%d bytes still parked: %v", g.f.parkedBytes, g.f.parked)
	}
}

// Kafka takes the partition away while records of it are parked, and
// gives it back: they are dropped, and Kafka sought to where the table
// continues.
func TestFetcherDropsParkedRecordsOnRevoke(t *testing.T) {
	g := parkedRig(t)
	seeks := len(g.sought(0))
	g.f.revoked([]tp{g.p})
	g.f.assigned([]tp{g.p}, []tableStarts{{sink: 0, gen: 1, offsets: map[tp]int64{g.p: 10}}})
	g.droppedThenRead(t, seeks, 10, "1/0:0-9", "1/10:10-19")
}

// droppedThenRead checks, once the table has room, that nothing is parked
// any more and that Kafka was sought once since the seeks-th seek, to from;
// then Kafka's records from there to 19 go out, and the reader must have
// been handed want in all.
func (g *fetchRig) droppedThenRead(t *testing.T, seeks int, from int64, want ...string) {
	t.Helper()
	g.free(0)
	g.f.between()
	if len(g.f.parked) != 0 || g.f.parkedBytes != 0 {
		t.Fatalf("still parked: %v (%d bytes)", g.f.parked, g.f.parkedBytes)
	}
	if s := g.sought(seeks); len(s) != 1 || s[0][g.p] != from {
		t.Fatalf("seeks %v; want the partition sought to %d", s, from)
	}
	g.dispatchParked(t)
	g.poll(t, from, 20)
	if got := handed(g.readers[0]); !slices.Equal(got, want) {
		t.Fatalf("the reader was handed %v; want %v", got, want)
	}
}

// The table's reader stopped at 7 for room (the loop handed it 0 to 9, it
// took 0 to 6): the parked records do not follow where it continues, so
// they are dropped and Kafka is sought back to 7.
func TestFetcherDropsParkedRecordsBehindTheTable(t *testing.T) {
	g := parkedRig(t)
	seeks := len(g.sought(0))
	g.f.behind(0, 1, g.p, 7, 100, 0)
	g.droppedThenRead(t, seeks, 7, "1/0:0-9", "1/7:7-19")
}

// The table's pipeline is rebuilt (an aborted epoch) while records are
// parked: the new generation continues from its committed offset. Behind
// the parked records, Kafka is sought back and they are dropped; within
// them, they go to the new readers from that offset on.
func TestFetcherParkedRecordsAndANewGeneration(t *testing.T) {
	for _, tc := range []struct {
		committed int64
		handed    []string
		seeks     int
	}{
		{committed: 4, handed: []string{"2/4:4-19"}, seeks: 1},
		{committed: 10, handed: []string{"2/10:10-19"}},
		{committed: 15, handed: []string{"2/15:15-19"}},
	} {
		t.Run(fmt.Sprint(tc.committed), func(t *testing.T) {
			g := parkedRig(t)
			seeks := len(g.sought(0))
			next := &recordingReader{}
			g.sinks[0].reg.reset(2)
			g.sinks[0].reg.setReader(2, g.p, g.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return next })))
			g.f.reset(0, 2, map[tp]int64{g.p: tc.committed})
			g.free(0)
			g.f.between()
			<-g.f.rebuilt // as the loop, which waits for no reader of before
			if s := g.sought(seeks); len(s) != tc.seeks || tc.seeks > 0 && s[0][g.p] != tc.committed {
				t.Fatalf("seeks %v; want %d to %d", s, tc.seeks, tc.committed)
			}
			g.dispatchParked(t)
			if tc.seeks > 0 {
				g.poll(t, tc.committed, 20)
			}
			if got := handed(next); !slices.Equal(got, tc.handed) {
				t.Fatalf("the new generation's reader was handed %v; want %v", got, tc.handed)
			}
		})
	}
}

// Kafka reports the partition's offset out of the log (records deleted)
// while records of it are parked: the partition is held, the records
// dropped, and the table's recheck says where it continues.
func TestFetcherDropsParkedRecordsOnDataLoss(t *testing.T) {
	g := parkedRig(t)
	g.f.holdLost(&kafka.PartitionError{Topic: g.p.Topic, Partition: g.p.Partition, Err: kerr.OffsetOutOfRange})
	if len(g.f.parked) != 0 {
		t.Fatalf("parked %v after the partition was held", g.f.parked)
	}
	seeks := len(g.sought(0))
	g.f.reset(0, 1, map[tp]int64{g.p: 12}) // the recheck: continue at the log start
	g.free(0)
	g.f.between()
	if s := g.sought(seeks); len(s) != 1 || s[0][g.p] != 12 {
		t.Fatalf("seeks %v; want the partition sought to 12", s)
	}
	g.dispatchParked(t)
	if got, want := handed(g.readers[0]), []string{"1/0:0-9"}; !slices.Equal(got, want) {
		t.Fatalf("the reader was handed %v; want %v", got, want)
	}
}

// A batch too large to decompress follows the parked records (Pause
// reported it): Kafka is sought past it, which drops the parked records,
// and the table rewinds to them once it has room, to read both again.
func TestFetcherParkedRecordsAndABatchTooLarge(t *testing.T) {
	g := parkedRig(t)
	tooLarge := &kafka.BatchTooLargeError{Topic: g.p.Topic, Partition: g.p.Partition, Offset: 20, Next: 25}
	g.f.wait(t.Context(), g.f.dispatch(nil, map[tp]*kafka.BatchTooLargeError{g.p: tooLarge}))
	if len(g.f.parked) != 0 {
		t.Fatalf("parked %v after Kafka was sought past the batch", g.f.parked)
	}
	seeks := len(g.sought(0))
	g.free(0)
	g.f.between()
	if s := g.sought(seeks); len(s) != 1 || s[0][g.p] != 10 {
		t.Fatalf("seeks %v; want the partition sought back to 10", s)
	}
}

// Past parkLimit a paused partition's records are not kept: Kafka is
// sought back to them, to fetch them again once the table has room.
func TestFetcherParksWithinItsLimit(t *testing.T) {
	defer func(l int64) { parkLimit = l }(parkLimit)
	parkLimit = 5 * recordOverhead
	g := readTen(t)
	g.fullWithFetched(10, 20, nil)
	seeks := len(g.sought(0))
	g.f.between()
	if len(g.f.parked) != 0 {
		t.Fatalf("parked %v past the limit", g.f.parked)
	}
	if s := g.sought(seeks); len(s) != 1 || s[0][g.p] != 10 {
		t.Fatalf("seeks %v; want the partition sought back to 10", s)
	}
	g.free(0)
	g.f.between()
	g.dispatchParked(t)
	g.poll(t, 10, 20)
	if got, want := handed(g.readers[0]), []string{"1/0:0-9", "1/10:10-19"}; !slices.Equal(got, want) {
		t.Fatalf("the reader was handed %v; want %v", got, want)
	}
}

// Parked records go out at most max_poll_records at a time, as polls do
// (Backpressure counts two polls in flight), and without a seek between;
// the table running out of room again meanwhile parks what the client
// fetched after them behind them.
func TestFetcherHandsOutParkedRecordsAPollAtATime(t *testing.T) {
	g := parkedRig(t)
	g.cons.maxPoll = 4
	seeks := len(g.sought(0))
	g.free(0)
	g.f.between()
	g.dispatchParked(t) // 10-13
	g.f.between()
	g.dispatchParked(t) // 14-17
	g.fullWithFetched(20, 23, nil)
	g.f.between()
	if pk := g.f.parked[g.p]; pk == nil || pk.from != 18 || len(pk.batch.Records) != 5 {
		t.Fatalf("parked %+v; want 18 to 22", pk)
	}
	g.free(0)
	for range 3 {
		g.f.between()
		g.dispatchParked(t)
	}
	want := []string{"1/0:0-9", "1/10:10-13", "1/14:14-17", "1/18:18-21", "1/22:22-22"}
	if got := handed(g.readers[0]); !slices.Equal(got, want) {
		t.Fatalf("the reader was handed %v; want %v", got, want)
	}
	if s := g.sought(seeks); len(s) != 0 {
		t.Fatalf("seeks %v; want none", s)
	}
	if len(g.f.parked) != 0 || g.f.parkedBytes != 0 {
		t.Fatalf("still parked: %v, %d bytes", g.f.parked, g.f.parkedBytes)
	}
}

// Kafka refused to decompress the batch after the records it had fetched
// (Pause reports it with them): it goes out after the last of them, which
// go out a poll at a time, never with the first (the readers would move
// past the rest), and Kafka is sought past it.
func TestFetcherParkedRecordsThenABatchTooLarge(t *testing.T) {
	g := readTen(t)
	g.cons.maxPoll = 4
	g.fullWithFetched(10, 16, &kafka.BatchTooLargeError{Topic: g.p.Topic, Partition: g.p.Partition, Offset: 16, Next: 20})
	g.f.between()
	seeks := len(g.sought(0))
	g.free(0)
	for range 2 {
		g.f.between()
		batches, skips := g.f.unparked()
		tooLarge, err := g.f.tooLarge(g.f.parkedErr)
		if err != nil || tooLarge != nil {
			t.Fatalf("the next dispatch has the errors %v %v; want the batch too large with the parked records", tooLarge, err)
		}
		g.f.wait(t.Context(), g.f.dispatch(batches, skips))
	}
	var got []string
	g.readers[0].mu.Lock()
	for _, f := range g.readers[0].fetches[1:] {
		s := fmt.Sprintf("%d-%d", f.Records[0].Offset, f.Records[len(f.Records)-1].Offset)
		if f.Skip != nil {
			s += fmt.Sprintf(" skip %d-%d", f.Skip.Offset, f.Skip.LastOffset)
		}
		got = append(got, s)
	}
	g.readers[0].mu.Unlock()
	if want := []string{"10-13", "14-15 skip 16-19"}; !slices.Equal(got, want) {
		t.Fatalf("the reader was handed %v; want %v", got, want)
	}
	if s := g.sought(seeks); len(s) != 1 || s[0][g.p] != 20 {
		t.Fatalf("seeks %v; want Kafka sought past the batch, to 20", s)
	}
}

// Parked records handed out a poll at a time leave the partition where
// Kafka is, after all of them: a pause past parkLimit meanwhile seeks Kafka
// back to where the parked records end. (It went back to where the records
// handed out ended, and Kafka fetched again records still parked: the
// client returned them once more, parked behind themselves, and a CI run
// found an event twice in its table.)
func TestFetcherPositionStaysAfterParkedRecords(t *testing.T) {
	defer func(l int64) { parkLimit = l }(parkLimit)
	g := parkedRig(t)
	g.cons.maxPoll = 4
	g.free(0)
	g.f.between()
	g.dispatchParked(t)         // 10-13; 14-19 stay parked
	parkLimit = g.f.parkedBytes // no room for more
	g.fullWithFetched(20, 23, nil)
	seeks := len(g.sought(0))
	g.f.between()
	if s := g.sought(seeks); len(s) != 1 || s[0][g.p] != 20 {
		t.Fatalf("seeks %v; want Kafka sought back to 20, after the parked records", s)
	}
	g.free(0)
	for range 2 {
		g.f.between()
		g.dispatchParked(t)
	}
	g.poll(t, 20, 23)
	want := []string{"1/0:0-9", "1/10:10-13", "1/14:14-17", "1/18:18-19", "1/20:20-22"}
	if got := handed(g.readers[0]); !slices.Equal(got, want) {
		t.Fatalf("the reader was handed %v; want %v", got, want)
	}
}

// A paused partition's lag counts its parked records: Kafka's starts
// after them, and they are read by no table yet.
func TestFetcherLagCountsParkedRecords(t *testing.T) {
	g := parkedRig(t) // 10-19 parked, Kafka at 20
	g.cons.mu.Lock()
	g.cons.lag = map[tp]int64{g.p: 5} // the brokers hold up to offset 24
	g.cons.mu.Unlock()
	lag, err := g.f.lagNow(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	gauge := testutil.ToFloat64(g.f.metrics.Lag.WithLabelValues(g.p.Topic, partitionLabel(g.p.Partition)))
	if lag[g.p] != 15 || gauge != 15 {
		t.Fatalf("lag %d, gauge %v; want 15: the 10 parked records and Kafka's 5", lag[g.p], gauge)
	}
}

// Records the client returns again, before where Kafka continues, are not
// parked behind the ones parked already: a parked batch stays in order
// (out of order, a Fetch held offsets twice, and the binary search that
// finds where a table continues could skip records).
func TestFetcherParksRecordsInOrder(t *testing.T) {
	g := parkedRig(t) // 10-19 parked, Kafka at 20
	g.f.park([]kafka.Batch{g.batch(15, 25)}, nil)
	pk := g.f.parked[g.p]
	var got, want []int64
	for i, r := range pk.batch.Records {
		got, want = append(got, r.Offset), append(want, int64(10+i))
	}
	if len(got) != 15 || !slices.Equal(got, want) {
		t.Fatalf("parked %v; want 10 to 24 once each, in order", got)
	}
	if g.f.pos[g.p] != 25 {
		t.Fatalf("position %d; want 25", g.f.pos[g.p])
	}
}
