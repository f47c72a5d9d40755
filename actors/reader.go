package actors

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/actors/mapping"
	"github.com/deltaflow/deltaflow/messages"
)

// arenas recycles the memory that mapped rows' strings live in: one arena
// per Fetch, released when every buffer has written its rows.
var arenas = sync.Pool{New: func() any { return new(mapping.Arena) }}

// route is where a reader sends the rows of one partition value, and the
// batch it is filling for the current Fetch.
type route struct {
	key    string
	pid    *actor.PID
	rows   []parquet.Row
	values []parquet.Value
	bytes  int64
}

// reader maps the records of one Kafka partition to rows and routes them to
// buffers, tagged with the current epoch.
type reader struct {
	cfg       *pipelineConfig
	gen       uint64
	partition int32
	epoch     uint64
	pipeline  *actor.PID
	mapper    *mapping.Mapper

	lastOffset int64 // last offset consumed in this epoch, -1 if none
	records    int64
	dead       []messages.DeadLetter
	routes     map[string]*route
	touched    []*route
	row        mapping.Row
	rec        mapping.Record
}

func newReader(cfg *pipelineConfig, gen uint64, partition int32, epoch uint64, pipeline *actor.PID) actor.Producer {
	return func() actor.Actor {
		return &reader{cfg: cfg, gen: gen, partition: partition, epoch: epoch, pipeline: pipeline,
			mapper: cfg.mapper.Clone(), lastOffset: -1, routes: map[string]*route{}}
	}
}

func (r *reader) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.Fetch:
		r.handleFetch(c, m)
	case *messages.Seal:
		r.handleSeal(c, m)
	}
}

func (r *reader) handleFetch(c actor.Context, m *messages.Fetch) {
	defer m.Done()
	if m.Gen != r.gen {
		return // fetched before the pipeline was rebuilt: re-read after the seek
	}
	arena := arenas.Get().(*mapping.Arena)
	r.row.Arena = arena
	ncols := len(r.cfg.buffer.dataSchema.Fields)
	for _, kr := range m.Records {
		r.rec = mapping.Record{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset,
			Timestamp: kr.Timestamp, Key: kr.Key, Value: kr.Value}
		r.lastOffset = kr.Offset
		r.records++
		if err := r.mapper.Map(&r.rec, &r.row); err != nil {
			r.dead = append(r.dead, messages.DeadLetter{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset,
				Key: bytes.Clone(kr.Key), Value: bytes.Clone(kr.Value), Timestamp: kr.Timestamp.UnixMilli(), Reason: err.Error()})
			continue
		}
		rt := r.routes[string(r.row.Key)]
		if rt == nil {
			rt = r.newRoute(c)
		}
		if len(rt.rows) == 0 {
			// A poll's rows spread over several routes: start small and
			// let append grow the slab rather than reserve a whole poll
			// for every route.
			rt.values = make([]parquet.Value, 0, min(len(m.Records), 256)*ncols)
			r.touched = append(r.touched, rt)
		}
		start := len(rt.values)
		rt.values = append(rt.values, r.row.Values...)
		rt.rows = append(rt.rows, rt.values[start:len(rt.values):len(rt.values)])
		rt.bytes += int64(r.row.Size)
	}
	r.cfg.metrics.Records.WithLabelValues(partitionLabel(r.partition)).Add(float64(len(m.Records)))
	if len(r.touched) == 0 {
		arena.Reset()
		arenas.Put(arena)
		return
	}
	refs := int32(len(r.touched))
	release := func() {
		if atomic.AddInt32(&refs, -1) == 0 {
			arena.Reset()
			arenas.Put(arena)
		}
	}
	for _, rt := range r.touched {
		// Counted before the fetch loop hears Done, so it sees the budget
		// this poll used before it polls again.
		r.cfg.buffer.budget.Add(r.gen, rt.bytes)
		c.Send(rt.pid, &messages.RowBatch{Gen: r.gen, Epoch: r.epoch, Rows: rt.rows, Bytes: rt.bytes, Release: release})
		rt.rows, rt.values, rt.bytes = nil, nil, 0
	}
	r.touched = r.touched[:0]
	r.row.Arena = nil
}

// newRoute asks the pipeline for the buffer of the current row's partition.
func (r *reader) newRoute(c actor.Context) *route {
	key := string(r.row.Key)
	// Short: the pipeline answers at once unless it is being stopped, and a
	// reader stuck here would hold up its generation's shutdown.
	res, err := c.RequestFuture(r.pipeline, &getBuffer{key: key, values: r.mapper.PartitionMap(&r.row)}, 5*time.Second).Result()
	pid, _ := res.(*actor.PID)
	if err != nil || pid == nil {
		panic(fmt.Errorf("reader %d: no buffer for %s (pipeline stopping): %v", r.partition, key, err))
	}
	rt := &route{key: key, pid: pid}
	r.routes[key] = rt
	return rt
}

func (r *reader) handleSeal(c actor.Context, m *messages.Seal) {
	if m.Gen != r.gen || m.Epoch != r.epoch {
		return // not part of that round (spawned after it started)
	}
	for _, k := range m.Retire {
		delete(r.routes, k)
	}
	r.cfg.logger.Debug("sealed", "partition", r.partition, "epoch", m.Epoch, "last", r.lastOffset, "records", r.records)
	c.Send(r.cfg.committer, &messages.Sealed{Gen: r.gen, Epoch: m.Epoch, Topic: r.cfg.topic, Partition: r.partition,
		LastOffset: r.lastOffset, Records: r.records, DeadLetters: r.dead})
	r.cfg.metrics.DeadLetters.Add(float64(len(r.dead)))
	r.epoch, r.lastOffset, r.records, r.dead = m.Epoch+1, -1, 0, nil
}
