package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/messages"
	"github.com/deltaflow/deltaflow/storage"
)

// committerConfig is the committer's wiring: one table's.
type committerConfig struct {
	name          string // the table's, in actor names and logs
	sink          int    // the table's index in the fetch loop
	app           string
	table         *delta.Table
	flushInterval time.Duration
	epochTimeout  time.Duration // an epoch not committed by then is aborted
	idleEpochs    int           // idle epochs after which a buffer is stopped
	backoff       Backoff       // pipeline rebuilds after failures
	retry         retryPolicy   // storage and DLQ operations, before an epoch is given up
	pipeline      *pipelineConfig
	// pipelineOf makes the pipeline of another mapper's rows, into the
	// table's evolved schema (evolve).
	pipelineOf func(m *mapping.Mapper, tableSchema *delta.StructType) (*pipelineConfig, error)
	outbox     Outbox
	// group commits the Kafka group offsets every table's commits allow.
	group   *groupOffsets
	fetch   *fetcher
	budget  *Budget
	health  *Health
	metrics *Metrics
	logger  *slog.Logger
	// eventTime names the column whose committed maximum the freshness
	// metric follows ("" or absent from the stats: not followed).
	eventTime string
	// maintenance hears about checkpoints (log cleanup); nil when off.
	maintenance *actor.PID
	// progress is what the stall watchdog reads (Engine.Progress).
	progress *progress
	// starts says where partitions without an offset start and what a
	// data loss does; kafka answers what the partitions' logs hold.
	starts ledger.Policy
	kafka  topicLogger
	// fatal reports what only a new process can fix (Engine.Fatal).
	fatal func(error)
}

// topicLogger is the consumer's TopicLogs.
type topicLogger interface {
	TopicLogs(ctx context.Context, topic string) (ledger.TopicLogs, error)
}

// Committer-internal messages.
type (
	tick         struct{}
	epochExpired struct {
		gen   uint64
		epoch uint64
	}
	// committedOffsets asks for the next offset of each assigned partition
	// per the snapshot (answered with map[tp]int64).
	committedOffsets struct{}
)

// committer owns the table: the snapshot, the epochs, the commits. It is the
// only actor that writes the Delta log.
type committer struct {
	cfg      *committerConfig
	ctx      context.Context
	cancel   context.CancelFunc
	snap     *delta.Snapshot
	life     lifecycle // the generations: pipeline, readers, idle buffers, rebuilds
	assigned map[tp]bool
	// base is, per owned partition, the next offset the table said when
	// reading it began (as ledger.Next: -1 for none), advanced by our
	// own commits. Our epoch may commit the partition only while the table
	// still says so: if another writer advanced its txn meanwhile (it
	// owned the partition after our snapshot was read, or we are a
	// zombie), the epoch re-read records that writer committed.
	base map[tp]int64
	// held are the owned partitions refused for data loss or a start in
	// doubt (ledger.Held): not read until reassigned. recheck are those
	// whose fetch found their offset out of the log or their topic gone,
	// to be checked once what was read of them is committed (runRechecks).
	held        map[tp]bool
	recheck     map[tp]bool
	staleClient bool   // a fetch found the topic's ID gone (see runRechecks)
	epoch       uint64 // the epoch readers are filling
	cur         *epochState
	sched       schedule // which CommitNow seals which epoch, who waits on it
	// busy is set while table work runs off the actor (offActor): until its
	// result is applied, the messages it would race with wait in deferred.
	busy     bool
	job      uint64        // numbers the work, so that a result from before a restart is ignored
	working  chan struct{} // closed when the work ends
	deferred []deferredMessage
	// faults counts the aborts in a row on a record fault (recordFault)
	// since something was last committed; at isolateAfter, isolate starts
	// cutting the failing epoch down to the record causing it.
	faults  int
	isolate *isolation
	writer  epochWriter // DLQ publish and commit, with their retries
	ticker  *time.Ticker
}

// deferredMessage is a message that came while busy, with its sender (to
// answer a request).
type deferredMessage struct {
	msg    any
	sender *actor.PID
}

// workDone carries the result of work run off the actor: then applies it,
// on the actor.
type workDone struct {
	job  uint64
	then func(actor.Context)
}

// newCommitter returns a producer that always yields the same committer:
// protoactor re-incarnates an actor on restart, and the assigned partitions,
// generation and epoch counters must survive that (start resets the rest).
func newCommitter(cfg *committerConfig) actor.Producer {
	c := &committer{cfg: cfg, life: lifecycle{cfg: cfg}, writer: epochWriter{table: cfg.table, outbox: cfg.outbox, retry: cfg.retry}}
	return func() actor.Actor { return c }
}

// Receive never waits on I/O for long: an epoch's DLQ publish, commit and
// checkpoint, retried for minutes when the store or NATS is down, run off
// the actor (offActor). Meanwhile it takes CommitNow requests and the
// flush timer and stops or restarts at once; every other message waits,
// in order, for the work's result, since it reads or changes the snapshot
// the work owns (Assign, Revoke, a failure's abort) or follows the epoch it
// commits.
func (c *committer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.start(ctx)
		c.replayDeferred(ctx)
	case *actor.Restarting, *actor.Stopping:
		c.stopTimers()
		c.awaitWork()
	case *tick:
		if c.cur == nil && c.life.running() {
			c.sealEpoch(ctx, messages.ReasonTimer)
		}
	case *messages.CommitNow:
		c.handleCommitNow(ctx, m)
	case *workDone:
		if c.busy && m.job == c.job {
			c.busy = false
			m.then(ctx)
			c.replayDeferred(ctx)
		}
	default:
		if c.busy {
			c.deferred = append(c.deferred, deferredMessage{msg: m, sender: ctx.Sender()})
			return
		}
		c.handle(ctx, m, ctx.Sender())
	}
}

// handle handles the messages that wait while busy; sender is the one of
// the message.
func (c *committer) handle(ctx actor.Context, msg any, sender *actor.PID) {
	switch m := msg.(type) {
	case *messages.Assign:
		c.handleAssign(ctx, m)
	case *messages.Revoke:
		for _, part := range m.Partitions {
			p := tp{Topic: m.Topic, Partition: part}
			delete(c.assigned, p)
			delete(c.base, p)
			delete(c.recheck, p)
			c.release(p)
		}
		c.cfg.progress.setCommitted(c.base)
		c.isolate, c.faults = nil, 0 // the ranges it searched may be another process's now
		c.abort(ctx, fmt.Sprintf("partitions %s%v revoked", m.Topic, m.Partitions), false)
		close(m.Reply)
	case *messages.Sealed:
		if m.Gen == c.life.gen && c.cur != nil && c.cur.onSealed(m) && len(c.cur.waitFlush) == 0 {
			c.flushEpoch(ctx)
		}
	case *messages.Flushed:
		if m.Gen == c.life.gen && c.cur != nil && c.cur.allSealed() && c.cur.onFlushed(m) {
			c.commitEpoch(ctx)
		}
	case *messages.PipelineFailed:
		if m.Gen == c.life.gen {
			c.failEpoch(ctx, fmt.Sprintf("%s failed: %s", m.Actor, m.Reason), true) // a panic: a record the code cannot take
		}
	case *epochExpired:
		if m.gen == c.life.gen && c.cur != nil && c.cur.epoch == m.epoch {
			c.abort(ctx, fmt.Sprintf("epoch %d not committed within %s", m.epoch, c.cfg.epochTimeout), true)
		}
	case *committedOffsets:
		if sender != nil {
			ctx.Send(sender, nextOffsets(c.snap, c.cfg.app, c.partitions()))
		}
	case *rebuild:
		if m.gen == c.life.gen {
			c.spawnPipeline(ctx)
		}
	case *schemaChanged:
		if m.gen == c.life.gen {
			c.evolve(ctx, m)
		}
	case *recheckPartitions:
		for _, p := range m.partitions {
			if c.assigned[p] {
				c.recheck[p] = true
			}
		}
		c.staleClient = c.staleClient || m.staleClient
		c.runRechecks(ctx)
	}
}

// offActor runs work in a goroutine and applies what it returns on the
// actor. The work must not touch the committer's state; c.snap is its own
// until the result is applied (busy defers whatever reads it). One at a
// time: a stop or restart cancels the running one, waits for it to end
// (awaitWork) and ignores its result.
func (c *committer) offActor(ctx actor.Context, work func() func(actor.Context)) {
	c.job++
	c.busy = true
	job, self, system := c.job, ctx.Self(), ctx.ActorSystem()
	ended := make(chan struct{})
	c.working = ended
	go func() {
		then := work()
		close(ended)
		system.Root.Send(self, &workDone{job: job, then: then})
	}()
}

// awaitWorkLimit bounds awaitWork: work deaf to its cancelled context is
// reported, not waited for forever.
const awaitWorkLimit = time.Minute

// awaitWork waits until the work offActor started last has ended (its
// context is cancelled first), so that no table work outlives the actor: a
// stopped engine writes nothing more, and a restarted committer reads a log
// its old work no longer changes.
func (c *committer) awaitWork() {
	if c.working == nil {
		return
	}
	select {
	case <-c.working:
	case <-time.After(awaitWorkLimit):
		c.cfg.logger.Error("the committer's table work did not end within a minute of being cancelled; going on without it")
	}
	c.working = nil
}

// replayDeferred handles the messages deferred while busy, in order, until
// one makes it busy again.
func (c *committer) replayDeferred(ctx actor.Context) {
	for len(c.deferred) > 0 && !c.busy {
		d := c.deferred[0]
		c.deferred = c.deferred[1:]
		c.handle(ctx, d.msg, d.sender)
	}
}

// start loads the table and builds the first pipeline; after a restart it
// does the same from what the log says.
func (c *committer) start(ctx actor.Context) {
	// After a restart the same instance runs start again: whatever was in
	// flight belongs to a dead generation.
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.life.forget()
	c.busy = false
	c.cfg.progress.committing.Store(false)
	c.dropEpoch()
	if c.assigned == nil {
		c.assigned, c.base, c.held, c.recheck = map[tp]bool{}, map[tp]int64{}, map[tp]bool{}, map[tp]bool{}
	}
	// The table is loaded off the actor (retried for minutes while the
	// store is down): a stop or restart meanwhile is not held up by it.
	c.offActor(ctx, func() func(actor.Context) {
		var snap *delta.Snapshot
		err := retry(c.ctx, c.cfg.retry, func() (err error) {
			snap, err = c.cfg.table.Snapshot(c.ctx)
			return err
		}, c.storageRetrying("load table"))
		return func(ctx actor.Context) {
			if err != nil {
				panic(fmt.Errorf("committer: load table: %w", err)) // restarted with backoff
			}
			c.cfg.health.Recover("storage")
			c.snap = snap
			c.cfg.metrics.TableVersion.Set(float64(snap.Version()))
			c.life.next()
			c.spawnPipeline(ctx)
		}
	})
	c.ticker = time.NewTicker(c.cfg.flushInterval)
	system, self, ticks, done := ctx.ActorSystem(), ctx.Self(), c.ticker.C, c.ctx.Done()
	go func() {
		for {
			select {
			case <-ticks:
				system.Root.Send(self, &tick{})
			case <-done:
				return
			}
		}
	}()
}

func (c *committer) stopTimers() {
	if c.ticker != nil {
		c.ticker.Stop()
	}
	if c.cancel != nil {
		c.cancel()
	}
}

func (c *committer) storageRetrying(what string) func(int, error) {
	return storageRetrying(c.cfg.metrics, c.cfg.health, c.cfg.logger, what)
}

func (c *committer) partitions() []tp { return sortedTPs(c.assigned) }

// nextOffsets is ledger.Next over partitions of several topics.
func nextOffsets(s *delta.Snapshot, app string, ps []tp) map[tp]int64 {
	out := make(map[tp]int64, len(ps))
	for topic, parts := range byTopic(ps) {
		for p, next := range ledger.Next(s, app, topic, parts) {
			out[tp{Topic: topic, Partition: p}] = next
		}
	}
	return out
}

// byTopic groups partitions by topic.
func byTopic(ps []tp) map[string][]int32 {
	out := map[string][]int32{}
	for _, p := range ps {
		out[p.Topic] = append(out[p.Topic], p.Partition)
	}
	return out
}

// spawnPipeline builds this generation's pipeline and readers, then
// points the fetch loop at them, re-reading from the committed offsets.
// Until then the loop drops what it polls (its generation has no readers)
// and the seek brings those records back.
func (c *committer) spawnPipeline(ctx actor.Context) {
	c.life.spawn(ctx)
	var limits map[tp]*readLimit
	if c.isolate != nil {
		p, limit := c.isolate.plan()
		limits = map[tp]*readLimit{p: limit}
	}
	offsets := nextOffsets(c.snap, c.cfg.app, c.partitions())
	maps.Copy(c.base, offsets)
	c.cfg.progress.setCommitted(c.base)
	if len(c.assigned) > 0 {
		c.life.spawnReaders(ctx, maps.Clone(offsets), c.epoch, limits)
	}
	for p := range c.held {
		offsets[p] = ledger.Held
	}
	for p := range offsets {
		if _, read := limits[p]; limits != nil && !read {
			offsets[p] = ledger.Held // one partition at a time while isolating
		}
	}
	c.cfg.fetch.reset(c.cfg.sink, c.life.gen, offsets)
	if seal, reason := c.sched.rebuilt(); seal && c.cur == nil {
		c.sealEpoch(ctx, reason)
	}
}

func (c *committer) handleCommitNow(ctx actor.Context, m *messages.CommitNow) {
	if c.sched.request(m.Reason, m.Reply, c.cur != nil) && c.life.running() {
		c.sealEpoch(ctx, m.Reason)
	}
}

// sealEpoch seals epoch c.epoch: readers tag later rows with the next one.
func (c *committer) sealEpoch(ctx actor.Context, reason messages.Reason) {
	partitions := c.life.reading()
	c.sched.sealed()
	if len(partitions) == 0 {
		c.finishEpoch(ctx, nil)
		return
	}
	e := c.epoch
	c.epoch++
	c.cur = newEpochState(e, partitions, reason, time.Now())
	c.cfg.budget.EpochStarted()
	c.life.seal(ctx, e)
	c.cfg.logger.Debug("epoch sealing", "epoch", e, "reason", reason, "readers", len(partitions), "buffers", len(c.cfg.pipeline.reg.bufferList()))
	gen, self := c.life.gen, ctx.Self()
	time.AfterFunc(c.cfg.epochTimeout, func() { ctx.ActorSystem().Root.Send(self, &epochExpired{gen: gen, epoch: e}) })
}

// flushEpoch asks every live (and retiring) buffer to flush the epoch.
func (c *committer) flushEpoch(ctx actor.Context) {
	targets := c.life.buffers()
	ids := make([]string, len(targets))
	for i, pid := range targets {
		ids[i] = pid.Id
	}
	c.cur.expectFlushes(ids)
	if len(targets) == 0 {
		c.commitEpoch(ctx)
		return
	}
	for _, pid := range targets {
		ctx.Send(pid, &messages.Flush{Gen: c.life.gen, Epoch: c.cur.epoch})
	}
}

// commitEpoch makes the epoch durable: DLQ acknowledged, then one commit.
func (c *committer) commitEpoch(ctx actor.Context) {
	es := c.cur
	if es.err != nil {
		c.failEpoch(ctx, fmt.Sprintf("epoch %d: %v", es.epoch, es.err), recordFault(es.err))
		return
	}
	if moved := c.movedPartitions(es); len(moved) > 0 {
		c.cfg.metrics.Conflicts.Inc()
		c.abort(ctx, fmt.Sprintf("epoch %d dropped: another writer committed partitions %v since we began reading them", es.epoch, moved), true)
		return
	}
	c.life.flushed(ctx, es.active, es.idle)
	letters := es.deadLetters()
	for i := range letters {
		letters[i].TopicID = c.snap.Metadata().Configuration[ledger.TopicIDProperty(c.cfg.app, letters[i].Topic)]
	}
	var ec *epochCommit
	if refresh := c.staleTxns(es); !es.empty() || len(refresh) > 0 {
		commit := newEpochCommit(es, c.cfg.app, c.cfg.pipeline.buffer.upsert, refresh, time.Now())
		ec = &commit
	}
	write := epochWrite{writer: c.writer, ctx: c.ctx, snap: c.snap, letters: letters, commit: ec,
		progress: c.cfg.progress, onDLQRetry: c.dlqRetrying(es.epoch, len(letters)), onCommitRetry: c.storageRetrying("commit")}
	// Resolving upserts holds a map of the epoch's keys until the commit:
	// counted, so that the next epoch's reading waits for room instead of
	// piling up beside it past the budget.
	var resolving int64
	if ec != nil && ec.upserts != nil {
		resolving = ec.upserts.ResolveMemory()
		c.cfg.budget.Add(c.life.gen, resolving)
	}
	gen := c.life.gen
	c.offActor(ctx, func() func(actor.Context) {
		out := write.run()
		return func(ctx actor.Context) {
			c.cfg.budget.Release(gen, resolving)
			c.epochWritten(ctx, es, ec, out)
		}
	})
}

// dlqRetrying reports a failed DLQ publish of an epoch's letters: the
// commit waits (the epoch's bad records must be stored first), at most the
// retry policy's maxElapsed; then the epoch is dropped and re-read. Said in
// the log, /readyz and a metric. Safe off the actor.
func (c *committer) dlqRetrying(epoch uint64, letters int) func(int, error) {
	waitStart := time.Now()
	return func(attempt int, err error) {
		c.cfg.metrics.retrying(componentNATS)
		c.cfg.health.Degrade("nats", err.Error())
		if bridge.IsFull(err) {
			c.dlqFull(epoch, err)
		}
		c.cfg.metrics.DLQWaiting.Set(float64(letters))
		c.cfg.logger.Warn("epoch waits for the DLQ to acknowledge", "epoch", epoch, "records", letters,
			"attempt", attempt+1, "waited", time.Since(waitStart).Round(time.Second), "max_wait", c.cfg.retry.maxElapsed, "err", err)
	}
}

// epochWritten applies the outcome of the current epoch's write, on the
// actor: what failed aborts, what committed advances the offsets and is
// reported.
func (c *committer) epochWritten(ctx actor.Context, es *epochState, ec *epochCommit, out epochOutcome) {
	c.cfg.progress.committing.Store(false)
	if len(es.deadLetters()) > 0 {
		c.cfg.metrics.DLQWaiting.Set(0)
		if out.dlq != nil {
			c.failEpoch(ctx, fmt.Sprintf("epoch %d: %v", es.epoch, out.dlq), recordFault(out.dlq))
			return
		}
		c.cfg.health.Recover("nats")
	}
	// The DLQ holds up nothing now (this epoch's letters are stored, or it
	// has none: a partition whose letters waited may have moved away).
	c.cfg.health.Accept(healthDLQFull)
	c.cfg.metrics.DLQFull.Set(0)
	if ec == nil {
		c.finishEpoch(ctx, nil)
		return
	}
	res := out.commit
	switch {
	case res.conflict != nil:
		c.cfg.metrics.Conflicts.Inc()
		c.abort(ctx, fmt.Sprintf("epoch %d dropped: %v", es.epoch, res.conflict), true)
		return
	case res.err != nil:
		c.abort(ctx, fmt.Sprintf("epoch %d: %v", es.epoch, res.err), true)
		return
	}
	version := res.version
	c.cfg.health.Recover("storage")
	for p, off := range es.offsets() {
		c.base[p] = off + 1
	}
	c.cfg.progress.setCommitted(c.base)
	c.cfg.progress.committedNow(out.committed)
	c.afterCommit(es, version, ec.rows, ec.bytes, out.committed, out.took)
	c.cfg.metrics.StaleChanges.Add(float64(ec.stale))
	if out.checkpointed {
		if err := c.checkpointed(ctx, version, out.checkpoint); err != nil {
			// The snapshot now holds the log's state, which is not what
			// this writer committed: re-read every partition from the
			// log's offsets.
			c.abort(ctx, err.Error(), true)
			return
		}
	}
	if len(es.offsets()) > 0 {
		c.faults = 0
	}
	c.finishEpoch(ctx, nil)
	if p, isolating := c.isolatedPartition(); isolating {
		if _, step := es.offsets()[p]; step {
			c.isolationCommitted(ctx)
		}
	}
}

// isolatedPartition is the partition an isolation searches, if one runs.
func (c *committer) isolatedPartition() (tp, bool) {
	if c.isolate == nil {
		return tp{}, false
	}
	return c.isolate.parts[0], true
}

// failEpoch aborts the epochs after a failure; fault says the failure
// follows the records read (recordFault), so reading them again fails the
// same way. The second such abort in a row with nothing committed between
// starts an isolation (see isolation); during one, a fault narrows the
// search. Any other failure is retried as it is.
func (c *committer) failEpoch(ctx actor.Context, reason string, fault bool) {
	switch {
	case !fault:
	case c.isolate != nil:
		if c.isolate.failed() {
			c.cfg.logger.Error("isolating a failing record: its dead letter is refused even without key and value; retrying the epoch as a whole",
				"reason", reason)
			c.isolate, c.faults = nil, 0
		}
	default:
		if c.faults++; c.faults >= isolateAfter {
			c.isolate = newIsolation("isolated as the record every epoch holding it failed on: "+reason, c.suspectRanges())
			if c.isolate != nil {
				c.cfg.logger.Warn("epochs keep failing on what they read: isolating the record by bisecting the range read",
					"partitions", c.isolate.parts, "reason", reason)
			}
		}
	}
	c.abort(ctx, reason, true)
}

// suspectRanges are, per owned partition not held, the offsets read and
// not committed: from the table's next offset to the fetch position.
func (c *committer) suspectRanges() map[tp][2]int64 {
	pos := c.cfg.fetch.position(c.cfg.sink)
	out := map[tp][2]int64{}
	for _, p := range c.partitions() {
		if next, ok := pos[p]; ok && !c.held[p] {
			out[p] = [2]int64{c.base[p], next - 1}
		}
	}
	return out
}

// isolationCommitted moves the isolation on after a commit during it, and
// rebuilds the pipeline for its next step (or, once it is over, to read
// every partition again without limits).
func (c *committer) isolationCommitted(ctx actor.Context) {
	p := c.isolate.parts[0]
	culprit := c.isolate.culprit()
	if c.isolate.committed(c.base[p]) {
		if culprit {
			c.cfg.logger.Warn("isolated the record epochs kept failing on: dead-lettered", "partition", p, "offset", c.base[p]-1)
		} else {
			c.cfg.logger.Warn("isolation found no record at fault: the failure follows something else; retrying as before")
		}
		c.isolate, c.faults = nil, 0
	}
	c.abort(ctx, "isolation step committed", false)
}

// recordFault reports whether err follows the records that caused it, so
// that re-reading them fails the same way: a key the store refuses (a
// partition directory it cannot take) or a dead letter the DLQ refuses as
// too large. Panics in readers and buffers count too (failEpoch's callers
// say so). Transient errors, a full DLQ, refused credentials and every
// error nobody classified are not: cutting an epoch down for them would
// dead-letter good records.
func recordFault(err error) bool {
	return storage.IsKeyRejected(err) || bridge.IsTooLarge(err)
}

// healthDLQFull is the Health key of a DLQ stream without room.
const healthDLQFull = "dlq"

// dlqFull reports that the DLQ stream refuses the letters of epoch for want
// of room (bridge.IsFull): no retry soon cures that, but making room does,
// without a restart, so the epoch keeps waiting (retried as any DLQ
// failure) while /healthz and deltaflow_dlq_full tell a human what to do.
// An epoch that gets past its letters clears it.
func (c *committer) dlqFull(epoch uint64, err error) {
	c.cfg.metrics.DLQFull.Set(1)
	first, _, _ := strings.Cut(err.Error(), "\n") // one line per letter follows
	todo := "read the letters and purge them (nats stream purge), or raise nats.dlq_max_bytes or the server's JetStream store"
	if errors.Is(err, bridge.ErrStoreFailed) {
		// A purge fails too: the store refuses every write.
		todo = "make room on the disk of the JetStream store named below"
	}
	c.cfg.health.Refuse(healthDLQFull, fmt.Sprintf("the DLQ stream is full: epoch %d waits uncommitted with its dead letters "+
		"(nothing is lost; its records stay in Kafka); %s, and it commits by itself: %s", epoch, todo, first))
}

// checkpointed reports the checkpoint of version, written with err (see
// epochWrite). A failure only costs time (the next checkpoint covers it) and
// is logged; the error returned is the log differing from the snapshot
// (delta.ErrSnapshotDiverged): a commit of ours was lost or another
// writer's misread, so the offsets this writer holds cannot be trusted.
func (c *committer) checkpointed(ctx actor.Context, version int64, err error) error {
	switch {
	case errors.Is(err, delta.ErrSnapshotDiverged):
		c.cfg.logger.Error("the log differs from what this writer committed (another writer on a store without "+
			"atomic put-if-absent?); checkpoint written from the log", "version", version, "err", err)
	case err != nil:
		c.cfg.metrics.Errors.WithLabelValues(componentStorage).Inc()
		c.cfg.logger.Warn("checkpoint failed; the next one will cover it", "version", version, "err", err)
		return nil
	}
	c.cfg.outbox.Publish(&bridge.CheckpointEvent{Version: version})
	if c.cfg.maintenance != nil {
		ctx.Send(c.cfg.maintenance, &checkpointed{}) // log cleanup follows checkpoints
	}
	return err
}

// movedPartitions returns the partitions of the epoch whose committed offset
// in the snapshot is no longer the one we began reading from. Commit checks
// the versions after the snapshot; this covers those the snapshot absorbed
// (our earlier commits replaying other writers', a re-read on assignment).
func (c *committer) movedPartitions(es *epochState) []tp {
	var moved []tp
	read := map[tp]int64{}
	for p := range es.offsets() {
		read[p] = c.base[p]
	}
	for topic, parts := range ledger.ByTopic(read) {
		for _, p := range ledger.Moved(c.snap, c.cfg.app, topic, parts) {
			moved = append(moved, tp{Topic: topic, Partition: p})
		}
	}
	slices.SortFunc(moved, ledger.CompareTP)
	return moved
}

// staleTxns are the txns of the owned partitions this epoch does not
// advance to refresh with it (ledger.Stale): committed with the epoch, or
// alone when the epoch is empty, they keep an idle partition's offset from
// expiring.
func (c *committer) staleTxns(es *epochState) []delta.Txn {
	var out []delta.Txn
	advanced, base := ledger.ByTopic(es.offsets()), ledger.ByTopic(c.base)
	now := time.Now()
	for topic, owned := range byTopic(c.partitions()) {
		out = append(out, ledger.Stale(c.snap, c.cfg.app, topic, owned, advanced[topic], base[topic], now)...)
	}
	return out
}

// afterCommit does what follows a commit that landed at at: KV mirror,
// Kafka group offsets, events and metrics. None of it affects correctness.
func (c *committer) afterCommit(es *epochState, version, rows, bytes int64, at time.Time, took time.Duration) {
	m := c.cfg.metrics
	m.Commits.Inc()
	m.Rows.Add(float64(rows))
	m.Files.Add(float64(len(es.files)))
	m.Bytes.Add(float64(bytes))
	m.CommitLatency.Observe(took.Seconds())
	m.EpochDuration.Observe(at.Sub(es.started).Seconds())
	m.TableVersion.Set(float64(version))
	m.LastCommit.Set(float64(at.UnixMilli()) / 1e3)
	m.committedFiles(es.files, c.cfg.eventTime)
	offsets := es.offsets()
	for p, off := range offsets {
		c.cfg.outbox.MirrorOffset(p.Topic, p.Partition, off, version)
	}
	c.cfg.group.committed(c.cfg.sink, c.base)
	c.cfg.outbox.Publish(&bridge.FlushEvent{Epoch: es.epoch, Reason: string(es.reason), Files: len(es.files), Rows: rows, Bytes: bytes,
		DurationMS: at.Sub(es.started).Milliseconds() - took.Milliseconds()})
	ev := &bridge.CommitEvent{Version: version, Epoch: es.epoch, Files: len(es.files), Rows: rows,
		Bytes: bytes, Topics: ledger.ByTopic(offsets), DurationMS: at.Sub(es.started).Milliseconds()}
	if len(ev.Topics) == 1 {
		for topic, parts := range ev.Topics {
			ev.Topic, ev.Partitions = topic, parts
		}
	}
	c.cfg.outbox.Publish(ev)
	c.cfg.logger.Info("committed", "version", version, "epoch", es.epoch, "files", len(es.files), "rows", rows,
		"records", es.records(), "dlq", len(es.deadLetters()), "took", took.Round(time.Millisecond))
}

// finishEpoch ends the current epoch and answers its CommitNow waiters;
// requests that arrived meanwhile start the next epoch at once (their rows
// were read after this epoch was sealed).
func (c *committer) finishEpoch(ctx actor.Context, err error) {
	c.cfg.progress.epochDone()
	if c.cur != nil {
		c.cfg.budget.Release(c.life.gen, c.cur.letterMemory()) // stored in the DLQ, or nothing to store
		c.cfg.budget.EpochDone()
		c.cur = nil
	}
	next, reason := c.sched.finished(err)
	c.runRechecks(ctx)
	if next && c.life.running() {
		c.sealEpoch(ctx, reason)
	}
}

// dropEpoch forgets the current epoch (aborted, or lost with a restart);
// its CommitNow waiters wait for the next one, which says the dropped
// epoch's reason unless a request already named it.
func (c *committer) dropEpoch() {
	var reason messages.Reason
	if c.cur != nil {
		c.cfg.budget.EpochDone()
		reason = c.cur.reason
		c.cur = nil
	}
	c.sched.dropped(reason)
}

// abort drops every uncommitted epoch: the pipeline is thrown away, the
// snapshot re-read, Kafka re-seeked to the committed offsets and a new
// generation built (after a backoff when a failure caused it).
func (c *committer) abort(ctx actor.Context, reason string, failure bool) {
	c.abortWith(ctx, reason, failure, nil)
}

// abortWith is abort with work done off the actor before the log is
// re-read (a schema evolution's commit); what the work returns is applied
// on the actor before the next generation is built. The work failing is
// the log's re-read failing.
func (c *committer) abortWith(ctx actor.Context, reason string, failure bool, before func(context.Context) (func(), error)) {
	c.cfg.logger.Warn("aborting in-flight epochs", "reason", reason, "generation", c.life.gen)
	c.dropEpoch()
	delay := c.life.drop(ctx, reason, failure)
	// The log is re-read off the actor; what comes meanwhile from the
	// dropped generation waits, and is then ignored.
	ctx2, snap := c.ctx, c.snap
	c.offActor(ctx, func() func(actor.Context) {
		var apply func()
		var err error
		if before != nil {
			apply, err = before(ctx2)
		}
		if err == nil {
			err = c.cfg.table.Update(ctx2, snap)
		}
		return func(ctx actor.Context) {
			if err != nil {
				// Without the log's state no generation can be built, so a
				// storage blip here restarts the committer rather than being
				// retried in place: its guardian (restartStrategy) restarts
				// it after the capped, growing backoff, and start re-reads
				// the table (with retries) before building the next
				// pipeline. The waiters stay queued across the restart.
				panic(fmt.Errorf("committer: re-read table after abort: %w", err))
			}
			if apply != nil {
				apply()
			}
			c.life.rebuildAfter(ctx, delay)
		}
	})
}

// refused reports whether EnsureSchema's err is the table refusing a
// schema change, which no retry changes.
func refused(err error) bool {
	_, change := errors.AsType[*delta.SchemaChangeError](err)
	_, feature := errors.AsType[*delta.FeatureNotEnabledError](err)
	_, parts := errors.AsType[*delta.PartitioningError](err)
	return change || feature || parts
}

// schemaChanged is a reader's news that the record it stopped at is
// written with a schema whose new fields make new columns
// (mapping.SchemaChangeError).
type schemaChanged struct {
	gen uint64
	id  int
	add []mapping.Column
}

// evolve adds a schema's new columns to the table: the generation is
// dropped (what it read is read again), the table's schema evolved in a
// commit of its own, and the next generation maps with the evolved
// mapping, from the record that brought the change on. A failure to
// commit the schema restarts the committer, whose pipeline meets the
// change again.
func (c *committer) evolve(ctx actor.Context, m *schemaChanged) {
	mapper, err := c.cfg.pipeline.mapper.Evolved(m.add)
	if err != nil {
		c.abort(ctx, fmt.Sprintf("schema id %d: evolve the mapping: %v", m.id, err), true)
		return
	}
	names := make([]string, len(m.add))
	for i, col := range m.add {
		names[i] = col.Name
	}
	c.cfg.logger.Info("schema evolution: the writer schema adds or widens columns", "schema_id", m.id, "columns", names)
	table, pipelineOf, current := c.cfg.table, c.cfg.pipelineOf, c.cfg.pipeline.mapper
	c.abortWith(ctx, fmt.Sprintf("schema id %d adds or widens columns %v", m.id, names), false, func(ctx context.Context) (func(), error) {
		snap, _, err := table.EnsureSchema(ctx, mapper.Schema(), mapper.PartitionColumns(), nil)
		if refused(err) {
			// The table will not take these columns (a feature it lacks,
			// a type it holds otherwise): no retry would commit them, so
			// the schema's records are dead letters, and the others go on
			// with the table's columns.
			c.cfg.logger.Warn("schema evolution refused by the table: the schema's records are dead letters", "schema_id", m.id, "err", err)
			current.Refuse(m.id, fmt.Errorf("the table refuses its columns %v: %w", names, err))
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("add columns %v of schema id %d: %w", names, m.id, err)
		}
		schema, err := snap.Schema()
		if err != nil {
			return nil, err
		}
		pcfg, err := pipelineOf(mapper, schema)
		if err != nil {
			return nil, err
		}
		return func() { c.cfg.pipeline = pcfg }, nil
	})
}
