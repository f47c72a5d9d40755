package actors

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/messages"
	"github.com/deltaflow/deltaflow/messages/keylog"
	"github.com/deltaflow/deltaflow/upsert"
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
	// offsets are the mapped rows' offsets, in record order, for an upsert
	// table (the order of its changes); offsetSlab is where each route's
	// are laid out.
	offsets    []int64
	offsetSlab []int64
	refs       atomic.Int32
	done       func() // the Fetch's Done, on the part that ends it
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
	if done != nil { // nil for a Fetch's parts before its last
		done()
	}
}

// route is where a reader sends the rows of one partition value, and what
// the Fetch being mapped has for it.
type route struct {
	key string
	// pid is the buffer, once the pipeline said which (bufferFound); until
	// then rows go through the pipeline with values, which the buffer is
	// made of.
	pid    *actor.PID
	values map[string]*string
	idx    int32 // index in reader.touched while the current Fetch has rows for it
	rows   int   // rows of the current Fetch
	bytes  int64 // their size, for the budget
	// reserved is the writer memory reserved for the buffer's file of
	// the epoch with these rows (RowBatch.Reserved), and opened the epoch
	// (+1) it was reserved for.
	reserved int64
	opened   uint64
}

// reader maps the records of one Kafka partition to rows of one table and
// routes them to buffers, tagged with the current epoch.
//
// What a record makes the pipeline hold until its epoch commits, beyond
// the poll's rows, must fit in the table's memory budget before the reader
// takes it: the fixed memory of a file for a partition value the epoch has
// no file for yet, and a dead letter. When it does not fit, the reader
// stops there, sends what it mapped and tells the fetch loop where it
// stopped (behind): the loop hands the table nothing until its budget has
// room (asking for an early epoch, which frees it), then hands the reader
// the records again from there. So an epoch has at most as many partition
// values as the budget holds writers: the epoch is sealed early (as
// Spark's maxConcurrentOutputFileWriters falls back) rather than the input
// refused (as Hive's max.dynamic.partitions), and a table out of room
// holds up no other table reading the same topic.
type reader struct {
	cfg      *pipelineConfig
	gen      uint64
	tp       tp
	epoch    uint64
	pipeline *actor.PID
	mapper   *mapping.Mapper

	// expect is the next offset the reader takes: a Fetch from anywhere
	// else was dispatched before the loop heard where it stopped.
	expect     int64
	lastOffset int64 // last offset consumed in this epoch, -1 if none
	records    int64
	dead       []messages.DeadLetter
	deadBy     map[string]int // the epoch's dead letters by reason class (Metrics.DeadLetters)
	// deletes are the keys the epoch's tombstones delete, for an upsert
	// table; keyBuf is where a key is encoded.
	deletes *keylog.Log
	keyBuf  []byte
	routes  map[string]*route
	touched []*route // routes of the current Fetch, by route.idx
	batches [][]parquet.Row
	// offsetBatches are an upsert table's offsets of each batch.
	offsetBatches [][]int64
	row           mapping.Row
	rec           mapping.Record

	// unsent is what the part of a Fetch being mapped will add to the
	// budget when sent.
	unsent int64
	limit  *readLimit // nil but while the committer isolates a record
	// unrouted, when this table decides which records of the topic no
	// route takes (the topic's first table, every table filtering).
	unrouted *unroutedCheck
	// awaiting counts the rows sent through the pipeline whose buffer it
	// has not named yet (bufferFound); a Seal waits in sealing until it has:
	// the epoch's rows must be in their buffers before the committer flushes
	// them, which it does once every reader has sealed.
	awaiting int
	sealing  []*messages.Seal
	// evolving is set once the reader met a record whose schema adds
	// columns: it takes nothing more (see committer.evolve).
	evolving bool
}

// readLimit bounds what a reader consumes while the committer isolates the
// record an epoch keeps failing on (see isolation): records after last wait
// for the next generation, and poison (-1: none) is dead-lettered unread.
type readLimit struct {
	last    int64
	poison  int64
	reason  string
	bare    bool // the poison's letter without key and value (they were refused too)
	reached bool // the reader asked for the epoch that commits up to last
}

func newReader(cfg *pipelineConfig, gen uint64, p tp, from int64, epoch uint64, pipeline *actor.PID, limit *readLimit) actor.Producer {
	return func() actor.Actor {
		r := &reader{cfg: cfg, gen: gen, tp: p, expect: from, epoch: epoch, pipeline: pipeline,
			mapper: cfg.mapper.Clone(), lastOffset: -1, routes: map[string]*route{}, limit: limit, deadBy: map[string]int{}}
		if u := cfg.unrouted(p.Topic); u != nil {
			r.unrouted = u.checker()
		}
		return r
	}
}

func (r *reader) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.Fetch:
		if m.Gen != r.gen || m.From != r.expect || r.evolving {
			// Fetched before the pipeline was rebuilt, or after the reader
			// stopped for room: handed again from where it continues.
			m.Done()
			return
		}
		if need, schema := r.handleFetch(c, m); need > 0 || schema > 0 {
			r.cfg.behind(r.gen, r.tp, r.expect, need, schema)
		}
	case *messages.Seal:
		if r.awaiting > 0 {
			r.sealing = append(r.sealing, m)
			return
		}
		r.handleSeal(c, m)
	case *bufferFound:
		if rt := r.routes[m.key]; rt != nil && rt.pid == nil {
			rt.pid, rt.values = m.pid, nil
		}
		if r.awaiting--; r.awaiting == 0 {
			sealing := r.sealing
			r.sealing = nil
			for _, seal := range sealing {
				r.handleSeal(c, seal)
			}
		}
	}
}

// handleFetch maps a poll's records into one slab of values and sends each
// route its rows as one RowBatch. The fetch loop hears Done once every
// buffer has written them (or at once when there are none), which bounds
// the rows in flight to what the loop has dispatched. It returns 0 once
// the Fetch is mapped whole, or else the bytes the budget must have room
// for before the record at r.expect, where it stopped; or it stopped there
// because that record's writer schema is not fetched yet (schema, its id).
func (r *reader) handleFetch(c actor.Context, m *messages.Fetch) (need int64, schema int) {
	mem := fetchMems.Get().(*fetchMem)
	ncols := len(r.cfg.buffer.dataSchema.Fields)
	if n := len(m.Records) * ncols; cap(mem.values) < n {
		mem.values = make([]parquet.Value, n)
	}
	mem.route, mem.offsets = mem.route[:0], mem.offsets[:0]
	mem.done = m.Done
	r.row.Arena = &mem.arena
	r.mapper.StartBatch()
	used := 0 // values of mapped rows
	data := 0
	var keys *upsert.Keys // an upsert table's, and its sequence column
	var sequence *upsert.Sequence
	if u := r.cfg.buffer.upsert; u != nil {
		keys, sequence = u.Keys, u.Sequence
	}
	cut := false // the rest of the Fetch is past the limit
	again := 0   // records before r.expect: read already
	for _, kr := range m.Records {
		if kr.Offset < r.expect {
			// The fetch loop hands a partition's records in order from
			// where the reader continues; one handed twice is no second
			// row (exactly once does not rest on the loop alone).
			again++
			continue
		}
		if r.limit != nil && kr.Offset > r.limit.last {
			// Records come in order: no offset up to last is left to read.
			r.lastOffset = max(r.lastOffset, r.limit.last)
			r.reachLimit(c) // the rest waits for the next generation
			cut = true
			break
		}
		if r.limit != nil && kr.Offset == r.limit.poison {
			r.deadLetterPoison(kr)
			continue
		}
		if kr.Attrs.IsControl() {
			// A transaction marker: consumed (the offset moves past it),
			// never a row.
			r.lastOffset, r.expect = kr.Offset, kr.Offset+1
			continue
		}
		r.rec = mapping.Record{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset,
			Timestamp: kr.Timestamp, Key: kr.Key, Value: kr.Value}
		// Map writes the row's values straight into the slab.
		r.row.Values = mem.values[used : used+ncols : used+ncols]
		err := r.mapper.Map(&r.rec, &r.row)
		class := reasonMapping
		if errors.Is(err, mapping.ErrSkip) { // a change event's tombstone
			r.consumed(kr.Offset)
			continue
		}
		if err == nil && r.cfg.deleteWhen != nil && !r.row.Delete && r.cfg.deleteWhen.Match(&r.row) {
			r.row.Delete = true
		}
		// A delete is by key: it passes any filter of the row's values. In
		// an upsert table, a change the filter leaves out deletes its key:
		// the key's latest state is not the table's any more.
		if err == nil && r.cfg.where != nil && !r.row.Delete && !r.cfg.where.Match(&r.row) {
			if keys != nil {
				r.row.Delete = true
				r.cfg.metrics.Filtered.Inc()
			} else {
				if err = r.leftOut(); err == nil {
					r.consumed(kr.Offset)
					continue
				}
				class = reasonUnrouted
			}
		}
		// An upsert row needs its key, and its sequence: the offset unless
		// a column orders the changes.
		seq := kr.Offset
		if err == nil && keys != nil {
			if r.keyBuf, err = keys.AppendRow(r.keyBuf[:0], r.row.Values); err == nil && sequence != nil {
				seq, err = sequence.Row(r.row.Values)
			}
			if err != nil {
				err = &mapping.MapError{Reason: err.Error()}
			}
		}
		if pending, ok := errors.AsType[*mapping.SchemaPendingError](err); ok {
			schema = pending.ID
			break
		}
		if change, ok := errors.AsType[*mapping.SchemaChangeError](err); ok {
			// The committer evolves the table and builds the next
			// generation, which maps this record; this one reads no more.
			r.evolving = true
			c.Send(r.cfg.committer, &schemaChanged{gen: r.gen, id: change.ID, add: change.Add})
			break
		}
		if err != nil {
			reason := err.Error()
			size := letterMemory(kr.Key, kr.Value, reason)
			if need = r.hold(size); need > 0 {
				break
			}
			r.cfg.buffer.budget.Add(r.gen, size) // given back when the epoch ends
			r.deadBy[class]++
			r.dead = append(r.dead, messages.DeadLetter{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset,
				Key: bytes.Clone(kr.Key), Value: bytes.Clone(kr.Value), Timestamp: kr.Timestamp.UnixMilli(), Reason: reason})
			r.consumed(kr.Offset)
			data++
			continue
		}
		if r.row.Delete {
			size := int64(len(r.keyBuf)) + deleteMemory
			if need = r.hold(size); need > 0 {
				break
			}
			r.cfg.buffer.budget.Add(r.gen, size) // given back when the epoch ends
			if r.deletes == nil {
				r.deletes = new(keylog.Log)
			}
			r.deletes.Append(r.keyBuf, seq, kr.Offset)
			r.consumed(kr.Offset)
			data++
			continue
		}
		rt := r.routes[string(r.row.Key)]
		if rt == nil || rt.opened != r.epoch+1 {
			// The epoch's first row of this partition value: its buffer
			// opens a file (and a buffer is spawned for a new value).
			open := r.cfg.buffer.fileMemory
			if rt == nil {
				open += bufferMemory(string(r.row.Key))
			}
			if need = r.hold(open); need > 0 {
				break
			}
			if rt == nil {
				rt = r.newRoute()
			}
			rt.opened, rt.reserved = r.epoch+1, r.cfg.buffer.fileMemory
			r.unsent += rt.reserved
		}
		used += ncols
		if rt.rows == 0 {
			rt.idx = int32(len(r.touched))
			r.touched = append(r.touched, rt)
		}
		rt.rows++
		rt.bytes += int64(r.row.Size)
		r.unsent += int64(r.row.Size)
		mem.route = append(mem.route, rt.idx)
		if keys != nil {
			mem.offsets = append(mem.offsets, kr.Offset)
		}
		r.consumed(kr.Offset)
		data++
	}
	r.row.Arena, r.row.Values = nil, nil
	r.rec = mapping.Record{} // its key and value hold the batch they were decompressed in
	if again > 0 {
		r.cfg.logger.Error("records handed again to their reader: skipped", "topic", r.tp.Topic, "partition", r.tp.Partition,
			"records", again, "continues at", r.expect)
	}
	if need == 0 && schema == 0 && !r.evolving {
		switch {
		case m.Skip == nil || cut:
		case r.limit == nil || m.Skip.LastOffset <= r.limit.last:
			r.skipBatch(m.Skip)
		case m.Skip.Offset > r.limit.last:
			// Past the limit, as a record would be: every offset up to
			// last is read; the batch waits for the next generation.
			r.lastOffset = max(r.lastOffset, r.limit.last)
		}
	}
	if r.limit != nil && r.lastOffset >= r.limit.last {
		r.reachLimit(c)
	}
	r.cfg.metrics.Records.WithLabelValues(r.tp.Topic, partitionLabel(r.tp.Partition)).Add(float64(data))
	r.send(c, mem)
	return need, schema
}

// leftOut handles the record just mapped that the table's filter left
// out: counted, and when no route takes it (see unrouted), counted as
// unrouted, or an error that makes it a dead letter (unrouted: dlq).
func (r *reader) leftOut() error {
	r.cfg.metrics.Filtered.Inc()
	u := r.unrouted
	if u == nil || u.takenElsewhere(&r.rec) {
		return nil
	}
	u.metric.Inc()
	if u.dlq {
		return errors.New(u.reason("table " + r.cfg.tableName + ": " + r.cfg.where.String()))
	}
	return nil
}

// consumed records a record as consumed in the epoch: a row, a dead
// letter or one the table's filter left out.
func (r *reader) consumed(offset int64) {
	r.lastOffset, r.expect = offset, offset+1
	r.records++
}

// hold returns 0 if n more bytes, besides what the part being mapped
// holds, fit in the budget (or nothing at all is held), else the bytes to
// wait for room for once that part is sent.
func (r *reader) hold(n int64) int64 {
	budget := r.cfg.buffer.budget
	if budget.Fits(r.unsent+n) || (r.unsent == 0 && budget.Bytes() <= 0) {
		return 0
	}
	return n
}

// deleteMemory is what a delete holds until its epoch commits, besides its
// key: its entry in the epoch's key log.
const deleteMemory = 32

// letterMemory is what a dead letter holds until its epoch commits.
func letterMemory(key, value []byte, reason string) int64 {
	return int64(len(key)+len(value)+len(reason)) + 128
}

// send sends each route its rows of mem, counted in the budget, and frees
// mem once every buffer has written them (at once when there are none).
func (r *reader) send(c actor.Context, mem *fetchMem) {
	r.unsent = 0
	if len(r.touched) == 0 {
		mem.free()
		return
	}
	ncols := len(r.cfg.buffer.dataSchema.Fields)
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
	offsets := r.routeOffsets(mem)
	mem.refs.Store(int32(len(r.touched)))
	for i, rt := range r.touched {
		// Counted before the buffer writes the rows (and so before the
		// fetch loop hears Done): the loop sees this poll's budget before
		// it polls again.
		r.cfg.buffer.budget.Add(r.gen, rt.bytes+rt.reserved)
		batch := &messages.RowBatch{Gen: r.gen, Epoch: r.epoch, Rows: batches[i], Bytes: rt.bytes, Reserved: rt.reserved, Release: mem.release}
		if offsets != nil {
			batch.Offsets = offsets[i]
		}
		if rt.pid != nil {
			c.Send(rt.pid, batch)
		} else {
			c.Request(r.pipeline, &routeRows{key: rt.key, values: rt.values, batch: batch})
			r.awaiting++
		}
		rt.rows, rt.bytes, rt.reserved = 0, 0, 0
	}
	r.touched = r.touched[:0]
	clear(batches)
	r.batches = batches
}

// routeOffsets lays out, for an upsert table, the offsets of each touched
// route's rows in mem as the rows are (nil for an append table).
func (r *reader) routeOffsets(mem *fetchMem) [][]int64 {
	if len(mem.offsets) == 0 {
		return nil
	}
	if cap(mem.offsetSlab) < len(mem.offsets) {
		mem.offsetSlab = make([]int64, len(mem.offsets))
	}
	out := slices.Grow(r.offsetBatches[:0], len(r.touched))[:len(r.touched)]
	r.offsetBatches = out
	at := 0
	for i, rt := range r.touched {
		out[i] = mem.offsetSlab[at : at : at+rt.rows]
		at += rt.rows
	}
	for i, ri := range mem.route {
		out[ri] = append(out[ri], mem.offsets[i])
	}
	return out
}

// skipBatch dead-letters a record batch Kafka would not decompress, naming
// its offsets, and counts them consumed: the epoch's txn moves past the
// batch with the letter, so a restart neither reads it again nor loses it.
func (r *reader) skipBatch(s *messages.SkippedBatch) {
	r.cfg.buffer.budget.Add(r.gen, letterMemory(nil, nil, s.Reason))
	r.deadBy[reasonTooLarge]++
	r.dead = append(r.dead, messages.DeadLetter{Topic: r.tp.Topic, Partition: r.tp.Partition, Offset: s.Offset,
		LastOffset: s.LastOffset, Reason: s.Reason})
	r.lastOffset, r.expect = s.LastOffset, s.LastOffset+1
}

// deadLetterPoison dead-letters, unread, the record the committer isolated
// as the one its epochs kept failing on.
func (r *reader) deadLetterPoison(kr *kgo.Record) {
	dl := messages.DeadLetter{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset, Timestamp: kr.Timestamp.UnixMilli(), Reason: r.limit.reason}
	if r.limit.bare {
		dl.Reason += fmt.Sprintf(" (its letter was refused too: sent without its %d-byte key and %d-byte value, which stay in Kafka)", len(kr.Key), len(kr.Value))
	} else {
		dl.Key, dl.Value = bytes.Clone(kr.Key), bytes.Clone(kr.Value)
	}
	r.cfg.buffer.budget.Add(r.gen, letterMemory(dl.Key, dl.Value, dl.Reason)) // given back when the epoch ends
	r.deadBy[reasonIsolated]++
	r.dead = append(r.dead, dl)
	r.consumed(kr.Offset)
}

// reachLimit asks the committer once for the epoch that commits what the
// reader read up to its limit.
func (r *reader) reachLimit(c actor.Context) {
	if !r.limit.reached {
		r.limit.reached = true
		c.Send(r.cfg.committer, &messages.CommitNow{Reason: messages.ReasonIsolate})
	}
}

// newRoute is the route of the current row's partition value, new to the
// reader: its first rows go through the pipeline, which finds or spawns
// the buffer and names it.
func (r *reader) newRoute() *route {
	key := string(r.row.Key)
	rt := &route{key: key, values: r.mapper.PartitionMap(&r.row)}
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
	r.cfg.logger.Debug("sealed", "partition", r.tp, "epoch", m.Epoch, "last", r.lastOffset, "records", r.records)
	c.Send(r.cfg.committer, &messages.Sealed{Gen: r.gen, Epoch: m.Epoch, Topic: r.tp.Topic, Partition: r.tp.Partition,
		LastOffset: r.lastOffset, Records: r.records, DeadLetters: r.dead, Deletes: r.deletes})
	for class, n := range r.deadBy {
		r.cfg.metrics.DeadLetters.WithLabelValues(class).Add(float64(n))
	}
	clear(r.deadBy)
	r.epoch, r.lastOffset, r.records, r.dead, r.deletes = m.Epoch+1, -1, 0, nil, nil
}
