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

	"github.com/deltaflow/deltaflow/ledger"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/messages"
)

// Consumer is what the engine needs of Kafka (a *kafka.Consumer): the
// fetch loop polls, pauses and seeks it; the committer commits the group
// offsets; Progress and CatchUp compare positions with the high watermarks.
type Consumer interface {
	OffsetCommitter
	Poll(ctx context.Context) ([]kafka.Batch, error)
	Pause(partitions ...int32)
	Resume(partitions ...int32)
	Seek(offsets map[int32]int64)
	Owned() []int32
	// EndOffsets is, per partition, the offset reading can reach now (the
	// last stable offset under read_committed).
	EndOffsets(ctx context.Context) (map[int32]int64, error)
	// Lag is, per owned partition, the offsets between the next one Poll
	// returns and the high watermark.
	Lag(ctx context.Context) (map[int32]int64, error)
	// TopicLogs is the topic's ID and its partitions' log ranges, asked of
	// the brokers now: the committer checks the table's offsets against
	// them.
	TopicLogs(ctx context.Context) (ledger.TopicLogs, error)
	Close()
}

// pollWait bounds one Poll: long, because a reset, Pause and Resume
// interrupt the poll (interruptPoll), so an idle topic costs no wake-ups of
// the loop. pausedPollWait bounds one Poll while the budget is exhausted,
// which only keeps the group membership alive between waits for the
// budget.
const (
	pollWait       = 5 * time.Second
	pausedPollWait = 10 * time.Millisecond
)

type resetRequest struct {
	gen     uint64
	offsets map[int32]int64
}

// fetcher is the poll loop: it hands each partition's records to the
// current generation's reader, and polls the next records while those are
// mapped and written; before it dispatches a poll it waits until the one
// before the last is written, so at most two polls of records are in flight.
// It pauses Kafka while the memory budget is exhausted, and re-seeks when
// the committer rebuilds the pipeline.
type fetcher struct {
	fetcherDeps

	mu      sync.Mutex
	pending *resetRequest
	wake    chan struct{}
	// cancelPoll ends the Poll in progress, if any (under mu).
	cancelPoll context.CancelFunc

	// Owned by the loop goroutine.
	gen       uint64
	positions map[int32]int64 // next offset to read, once known
	first     chan struct{}   // closed after the first successful poll
	firstOnce sync.Once
	// lagMeasured is when measureLag last asked for the lag.
	lagMeasured time.Time

	posMu   sync.Mutex
	posCopy map[int32]int64

	userPaused atomic.Bool // the control service's pause
	// userPauseDone is set by the loop once it has paused Kafka for
	// userPaused, so that Engine.Pause can return only then; looping
	// tells Pause whether the loop runs at all yet.
	userPauseDone, looping atomic.Bool
}

// fetcherDeps is the fetch loop's wiring.
type fetcherDeps struct {
	cons   Consumer
	reg    *registry
	budget *Budget
	system *actor.ActorSystem
	// committer is asked for an early epoch when the budget runs out.
	committer *actor.PID
	metrics   *Metrics
	logger    *slog.Logger
}

func newFetcher(d fetcherDeps) *fetcher {
	return &fetcher{fetcherDeps: d, wake: make(chan struct{}, 1), positions: map[int32]int64{}, first: make(chan struct{})}
}

// reset makes the loop drop what it has in flight and continue at offsets
// (-1: where the partition started) with generation gen. Safe from any
// goroutine; the latest request wins.
func (f *fetcher) reset(gen uint64, offsets map[int32]int64) {
	f.mu.Lock()
	f.pending = &resetRequest{gen: gen, offsets: offsets}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
	f.interruptPoll()
}

// interruptPoll ends the Poll in progress so that the loop looks at a
// reset or a pause/resume now rather than when the poll times out. Safe
// from any goroutine.
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
	if errors.Is(err, context.Canceled) && ctx.Err() == nil {
		err = nil // interrupted on purpose
	}
	return batches, err
}

// applyReset applies a pending reset and reports whether there was one.
func (f *fetcher) applyReset() bool {
	f.mu.Lock()
	r := f.pending
	f.pending = nil
	f.mu.Unlock()
	if r == nil {
		return false
	}
	f.gen = r.gen
	f.cons.Seek(r.offsets)
	for p, off := range r.offsets {
		if off >= 0 {
			f.positions[p] = off
		} else {
			delete(f.positions, p)
		}
	}
	f.publishPositions()
	return true
}

// run polls until ctx ends. It starts once the committer has loaded the
// table and set the first generation: records polled before that would
// have no reader to go to.
func (f *fetcher) run(ctx context.Context) error {
	select {
	case <-f.wake:
	case <-ctx.Done():
		return ctx.Err()
	}
	paused := false
	f.looping.Store(true)
	var inFlight *polled // dispatched, not yet written
	for ctx.Err() == nil {
		if f.applyReset() {
			inFlight = nil // the old generation's readers may never answer
		}
		exhausted := f.budget.Exhausted()
		if exhausted || f.userPaused.Load() {
			if !paused {
				owned := f.cons.Owned()
				f.cons.Pause(owned...)
				paused = true
				f.metrics.FetchPaused.Set(1)
				reason := "control"
				if !f.userPaused.Load() {
					reason = string(messages.ReasonMemoryBudget)
					f.system.Root.Send(f.committer, &messages.CommitNow{Reason: messages.ReasonMemoryBudget})
				}
				f.logger.Debug("kafka fetching paused", "reason", reason, "partitions", owned)
			}
		} else if paused {
			owned := f.cons.Owned()
			f.cons.Resume(owned...)
			paused = false
			f.metrics.FetchPaused.Set(0)
			f.logger.Debug("kafka fetching resumed", "partitions", owned)
		}
		f.userPauseDone.Store(paused && f.userPaused.Load())
		wait := pollWait
		if exhausted && !f.userPaused.Load() {
			// A commit can free the budget at any moment: wait for that,
			// not for a poll of paused partitions to time out.
			waitCtx, cancel := context.WithTimeout(ctx, pollWait)
			room := f.budget.Wait(waitCtx)
			cancel()
			if room {
				continue // resume at once
			}
			// Still full after a whole wait: the rows that came after the
			// last seal may fill the budget on their own, and only another
			// epoch frees them (the committer runs it after the current
			// one when it is busy).
			f.system.Root.Send(f.committer, &messages.CommitNow{Reason: messages.ReasonMemoryBudget})
			wait = pausedPollWait
		}
		// A reset (a rebuilt pipeline), Pause or Resume interrupts the
		// poll; while paused, polling still keeps the group membership
		// alive.
		batches, err := f.poll(ctx, wait)
		if paused {
			f.measureLag(ctx)
		}
		tooLarge, err := f.tooLarge(err)
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
		if inFlight != nil {
			f.wait(ctx, inFlight)
		}
		inFlight = next
		f.firstOnce.Do(func() { close(f.first) })
	}
	return ctx.Err()
}

// holdLost holds the partitions whose fetch says their offset left the log
// (OFFSET_OUT_OF_RANGE: franz-go stops them, as kafka.on_data_loss wants no
// silent reset) or their topic's ID is gone (UNKNOWN_TOPIC_ID: deleted,
// maybe created again), and asks the committer to check them against the
// log. The records polled with the error are dispatched as usual, before.
func (f *fetcher) holdLost(err error) {
	var lost []int32
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
		if !slices.Contains(lost, pe.Partition) {
			lost = append(lost, pe.Partition)
		}
	}
	if len(lost) == 0 {
		return
	}
	held := make(map[int32]int64, len(lost))
	for _, p := range lost {
		held[p] = ledger.Held
	}
	f.cons.Seek(held)
	f.system.Root.Send(f.committer, &recheckPartitions{partitions: lost, staleClient: stale})
}

// tooLarge takes the record batches Poll refused to decompress
// (kafka.BatchTooLargeError) out of err, by partition; the rest of err is
// returned. Such a batch is not a Kafka failure but hostile or oversized
// input, dead-lettered by dispatch.
func (f *fetcher) tooLarge(err error) (map[int32]*kafka.BatchTooLargeError, error) {
	if err == nil {
		return nil, nil
	}
	var found map[int32]*kafka.BatchTooLargeError
	var rest []error
	for _, e := range joined(err) {
		if tl, ok := errors.AsType[*kafka.BatchTooLargeError](e); ok {
			if found == nil {
				found = map[int32]*kafka.BatchTooLargeError{}
			}
			found[tl.Partition] = tl
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
// after it that Kafka refused to decompress, if any (tooLarge, emptied).
func (f *fetcher) dispatch(batches []kafka.Batch, tooLarge map[int32]*kafka.BatchTooLargeError) *polled {
	p := &polled{done: make(chan struct{}, len(batches)+len(tooLarge))}
	for _, b := range batches {
		if len(b.Records) == 0 {
			continue
		}
		skip := tooLarge[b.Partition]
		delete(tooLarge, b.Partition)
		if f.send(p, b.Partition, b.Records, skip) {
			last := b.Records[len(b.Records)-1].Offset
			f.metrics.Lag.WithLabelValues(partitionLabel(b.Partition)).Set(float64(max(0, b.HighWatermark-last-1)))
		}
	}
	for part, skip := range tooLarge {
		f.send(p, part, nil, skip)
	}
	f.publishPositions()
	return p
}

// send hands a partition's records, and the batch after them to skip, to
// its reader, and moves Kafka past the skipped batch; it reports whether
// there was a reader.
func (f *fetcher) send(p *polled, partition int32, records []*kgo.Record, skip *kafka.BatchTooLargeError) bool {
	pid := f.reg.reader(f.gen, partition)
	if pid == nil {
		// The pipeline is being rebuilt (its reset seeks back to the
		// committed offsets) or the partition was revoked. Either way
		// these records must not be skipped: rewind to them. (A skipped
		// batch is met again after the reset's seek.)
		if len(records) > 0 {
			f.cons.Seek(map[int32]int64{partition: records[0].Offset})
		}
		return false
	}
	fetch := &messages.Fetch{Gen: f.gen, Partition: partition, Records: records, Done: func() { p.done <- struct{}{} }}
	if len(records) > 0 {
		f.positions[partition] = records[len(records)-1].Offset + 1
	}
	if skip != nil {
		// Kafka stopped the partition at the batch; the reader records
		// the skip in its epoch (a dead letter and the txn past it).
		fetch.Skip = &messages.SkippedBatch{Offset: skip.Offset, LastOffset: skip.Next - 1, Reason: skip.Error()}
		f.cons.Seek(map[int32]int64{partition: skip.Next})
		f.positions[partition] = skip.Next
	}
	p.pending++
	f.system.Root.Send(pid, fetch)
	return true
}

// wait waits until p's rows are written, the pipeline is rebuilt, or ctx
// ends.
func (f *fetcher) wait(ctx context.Context, p *polled) {
	for ; p.pending > 0; p.pending-- {
		select {
		case <-p.done:
		case <-f.wake:
			// A rebuild: the old readers may never answer. Re-arm the
			// signal so the loop applies the reset first thing.
			f.rearm()
			return
		case <-ctx.Done():
			return
		}
	}
}

// rearm re-arms the wake signal consumed while waiting.
func (f *fetcher) rearm() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// position returns the next offset to read of each partition read so far.
func (f *fetcher) position() map[int32]int64 {
	f.posMu.Lock()
	defer f.posMu.Unlock()
	return maps.Clone(f.posCopy)
}

func (f *fetcher) publishPositions() {
	f.posMu.Lock()
	f.posCopy = make(map[int32]int64, len(f.positions))
	for p, o := range f.positions {
		f.posCopy[p] = o
	}
	f.posMu.Unlock()
}
