package actors

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/messages"
)

// Consumer is what the engine needs of Kafka (a *kafka.Consumer): the
// fetch loop polls, pauses and seeks it; the committers commit the group
// offsets; Progress and CatchUp compare positions with the high watermarks.
type Consumer interface {
	OffsetCommitter
	Poll(ctx context.Context) ([]kafka.Batch, error)
	// Pause stops fetching tps and returns what the client had fetched
	// and not returned yet, of every partition: kept, it is not fetched
	// again when they resume.
	Pause(tps ...tp) ([]kafka.Batch, error)
	// Resume fetches tps again, and returns what the client had fetched
	// and not returned yet, of every partition, which it would drop.
	Resume(tps ...tp) ([]kafka.Batch, error)
	// MaxPollRecords is the most records one Poll returns: parked records
	// go out at most as many at a time, as a poll's would.
	MaxPollRecords() int
	Seek(offsets map[tp]int64)
	Owned() []tp
	// EndOffsets is, per partition, the offset reading can reach now (the
	// last stable offset under read_committed).
	EndOffsets(ctx context.Context) (map[tp]int64, error)
	// Lag is, per owned partition, the offsets between the next one Poll
	// returns and the high watermark.
	Lag(ctx context.Context) (map[tp]int64, error)
	// TopicLogs is a topic's ID and its partitions' log ranges, asked of
	// the brokers now: the committers check their tables' offsets against
	// them.
	TopicLogs(ctx context.Context, topic string) (ledger.TopicLogs, error)
	Close()
}

// pollWait bounds one Poll: long, because a reset, a table's room in its
// budget, Pause and Resume interrupt the poll (interruptPoll), so an idle
// topic costs no wake-ups of the loop.
const pollWait = 5 * time.Second

// parkLimit bounds the bytes of the records the loop keeps for paused
// partitions (fetcher.parked): as much again as the Kafka client holds
// decompressed at most by default (kafka.max_decompress_bytes). A pause
// that would keep more leaves the rest to be fetched again. A variable for
// the tests.
var parkLimit int64 = 4 << 20

// recordOverhead is what a kgo.Record costs beside its key, value and
// headers' bytes (the struct and its slices' headers), as parkLimit counts
// it.
const recordOverhead = 200

// parkedBatch is what the client had fetched of a partition when the loop
// paused it: records that follow one another from from, where Kafka was
// when they were fetched; Kafka continues after the last (fetcher.pos).
type parkedBatch struct {
	from  int64
	batch kafka.Batch
	bytes int64
	// skip is the batch after the records that Kafka refused to
	// decompress, if it said so: it goes out with the last of them (its
	// offset is where Kafka is, and every reader moves past it).
	skip *kafka.BatchTooLargeError
}

// serves reports whether the parked records, and Kafka after them, give a
// table the records from low on, pos being where Kafka continues.
func (pk *parkedBatch) serves(low, pos int64) bool {
	return pk.from <= low && low <= pos
}

// sink is one table as the fetch loop feeds it: its readers, by generation,
// and where each of them continues. Owned by the loop goroutine but for
// the fields set at construction.
type sink struct {
	name      string
	committer *actor.PID
	reg       *registry
	budget    *Budget

	gen uint64
	// want is, per partition the table reads (not held), the next offset
	// its readers take: the loop hands a reader the records from there on
	// (tagged with it, Fetch.From) and moves it past them. -1: wherever the
	// partition starts (the consumer knows).
	want map[tp]int64
	// detached is set while the table has no room in its budget (need
	// bytes, or any when 0): the loop hands it nothing, and the partitions
	// it reads rewind to want once it has room, so one table's full
	// budget (its store down, a flood) never holds back another's.
	detached bool
	need     int64
	// schemaWait are the schema ids the table's readers stopped at,
	// being fetched: it stays detached until it has them all.
	schemaWait map[int]bool
	asked      time.Time // when the committer was last asked for an epoch to make room
	// missed are the partitions whose records went by while the table had
	// no reader of them (its pipeline spawning them): once it has, Kafka
	// is sought back to where it continues.
	missed map[tp]bool

	posMu   sync.Mutex
	posCopy map[tp]int64 // want, as position() reads it
}

// fetchRequest is a change the loop applies between two polls.
type fetchRequest struct {
	reset   *resetRequest
	assign  *assignRequest
	revoke  []tp
	behind  *behindRequest
	fetched *schemaFetched
	unhold  bool // a held partition's table released it
	sinkIdx int
}

// resetRequest makes a table's readers of generation gen continue at
// offsets (ledger.Held: not read).
type resetRequest struct {
	gen     uint64
	offsets map[tp]int64
}

// assignRequest adds newly assigned partitions and where each table's
// readers continue.
type assignRequest struct {
	partitions []tp
	tables     []tableStarts
}

type tableStarts struct {
	sink    int
	gen     uint64
	offsets map[tp]int64
}

// behindRequest says a table's reader stopped at from for want of need
// bytes of room, or (schema > 0) of the writer schema with that id.
type behindRequest struct {
	gen    uint64
	tp     tp
	from   int64
	need   int64
	schema int
}

// schemaFetched says schema id was fetched (or ctx ended).
type schemaFetched struct{ id int }

// fetcher is the poll loop: it hands each partition's records to the
// current reader of every table reading it, from where that reader
// continues, and polls the next records while those are mapped and
// written; before it dispatches a poll it waits until the one before the
// last is written, so at most two polls of records are in flight. A
// partition no table can take now (held, its pipeline being rebuilt, its
// budget full) is paused; one a table must read again (a rebuilt
// pipeline, room back in its budget) is sought back to the lowest offset
// any table reading it continues from, and the tables past that skip what
// they hold.
type fetcher struct {
	fetcherDeps

	mu       sync.Mutex
	requests []fetchRequest
	// wake is signalled by every request; rebuilt by a reset and by a
	// table's generation dropped: its old readers may never answer a poll
	// the loop waits for.
	wake, rebuilt chan struct{}
	cancelPoll    context.CancelFunc // ends the Poll in progress, if any (under mu)

	// Owned by the loop goroutine.
	runCtx          context.Context // run's: the schema fetches end with it
	fetchingSchemas map[int]bool    // schema ids being fetched
	pos             map[tp]int64    // next offset the consumer returns, once known
	active          map[tp]bool     // partitions fetched; the others owned are paused
	// parked are the records the client had fetched of the partitions the
	// loop paused (Consumer.Pause returns them; franz-go would drop them,
	// and fetch and decompress them again on resume): handed out, before
	// anything Kafka fetches after them, once a table takes the partition
	// again. Whatever moves Kafka elsewhere (a seek, a hold, a revocation,
	// a new assignment) drops them. Pause and Resume (which seeks, and so
	// would drop every partition's) return the records of partitions
	// still fetched too: parked as well, they go out at the next
	// dispatches, as a poll's would. The loop polls only once no partition
	// the consumer fetches has records parked, so a poll never brings
	// records that should follow parked ones.
	parked      map[tp]*parkedBatch
	parkedBytes int64 // the parked records' bytes (recordBytes), within parkLimit
	parkedErr   error // what Pause or Resume reported besides, for the next dispatch
	first       chan struct{}
	firstOnce   sync.Once
	// lagMeasured is when measureLag last asked for the lag.
	lagMeasured time.Time
	// lastData is when each partition last returned records (or a batch
	// too large), or was resumed; stuckChecked when healStuck last looked.
	lastData     map[tp]time.Time
	stuckChecked time.Time

	userPaused atomic.Bool // the control service's pause
	// userPauseDone is set by the loop once it has paused Kafka for
	// userPaused, so that Engine.Pause can return only then; looping
	// tells Pause whether the loop runs at all yet.
	userPauseDone, looping atomic.Bool
}

// fetcherDeps is the fetch loop's wiring.
type fetcherDeps struct {
	cons    Consumer
	sinks   []*sink // by table index
	system  *actor.ActorSystem
	metrics *Metrics
	health  *Health
	logger  *slog.Logger
	schemas SchemaFetcher // nil: no table reads a schema registry
}

// SchemaFetcher fetches the writer schemas that registry-encoded records
// name (a *schemareg.Registry): Fetch waits out an outage, reporting each
// failure to retrying, and returns once the mappers know what id is (a
// schema, or why there is none).
type SchemaFetcher interface {
	Fetch(ctx context.Context, id int, retrying func(error)) error
}

func newFetcher(d fetcherDeps) *fetcher {
	f := &fetcher{fetcherDeps: d, wake: make(chan struct{}, 1), rebuilt: make(chan struct{}, 1), pos: map[tp]int64{},
		active: map[tp]bool{}, parked: map[tp]*parkedBatch{}, first: make(chan struct{}), lastData: map[tp]time.Time{},
		fetchingSchemas: map[int]bool{}}
	for _, s := range d.sinks {
		s.want, s.missed = map[tp]int64{}, map[tp]bool{}
		// A detached table's budget freeing room is news for the loop, and
		// so is a reader spawned; a generation dropped ends the wait for
		// its readers, which will never answer.
		s.budget.OnRoom(f.interruptPoll)
		s.reg.onChange(func(reset bool) {
			if reset {
				signal(f.rebuilt)
			}
			f.interruptPoll()
		})
	}
	return f
}

// request queues r for the loop and wakes it. Safe from any goroutine.
func (f *fetcher) request(r fetchRequest) {
	f.mu.Lock()
	f.requests = append(f.requests, r)
	f.mu.Unlock()
	signal(f.wake)
	if r.reset != nil {
		signal(f.rebuilt)
	}
	f.interruptPoll()
}

// signal signals ch without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// reset makes table i's readers of generation gen continue at offsets:
// what a (re)built pipeline reads from. Safe from any goroutine.
func (f *fetcher) reset(i int, gen uint64, offsets map[tp]int64) {
	f.request(fetchRequest{sinkIdx: i, reset: &resetRequest{gen: gen, offsets: offsets}})
}

// assigned adds partitions Kafka assigned; tables are where each table's
// readers continue.
func (f *fetcher) assigned(partitions []tp, tables []tableStarts) {
	f.request(fetchRequest{assign: &assignRequest{partitions: partitions, tables: tables}})
}

// revoked forgets partitions Kafka took away.
func (f *fetcher) revoked(tps []tp) { f.request(fetchRequest{revoke: tps}) }

// behind says that table i's reader of partition p stopped at from for want
// of need bytes of room in the table's budget, or (schema > 0) because the
// record there is written with a schema the mapper does not have yet.
func (f *fetcher) behind(i int, gen uint64, p tp, from, need int64, schema int) {
	f.request(fetchRequest{sinkIdx: i, behind: &behindRequest{gen: gen, tp: p, from: from, need: need, schema: schema}})
}

// interruptPoll ends the Poll in progress so that the loop looks at a
// request, room in a budget or a pause/resume now rather than when the
// poll times out. Safe from any goroutine.
func (f *fetcher) interruptPoll() {
	f.mu.Lock()
	if f.cancelPoll != nil {
		f.cancelPoll()
	}
	f.mu.Unlock()
}

// poll runs one Poll that interruptPoll can end early.
func (f *fetcher) poll(ctx context.Context, wait time.Duration) ([]kafka.Batch, error) {
	pollCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	f.mu.Lock()
	f.cancelPoll = cancel
	f.mu.Unlock()
	batches, err := f.cons.Poll(pollCtx)
	f.mu.Lock()
	f.cancelPoll = nil
	f.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		// Interrupted on purpose: only the interruption is no error (a
		// batch too large comes once).
		errs := slices.DeleteFunc(slices.Clone(joined(err)), func(e error) bool { return errors.Is(e, context.Canceled) })
		err = errors.Join(errs...)
	}
	return batches, err
}

// applyRequests applies the queued requests, then moves Kafka to where the
// tables continue; it reports whether a table was reset (its old readers
// may never answer).
func (f *fetcher) applyRequests() bool {
	f.mu.Lock()
	reqs := f.requests
	f.requests = nil
	f.mu.Unlock()
	dirty := map[tp]bool{}
	reset := false
	for _, r := range reqs {
		switch {
		case r.reset != nil:
			s := f.sinks[r.sinkIdx]
			if r.reset.gen < s.gen {
				continue
			}
			reset = true
			for p := range s.want {
				dirty[p] = true
			}
			s.gen, s.want, s.missed, s.detached, s.need = r.reset.gen, map[tp]int64{}, map[tp]bool{}, false, 0
			clear(s.schemaWait) // the new readers ask again
			for p, off := range r.reset.offsets {
				if off != ledger.Held {
					s.want[p] = off
				}
				dirty[p] = true
			}
		case r.assign != nil:
			// The consumer may have fetched the partitions, and the loop
			// polled their records and handed them to no table, before
			// this request came: where Kafka is is unknown, and the seek
			// reposition makes puts it where the tables continue.
			for _, p := range r.assign.partitions {
				delete(f.pos, p)
				f.unpark(p)
				dirty[p] = true
			}
			for _, t := range r.assign.tables {
				s := f.sinks[t.sink]
				if t.gen != s.gen {
					continue // a reset since covers them
				}
				for p, off := range t.offsets {
					if off != ledger.Held {
						s.want[p] = off
					}
					dirty[p] = true
				}
			}
		case r.revoke != nil:
			for _, p := range r.revoke {
				for _, s := range f.sinks {
					delete(s.want, p)
					delete(s.missed, p)
				}
				delete(f.pos, p)
				delete(f.active, p)
				f.unpark(p)
			}
		case r.behind != nil:
			s := f.sinks[r.sinkIdx]
			if r.behind.gen != s.gen {
				continue
			}
			s.want[r.behind.tp] = r.behind.from
			if r.behind.schema > 0 {
				f.awaitSchema(s, r.behind.schema)
			} else {
				f.detach(s, r.behind.need)
			}
		case r.fetched != nil:
			delete(f.fetchingSchemas, r.fetched.id)
			for _, s := range f.sinks {
				delete(s.schemaWait, r.fetched.id) // checkBudgets attaches it
			}
		}
	}
	f.reposition(dirty)
	f.publishPositions()
	return reset
}

// detach stops handing table s records until its budget has room for need
// bytes (any room when 0), and asks for the epoch that makes it.
func (f *fetcher) detach(s *sink, need int64) {
	if !s.detached {
		f.logger.Debug("table reading paused: its memory budget is full", "table", s.name, "need", need)
		s.asked = time.Time{} // ask at once
	}
	s.detached = true
	s.need = max(s.need, need)
	f.askRoom(s)
}

// awaitSchema stops handing table s records until schema id is fetched,
// and fetches it off the loop unless that is under way: the registry
// being down or slow holds back only the tables reading its records.
func (f *fetcher) awaitSchema(s *sink, id int) {
	if s.schemaWait == nil {
		s.schemaWait = map[int]bool{}
	}
	if !s.detached {
		f.logger.Info("table reading paused: fetching a schema from the registry", "table", s.name, "schema_id", id)
	}
	s.schemaWait[id], s.detached = true, true
	if f.fetchingSchemas[id] {
		return
	}
	if f.schemas == nil { // a registry mapping without a registry: a wiring fault
		f.logger.Error("a table's records name schema ids and the engine has no schema registry to fetch them from",
			"table", s.name, "schema_id", id)
		return
	}
	f.fetchingSchemas[id] = true
	ctx := f.runCtx
	go func() {
		retrying := func(err error) {
			f.metrics.Errors.WithLabelValues(componentSchemaRegistry).Inc()
			f.health.Degrade(componentSchemaRegistry, err.Error())
			f.logger.Warn("schema registry: retrying", "schema_id", id, "err", err)
		}
		for {
			err := f.schemas.Fetch(ctx, id, retrying)
			if err == nil || ctx.Err() != nil {
				break
			}
			// Refused credentials: a person must fix them; the tables
			// wait, asking again now and then.
			retrying(err)
			select {
			case <-ctx.Done():
			case <-time.After(30 * time.Second):
			}
		}
		f.health.Recover(componentSchemaRegistry)
		f.request(fetchRequest{fetched: &schemaFetched{id: id}})
	}()
}

// askRoom asks table s's committer for an early epoch, which frees what
// its budget holds; repeated every pollWait while s stays detached (an
// epoch already committing frees only what it holds).
func (f *fetcher) askRoom(s *sink) {
	if now := time.Now(); now.Sub(s.asked) >= pollWait {
		s.asked = now
		f.system.Root.Send(s.committer, &messages.CommitNow{Reason: messages.ReasonMemoryBudget})
	}
}

// checkBudgets detaches the tables whose budget ran out and attaches again
// those that have room, rewinding their partitions.
func (f *fetcher) checkBudgets() {
	dirty := map[tp]bool{}
	for _, s := range f.sinks {
		switch {
		case !s.detached && s.budget.Exhausted():
			f.detach(s, 0)
		case len(s.schemaWait) > 0: // its room is asked for once it has them
		case s.detached && s.budget.HasRoom(s.need):
			s.detached, s.need = false, 0
			f.logger.Debug("table reading resumed", "table", s.name)
			for p := range s.want {
				dirty[p] = true
			}
		case s.detached:
			f.askRoom(s)
		}
	}
	f.reposition(dirty)
}

// reposition seeks each of ps to the lowest offset an attached table
// reading it continues from, when Kafka is elsewhere; a partition no table
// reads is held (not fetched until a table wants it).
func (f *fetcher) reposition(ps map[tp]bool) {
	if len(ps) == 0 {
		return
	}
	seek := map[tp]int64{}
	for p := range ps {
		low, read, attached := int64(0), false, false
		for _, s := range f.sinks {
			off, ok := s.want[p]
			if !ok {
				continue
			}
			read = true
			if s.detached {
				continue
			}
			if !attached || off < low {
				low = off
			}
			attached = true
		}
		pk := f.parked[p]
		switch pos, known := f.pos[p]; {
		case !read:
			seek[p] = ledger.Held
			delete(f.pos, p)
			f.unpark(p)
		case !attached:
			// Paused by updateActive until its tables have room; its
			// parked records wait with it.
		case pk != nil && known && pk.serves(low, pos):
			// Its parked records go out first, and Kafka continues after
			// them.
		case !known || low != pos:
			seek[p] = low
			if low >= 0 {
				f.pos[p] = low
			} else {
				delete(f.pos, p)
			}
			f.unpark(p)
		}
	}
	if len(seek) > 0 {
		f.cons.Seek(seek)
	}
}

// updateActive pauses the owned partitions no table takes now (held, no
// reader of the table's generation, the table detached, or the control
// service's pause) and resumes the others.
func (f *fetcher) updateActive() {
	owned := f.cons.Owned()
	user := f.userPaused.Load()
	var pause, resume []tp
	for _, p := range owned {
		on := !user && f.takes(p)
		if on && !f.active[p] {
			resume = append(resume, p)
			f.lastData[p] = time.Now() // silent from now on only
		}
		if !on && (f.active[p] || !f.known(p)) {
			pause = append(pause, p)
		}
		f.active[p] = on
	}
	for p := range f.active {
		if !slices.Contains(owned, p) {
			delete(f.active, p)
			delete(f.lastData, p)
		}
	}
	if len(pause) > 0 {
		f.park(f.cons.Pause(pause...))
	}
	if len(resume) > 0 {
		f.park(f.cons.Resume(resume...))
	}
	paused := user || slices.ContainsFunc(f.sinks, func(s *sink) bool { return s.detached })
	f.metrics.FetchPaused.Set(boolGauge(paused))
	f.userPauseDone.Store(user)
}

// park keeps the records Pause or Resume returned (see fetcher.parked). A
// paused partition's are kept only where Kafka was is known, and within
// parkLimit; else Kafka is sought back to them, to fetch them again. What
// Pause or Resume reported goes to the next dispatch, but a batch too
// large after a partition's parked records, which goes out after them.
func (f *fetcher) park(batches []kafka.Batch, err error) {
	for _, b := range batches {
		p := tp{Topic: b.Topic, Partition: b.Partition}
		pk := f.parked[p]
		pos, known := f.pos[p]
		if !known {
			pos = -1 // where the partition starts: Kafka was there (see reposition)
		} else if len(b.Records) > 0 && b.Records[0].Offset < pos {
			// Kafka continues at pos: records before it were parked or
			// handed out already, and parked behind themselves they
			// would go out out of order.
			f.logger.Error("kafka returned records before where it continues: dropped", "topic", p.Topic,
				"partition", p.Partition, "first", b.Records[0].Offset, "continues at", pos)
			i, _ := slices.BinarySearchFunc(b.Records, pos, func(r *kgo.Record, off int64) int { return cmpOffset(r.Offset, off) })
			b.Records = b.Records[i:]
		}
		if len(b.Records) == 0 {
			continue
		}
		n := recordBytes(b.Records)
		if !f.active[p] && (!known || f.parkedBytes+n > parkLimit) {
			f.cons.Seek(map[tp]int64{p: pos})
			continue
		}
		if pk == nil {
			pk = &parkedBatch{from: pos, batch: kafka.Batch{Topic: b.Topic, Partition: b.Partition}}
			f.parked[p] = pk
		}
		pk.batch.Records = append(pk.batch.Records, b.Records...)
		pk.batch.HighWatermark = max(pk.batch.HighWatermark, b.HighWatermark)
		pk.bytes += n
		f.parkedBytes += n
		f.pos[p] = b.Records[len(b.Records)-1].Offset + 1
	}
	if err == nil {
		return
	}
	var rest []error
	for _, e := range joined(err) {
		if tl, ok := errors.AsType[*kafka.BatchTooLargeError](e); ok {
			if pk := f.parked[tp{Topic: tl.Topic, Partition: tl.Partition}]; pk != nil {
				f.logger.Warn("record batch too large to decompress: dead-lettered, read past", "err", tl)
				pk.skip = tl
				continue
			}
		}
		rest = append(rest, e)
	}
	f.parkedErr = errors.Join(f.parkedErr, errors.Join(rest...))
}

// unparked takes parked records of the partitions fetched again, the
// first of each, to dispatch as a poll: at most as many as a poll brings,
// so that the two polls in flight stay within what Backpressure counts;
// with the last of a partition's, the batch too large after them.
func (f *fetcher) unparked() (out []kafka.Batch, tooLarge map[tp]*kafka.BatchTooLargeError) {
	room := f.cons.MaxPollRecords()
	for p, pk := range f.parked {
		if !f.active[p] || room == 0 {
			continue
		}
		recs := pk.batch.Records
		n := min(room, len(recs))
		room -= n
		b := pk.batch
		b.Records = recs[:n:n]
		out = append(out, b)
		if n == len(recs) {
			if pk.skip != nil {
				if tooLarge == nil {
					tooLarge = map[tp]*kafka.BatchTooLargeError{}
				}
				tooLarge[p] = pk.skip
			}
			f.unpark(p)
			continue
		}
		taken := recordBytes(b.Records)
		pk.batch.Records, pk.from = recs[n:], recs[n-1].Offset+1
		pk.bytes -= taken
		f.parkedBytes -= taken
	}
	return out, tooLarge
}

// unpark forgets p's parked records.
func (f *fetcher) unpark(p tp) {
	if pk := f.parked[p]; pk != nil {
		f.parkedBytes -= pk.bytes
		delete(f.parked, p)
	}
}

// recordBytes is what records cost as parkLimit counts it.
func recordBytes(records []*kgo.Record) int64 {
	var n int64
	for _, r := range records {
		n += int64(len(r.Key) + len(r.Value) + recordOverhead)
		for _, h := range r.Headers {
			n += int64(len(h.Key) + len(h.Value))
		}
	}
	return n
}

// known reports whether updateActive has decided on p before.
func (f *fetcher) known(p tp) bool {
	_, ok := f.active[p]
	return ok
}

// takes reports whether some table takes partition p's records now.
func (f *fetcher) takes(p tp) bool {
	for _, s := range f.sinks {
		if _, ok := s.want[p]; ok && !s.detached && s.reg.reader(s.gen, p) != nil {
			return true
		}
	}
	return false
}

// fetching reports whether any partition is fetched.
func (f *fetcher) fetching() bool {
	for _, on := range f.active {
		if on {
			return true
		}
	}
	return false
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// run polls until ctx ends. It starts once a committer has loaded its
// table and set a first generation: records polled before that would have
// no reader to go to.
func (f *fetcher) run(ctx context.Context) error {
	select {
	case <-f.wake:
	case <-ctx.Done():
		return ctx.Err()
	}
	f.looping.Store(true)
	f.runCtx = ctx
	var inFlight *polled // dispatched, not yet written
	for ctx.Err() == nil {
		select {
		case <-f.rebuilt:
			inFlight = nil // a dropped generation's readers may never answer
		default:
		}
		if f.between() {
			inFlight = nil // nor a reset table's old ones
		}
		// Parked records of partitions fetched again go out before Kafka
		// is polled for what follows them. Otherwise a request, room in a
		// table's budget, Pause or Resume interrupts the poll; with
		// everything paused, polling still keeps the group membership
		// alive.
		batches, skips := f.unparked()
		var err error
		if len(batches) == 0 {
			batches, err = f.poll(ctx, pollWait)
		}
		if f.parkedErr != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				err = nil // an idle poll: what Pause or Resume reported alone
			}
			err, f.parkedErr = errors.Join(f.parkedErr, err), nil
		}
		if !f.fetching() {
			f.measureLag(ctx)
		}
		tooLarge, err := f.tooLarge(err)
		if tooLarge == nil {
			tooLarge = skips
		} else {
			maps.Copy(tooLarge, skips)
		}
		if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			f.metrics.Errors.WithLabelValues(componentKafka).Inc()
			f.logger.Warn("kafka poll", "err", err)
			f.holdLost(err)
			if len(batches) == 0 {
				time.Sleep(200 * time.Millisecond)
			}
		}
		// The readers queue this poll behind the one in flight, so they
		// go from one to the next without waiting for the loop.
		next := f.dispatch(batches, tooLarge)
		f.healStuck(ctx, time.Now())
		if inFlight != nil {
			f.wait(ctx, inFlight)
		}
		inFlight = next
		f.firstOnce.Do(func() { close(f.first) })
	}
	return ctx.Err()
}

// between readies the next poll: it applies the requests, moves Kafka for
// the tables that need it and pauses or resumes the partitions. It reports
// whether a table was reset (its old readers may never answer).
func (f *fetcher) between() bool {
	reset := f.applyRequests()
	f.rewindMissed()
	f.checkBudgets()
	f.updateActive()
	return reset
}

// rewindMissed seeks back the partitions whose records went by a table
// without a reader of them, once it has one.
func (f *fetcher) rewindMissed() {
	dirty := map[tp]bool{}
	for _, s := range f.sinks {
		for p := range s.missed {
			if s.reg.reader(s.gen, p) != nil {
				dirty[p] = true
				delete(s.missed, p)
			}
		}
	}
	f.reposition(dirty)
}

// holdLost holds the partitions whose fetch says their offset left the log
// (OFFSET_OUT_OF_RANGE: franz-go stops them, as kafka.on_data_loss wants no
// silent reset) or their topic's ID is gone (UNKNOWN_TOPIC_ID: deleted,
// maybe created again), and asks every table reading them to check them
// against the log; each says where it continues (a reset). The records
// polled with the error are dispatched as usual, before.
func (f *fetcher) holdLost(err error) {
	lost := map[tp]bool{}
	stale := false
	for _, e := range joined(err) {
		var pe *kafka.PartitionError
		if !errors.As(e, &pe) || pe.Partition < 0 {
			continue
		}
		switch {
		case errors.Is(pe, kerr.OffsetOutOfRange):
		case errors.Is(pe, kerr.UnknownTopicID):
			stale = true
		default:
			continue
		}
		lost[tp{Topic: pe.Topic, Partition: pe.Partition}] = true
	}
	if len(lost) == 0 {
		return
	}
	held := make(map[tp]int64, len(lost))
	for p := range lost {
		held[p] = ledger.Held
		delete(f.pos, p)
		f.unpark(p)
	}
	f.cons.Seek(held)
	for _, s := range f.sinks {
		var mine []tp
		for p := range lost {
			if _, ok := s.want[p]; ok {
				mine = append(mine, p)
				delete(s.want, p)
			}
		}
		if len(mine) > 0 {
			f.system.Root.Send(s.committer, &recheckPartitions{partitions: mine, staleClient: stale})
		}
	}
	f.publishPositions()
}

// tooLarge takes the record batches Poll refused to decompress
// (kafka.BatchTooLargeError) out of err, by partition; the rest of err is
// returned. Such a batch is not a Kafka failure but hostile or oversized
// input, dead-lettered by dispatch.
func (f *fetcher) tooLarge(err error) (map[tp]*kafka.BatchTooLargeError, error) {
	if err == nil {
		return nil, nil
	}
	var found map[tp]*kafka.BatchTooLargeError
	var rest []error
	for _, e := range joined(err) {
		if tl, ok := errors.AsType[*kafka.BatchTooLargeError](e); ok {
			if found == nil {
				found = map[tp]*kafka.BatchTooLargeError{}
			}
			found[tp{Topic: tl.Topic, Partition: tl.Partition}] = tl
			f.logger.Warn("record batch too large to decompress: dead-lettered, read past", "err", tl)
			continue
		}
		rest = append(rest, e)
	}
	return found, errors.Join(rest...)
}

// joined returns the errors errors.Join joined into err, or err alone.
func joined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// polled is a dispatched poll: readers answer on done once its rows are
// written. The channel has room for every answer, so a reader of a dead
// generation that never answers leaks nothing.
type polled struct {
	done    chan struct{}
	pending int
}

// dispatch hands batches to readers without waiting, each with the batch
// after it that Kafka refused to decompress, if any (tooLarge, emptied),
// and moves Kafka past such a batch.
func (f *fetcher) dispatch(batches []kafka.Batch, tooLarge map[tp]*kafka.BatchTooLargeError) *polled {
	p := &polled{done: make(chan struct{}, (len(batches)+len(tooLarge))*len(f.sinks))}
	now := time.Now()
	for _, b := range batches {
		if len(b.Records) == 0 {
			continue
		}
		key := tp{Topic: b.Topic, Partition: b.Partition}
		f.lastData[key] = now
		skip := tooLarge[key]
		delete(tooLarge, key)
		last := b.Records[len(b.Records)-1].Offset
		if f.parked[key] == nil {
			// Kafka continues after these; with parked records left, it
			// is after those already (park).
			f.pos[key] = last + 1
		}
		f.send(p, key, b.Records, skip)
		f.metrics.Lag.WithLabelValues(b.Topic, partitionLabel(b.Partition)).Set(float64(max(0, b.HighWatermark-last-1)))
	}
	for key, skip := range tooLarge {
		f.lastData[key] = now
		f.send(p, key, nil, skip)
	}
	f.publishPositions()
	return p
}

// send hands a partition's records, and the batch after them to skip, to
// the reader of every table that takes them, each from where it continues,
// and moves Kafka past the skipped batch.
func (f *fetcher) send(p *polled, key tp, records []*kgo.Record, skip *kafka.BatchTooLargeError) {
	if skip != nil {
		// Kafka stopped the partition at the batch; each reader records
		// the skip in its epoch (a dead letter and the txn past it).
		f.cons.Seek(map[tp]int64{key: skip.Next})
		f.pos[key] = skip.Next
		f.unpark(key) // a paused partition's: its tables rewind to them
	}
	for _, s := range f.sinks {
		from, ok := s.want[key]
		if !ok || s.detached || s.missed[key] {
			continue // a missed partition waits for its rewind
		}
		i, _ := slices.BinarySearchFunc(records, from, func(r *kgo.Record, off int64) int { return cmpOffset(r.Offset, off) })
		recs := records[i:]
		var sb *messages.SkippedBatch
		if skip != nil && skip.Offset >= from {
			sb = &messages.SkippedBatch{Offset: skip.Offset, LastOffset: skip.Next - 1, Reason: skip.Error()}
		}
		if len(recs) == 0 && sb == nil {
			continue // the table holds these already
		}
		pid := s.reg.reader(s.gen, key)
		if pid == nil {
			// Its pipeline is spawning the reader (or being rebuilt: a
			// reset will say where it continues): these records go by it,
			// and Kafka is sought back for it once the reader is there.
			s.missed[key] = true
			continue
		}
		switch {
		case sb != nil:
			s.want[key] = sb.LastOffset + 1
		default:
			s.want[key] = recs[len(recs)-1].Offset + 1
		}
		p.pending++
		f.system.Root.Send(pid, &messages.Fetch{Gen: s.gen, Topic: key.Topic, Partition: key.Partition, From: from,
			Records: recs, Skip: sb, Done: func() { p.done <- struct{}{} }})
	}
}

func cmpOffset(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// wait waits until p's rows are written, a table's generation is dropped
// or reset (its old readers may never answer), or ctx ends.
func (f *fetcher) wait(ctx context.Context, p *polled) {
	for ; p.pending > 0; p.pending-- {
		select {
		case <-p.done:
		case <-f.rebuilt:
			return
		case <-ctx.Done():
			return
		}
	}
}

// position returns, per partition table i reads, the next offset its
// readers take: everything before it was handed to them.
func (f *fetcher) position(i int) map[tp]int64 {
	s := f.sinks[i]
	s.posMu.Lock()
	defer s.posMu.Unlock()
	return maps.Clone(s.posCopy)
}

func (f *fetcher) publishPositions() {
	for _, s := range f.sinks {
		s.posMu.Lock()
		s.posCopy = maps.Clone(s.want)
		s.posMu.Unlock()
	}
}
