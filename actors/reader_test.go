package actors

import (
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
	system := actor.NewActorSystem()
	pipeline, committer, buffer := &inbox{}, &inbox{}, &inbox{}
	pipelinePID := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return pipeline }))
	committerPID := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return committer }))
	bufferPID := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return buffer }))
	m, err := mapping.New(mapping.Config{Mode: mapping.Strict, Columns: coordinates}, []string{"device_type"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &pipelineConfig{tableName: "t", mapper: m, unrouted: func(string) *unrouted { return nil },
		buffer:    &bufferConfig{dataSchema: m.DataSchema(), budget: NewBudget(1<<30, 4), fileMemory: 1 << 10},
		committer: committerPID, reg: newRegistry(), metrics: NewMetrics(nil).Table("t"), logger: testLogger(t),
		behind: func(uint64, tp, int64, int64, int) {}}
	p := tp{Topic: "plugs", Partition: 0}
	reader := system.Root.Spawn(actor.PropsFromProducer(newReader(cfg, 1, p, 0, 0, pipelinePID, nil)))
	s := sim.New(sim.Config{Seed: 1, Events: 30})
	fetch := func(from, to int64) {
		var recs []*kgo.Record
		for off := from; off < to; off++ {
			key, value, _ := s.Next(nil)
			recs = append(recs, &kgo.Record{Topic: p.Topic, Partition: p.Partition, Offset: off, Key: key, Value: value})
		}
		system.Root.Send(reader, &messages.Fetch{Gen: 1, Topic: p.Topic, Partition: p.Partition, From: from, Records: recs, Done: func() {}})
	}
	within := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s within 5s", what)
			}
		}
	}

	fetch(0, 10)
	fetch(10, 20)
	within("both Fetches' rows handed to the pipeline", func() bool { return count[*routeRows](pipeline) >= 4 })
	system.Root.Send(reader, &messages.Seal{Gen: 1, Epoch: 0})
	time.Sleep(100 * time.Millisecond)
	if n := count[*messages.Sealed](committer); n != 0 {
		t.Fatal("the reader sealed the epoch before the pipeline named the buffers of its rows")
	}
	// The pipeline answers: the rows are in the buffer, then the Seal.
	pipeline.mu.Lock()
	asks := append([]any(nil), pipeline.got...)
	pipeline.mu.Unlock()
	for _, a := range asks {
		if rr, ok := a.(*routeRows); ok {
			system.Root.Send(bufferPID, rr.batch)
			system.Root.Send(reader, &bufferFound{key: rr.key, pid: bufferPID})
		}
	}
	within("the epoch sealed", func() bool { return count[*messages.Sealed](committer) == 1 })
	committer.mu.Lock()
	sealed := committer.got[0].(*messages.Sealed)
	committer.mu.Unlock()
	if sealed.LastOffset != 19 || sealed.Records != 20 {
		t.Fatalf("sealed %+v; want offsets up to 19, 20 records", sealed)
	}
	// Named, the buffers get the next rows from the reader.
	before := count[*routeRows](pipeline)
	fetch(20, 30)
	within("the next rows in the buffer", func() bool { return count[*messages.RowBatch](buffer) > len(asks) })
	if n := count[*routeRows](pipeline); n != before {
		t.Errorf("%d more rows went through the pipeline after it named their buffers", n-before)
	}
}
