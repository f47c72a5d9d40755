package actors

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/internal/sim"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/messages"
)

// inbox is an actor that keeps what it gets; a RowBatch is released, as a
// buffer does once it wrote the rows.
type inbox struct {
	mu  sync.Mutex
	got []any
}

func (b *inbox) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
		return
	case *messages.RowBatch:
		m.Release()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, c.Message())
}

// count returns how many messages of type T it got.
func count[T any](b *inbox) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, m := range b.got {
		if _, ok := m.(T); ok {
			n++
		}
	}
	return n
}

// A reader meets partition values it has no buffer for while the pipeline
// has not answered yet (busy spawning): it goes on mapping the next
// Fetches instead of waiting inside Receive (it waited for the pipeline,
// up to 5 s, then failed its generation), sends their rows through the
// pipeline, and holds its Seal until the pipeline has named every buffer
// it sent rows to, so the epoch's rows are in their buffers before the
// committer flushes them. Once named, a buffer gets its rows from the
// reader itself.
func TestReaderNeverWaitsForTheBuffers(t *testing.T) {
	r := newReaderRig(t)
	r.fetch(0, 10)
	r.fetch(10, 20)
	r.within("both Fetches' rows handed to the pipeline", func() bool { return count[*routeRows](r.pipeline) >= 4 })
	r.system.Root.Send(r.reader, &messages.Seal{Gen: 1, Epoch: 0})
	time.Sleep(100 * time.Millisecond)
	if n := count[*messages.Sealed](r.committer); n != 0 {
		t.Fatal("the reader sealed the epoch before the pipeline named the buffers of its rows")
	}
	// The pipeline answers: the rows are in the buffer, then the Seal.
	asks := r.answer()
	sealed := r.sealed()
	if sealed.LastOffset != 19 || sealed.Records != 20 {
		t.Fatalf("sealed %+v; want offsets up to 19, 20 records", sealed)
	}
	// Named, the buffers get the next rows from the reader.
	before := count[*routeRows](r.pipeline)
	r.fetch(20, 30)
	r.within("the next rows in the buffer", func() bool { return count[*messages.RowBatch](r.buffer) > asks })
	if n := count[*routeRows](r.pipeline); n != before {
		t.Errorf("%d more rows went through the pipeline after it named their buffers", n-before)
	}
}

// A Fetch that holds records the reader has read already (the fetch loop
// once handed parked records out of order: a CI run found an event twice
// in its table) maps only those after them: exactly once is the reader's
// to keep.
func TestReaderSkipsRecordsReadAlready(t *testing.T) {
	r := newReaderRig(t)
	r.fetch(0, 10)
	recs := slices.Concat(r.records(5, 10), r.records(10, 15))
	r.system.Root.Send(r.reader, &messages.Fetch{Gen: 1, Topic: r.tp.Topic, Partition: r.tp.Partition, From: 10, Records: recs, Done: func() {}})
	r.within("the Fetches' rows handed to the pipeline", func() bool { return count[*routeRows](r.pipeline) >= 2 })
	r.system.Root.Send(r.reader, &messages.Seal{Gen: 1, Epoch: 0})
	if sealed := r.sealed(); sealed.LastOffset != 14 || sealed.Records != 15 {
		t.Fatalf("sealed %+v; want offsets up to 14, 15 records", sealed)
	}
}

// readerRig is one reader of partition plugs/0 from offset 0, generation
// 1, with inboxes for its pipeline, committer and buffers, fed records of
// the simulator.
type readerRig struct {
	t                           *testing.T
	system                      *actor.ActorSystem
	pipeline, committer, buffer *inbox
	bufferPID, reader           *actor.PID
	tp                          tp
	sim                         *sim.Sim
	answered                    int // the pipeline's messages answer has gone through
}

func newReaderRig(t *testing.T) *readerRig {
	system := actor.NewActorSystem()
	r := &readerRig{t: t, system: system, pipeline: &inbox{}, committer: &inbox{}, buffer: &inbox{},
		tp: tp{Topic: "plugs", Partition: 0}, sim: sim.New(sim.Config{Seed: 1, Events: 30})}
	pipelinePID := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r.pipeline }))
	committerPID := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r.committer }))
	r.bufferPID = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r.buffer }))
	m, err := mapping.New(mapping.Config{Mode: mapping.Strict, Columns: coordinates}, []string{"device_type"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &pipelineConfig{tableName: "t", mapper: m, unrouted: func(string) *unrouted { return nil },
		buffer:    &bufferConfig{dataSchema: m.DataSchema(), budget: NewBudget(1<<30, 4), fileMemory: 1 << 10},
		committer: committerPID, reg: newRegistry(), metrics: NewMetrics(nil).Table("t"), logger: testLogger(t),
		behind: func(uint64, tp, int64, int64, int) {}}
	r.reader = system.Root.Spawn(actor.PropsFromProducer(newReader(cfg, 1, r.tp, 0, 0, pipelinePID, nil)))
	return r
}

// records returns the simulator's next records, at offsets from to to.
func (r *readerRig) records(from, to int64) []*kgo.Record {
	var recs []*kgo.Record
	for off := from; off < to; off++ {
		key, value, _ := r.sim.Next(nil)
		recs = append(recs, &kgo.Record{Topic: r.tp.Topic, Partition: r.tp.Partition, Offset: off, Key: key, Value: value})
	}
	return recs
}

// fetch hands the reader the records at offsets from to to.
func (r *readerRig) fetch(from, to int64) {
	r.system.Root.Send(r.reader, &messages.Fetch{Gen: 1, Topic: r.tp.Topic, Partition: r.tp.Partition, From: from,
		Records: r.records(from, to), Done: func() {}})
}

func (r *readerRig) within(what string, cond func() bool) {
	r.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			r.t.Fatalf("%s within 5s", what)
		}
	}
}

// answer plays the pipeline: every buffer asked for since the last answer
// is the rig's, and gets its rows. It returns how many it answered.
func (r *readerRig) answer() int {
	r.pipeline.mu.Lock()
	asks := append([]any(nil), r.pipeline.got[r.answered:]...)
	r.answered = len(r.pipeline.got)
	r.pipeline.mu.Unlock()
	n := 0
	for _, a := range asks {
		if rr, ok := a.(*routeRows); ok {
			r.system.Root.Send(r.bufferPID, rr.batch)
			r.system.Root.Send(r.reader, &bufferFound{key: rr.key, pid: r.bufferPID})
			n++
		}
	}
	return n
}

// sealed waits for the reader's one Sealed, answering the pipeline's asks
// as they come (the Seal waits for them), and returns it.
func (r *readerRig) sealed() *messages.Sealed {
	r.t.Helper()
	r.within("the epoch sealed", func() bool {
		r.answer()
		return count[*messages.Sealed](r.committer) == 1
	})
	r.committer.mu.Lock()
	defer r.committer.mu.Unlock()
	for _, m := range r.committer.got {
		if s, ok := m.(*messages.Sealed); ok {
			return s
		}
	}
	return nil
}
