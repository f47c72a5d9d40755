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

// fetchMem is the memory the rows of one Fetch live in: the arena holding
// their strings, the values of every row in one slab, and the row headers
// of every route in another. Pooled, and released when every buffer has
// written its rows, so mapping a poll allocates nothing in steady state and
// rows reach the buffers without being copied.
type fetchMem struct {
	arena  mapping.Arena
	values []parquet.Value
	rows   []parquet.Row
	route  []int32 // route index of each mapped row, in record order
	refs   atomic.Int32
	done   func() // the Fetch's Done
}

var fetchMems = sync.Pool{New: func() any { return new(fetchMem) }}

// release is called once by each buffer a Fetch's rows went to.
func (f *fetchMem) release() {
	if f.refs.Add(-1) == 0 {
		f.free()
	}
}

func (f *fetchMem) free() {
	done := f.done
	f.arena.Reset()
	f.done = nil
	fetchMems.Put(f)
	done()
}

// route is where a reader sends the rows of one partition value, and what
// the Fetch being mapped has for it.
type route struct {
	key   string
	pid   *actor.PID
	idx   int32 // index in reader.touched while the current Fetch has rows for it
	rows  int   // rows of the current Fetch
	bytes int64 // their size, for the budget
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
	touched    []*route // routes of the current Fetch, by route.idx
	batches    [][]parquet.Row
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

// handleFetch maps a poll's records into one slab of values and sends each
// route its rows as one RowBatch. The fetch loop hears Done once every
// buffer has written them (or at once when there are none), which bounds
// the rows in flight to what the loop has dispatched.
func (r *reader) handleFetch(c actor.Context, m *messages.Fetch) {
	if m.Gen != r.gen {
		m.Done()
		return // fetched before the pipeline was rebuilt: re-read after the seek
	}
	mem := fetchMems.Get().(*fetchMem)
	mem.done = m.Done
	ncols := len(r.cfg.buffer.dataSchema.Fields)
	if need := len(m.Records) * ncols; cap(mem.values) < need {
		mem.values = make([]parquet.Value, need)
	}
	mem.route = mem.route[:0]
	r.row.Arena = &mem.arena
	r.mapper.StartBatch()
	used := 0 // values of mapped rows
	data := 0
	for _, kr := range m.Records {
		r.lastOffset = kr.Offset
		if kr.Attrs.IsControl() {
			continue // a transaction marker: consumed (the offset moves past it), never a row
		}
		data++
		r.rec = mapping.Record{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset,
			Timestamp: kr.Timestamp, Key: kr.Key, Value: kr.Value}
		r.records++
		// Map writes the row's values straight into the slab.
		r.row.Values = mem.values[used : used+ncols : used+ncols]
		if err := r.mapper.Map(&r.rec, &r.row); err != nil {
			r.dead = append(r.dead, messages.DeadLetter{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset,
				Key: bytes.Clone(kr.Key), Value: bytes.Clone(kr.Value), Timestamp: kr.Timestamp.UnixMilli(), Reason: err.Error()})
			continue
		}
		used += ncols
		rt := r.routes[string(r.row.Key)]
		if rt == nil {
			rt = r.newRoute(c)
		}
		if rt.rows == 0 {
			rt.idx = int32(len(r.touched))
			r.touched = append(r.touched, rt)
		}
		rt.rows++
		rt.bytes += int64(r.row.Size)
		mem.route = append(mem.route, rt.idx)
	}
	r.row.Arena, r.row.Values = nil, nil
	if m.Skip != nil {
		r.skipBatch(m.Skip)
	}
	r.cfg.metrics.Records.WithLabelValues(partitionLabel(r.partition)).Add(float64(data))
	if len(r.touched) == 0 {
		mem.free()
		return
	}
	// Lay each route's rows out contiguously in one slab of row headers
	// (a counting sort by route), so the batches cost no allocation.
	n := len(mem.route)
	if cap(mem.rows) < n {
		mem.rows = make([]parquet.Row, n)
	}
	rows := mem.rows[:n]
	batches := r.batches[:0]
	at := 0
	for _, rt := range r.touched {
		batches = append(batches, rows[at:at:at+rt.rows])
		at += rt.rows
	}
	for i, ri := range mem.route {
		batches[ri] = append(batches[ri], mem.values[i*ncols:(i+1)*ncols:(i+1)*ncols])
	}
	mem.refs.Store(int32(len(r.touched)))
	for i, rt := range r.touched {
		// Counted before the buffer writes the rows (and so before the
		// fetch loop hears Done): the loop sees this poll's budget before
		// it polls again.
		r.cfg.buffer.budget.Add(r.gen, rt.bytes)
		c.Send(rt.pid, &messages.RowBatch{Gen: r.gen, Epoch: r.epoch, Rows: batches[i], Bytes: rt.bytes, Release: mem.release})
		rt.rows, rt.bytes = 0, 0
	}
	r.touched = r.touched[:0]
	clear(batches)
	r.batches = batches
}

// skipBatch dead-letters a record batch Kafka would not decompress, naming
// its offsets, and counts them consumed: the epoch's txn moves past the
// batch with the letter, so a restart neither reads it again nor loses it.
func (r *reader) skipBatch(s *messages.SkippedBatch) {
	r.dead = append(r.dead, messages.DeadLetter{Topic: r.cfg.topic, Partition: r.partition, Offset: s.Offset,
		LastOffset: s.LastOffset, Reason: s.Reason})
	r.lastOffset = s.LastOffset
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
		return // not part of that epoch (spawned after it started)
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
