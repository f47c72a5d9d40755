package bridge

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/deltaflow/deltaflow/internal/failpoint"
)

// mirrorKey identifies one partition in the mirror.
type mirrorKey struct {
	topic     string
	partition int32
}

// OffsetMirror keeps the KV offsets mirror up to date without ever blocking
// the committer: Update records the latest OffsetRecord per partition and a
// background goroutine writes it, retrying with capped backoff while NATS is
// down, so the mirror catches up after an outage. Memory is bounded by the
// number of partitions: a newer record replaces a pending older one, which
// is never written (latest-wins, like the KV itself).
type OffsetMirror struct {
	put    func(ctx context.Context, topic string, partition int32, rec OffsetRecord) error
	logger *slog.Logger
	base   time.Duration // first retry delay
	limit  time.Duration // retry delay cap

	mu      sync.Mutex
	pending map[mirrorKey]OffsetRecord
	idle    chan struct{} // closed while pending is empty
	wake    chan struct{} // 1-buffered: new work
	stop    context.CancelFunc
	done    chan struct{}
}

func newOffsetMirror(put func(context.Context, string, int32, OffsetRecord) error, logger *slog.Logger, base, limit time.Duration) *OffsetMirror {
	ctx, cancel := context.WithCancel(context.Background())
	idle := make(chan struct{})
	close(idle)
	m := &OffsetMirror{
		put: put, logger: logger, base: base, limit: limit,
		pending: make(map[mirrorKey]OffsetRecord),
		idle:    idle,
		wake:    make(chan struct{}, 1),
		stop:    cancel,
		done:    make(chan struct{}),
	}
	go m.run(ctx)
	return m
}

// Update schedules rec as the mirrored offset of topic/partition and returns
// at once.
func (m *OffsetMirror) Update(topic string, partition int32, rec OffsetRecord) {
	m.mu.Lock()
	if len(m.pending) == 0 {
		m.idle = make(chan struct{})
	}
	m.pending[mirrorKey{topic, partition}] = rec
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Pending returns how many partitions wait to be written.
func (m *OffsetMirror) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}

// Flush waits until every record given to Update so far (or a newer one for
// the same partition) is written, or ctx is done.
func (m *OffsetMirror) Flush(ctx context.Context) error {
	m.mu.Lock()
	idle := m.idle
	m.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close stops the background writer; pending records are dropped.
func (m *OffsetMirror) close() {
	m.stop()
	<-m.done
}

func (m *OffsetMirror) run(ctx context.Context) {
	defer close(m.done)
	timer := time.NewTimer(0)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		}
		// Retry whatever is still pending after a capped exponential
		// delay until everything is written; Updates meanwhile only
		// replace what the next attempt writes.
		for delay := m.base; !m.writeAll(ctx); delay = min(2*delay, m.limit) {
			timer.Reset(delay)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
	}
}

// writeAll writes a snapshot of the pending records and reports whether all
// writes succeeded.
func (m *OffsetMirror) writeAll(ctx context.Context) bool {
	m.mu.Lock()
	batch := make(map[mirrorKey]OffsetRecord, len(m.pending))
	for k, v := range m.pending {
		batch[k] = v
	}
	m.mu.Unlock()

	ok := true
	for k, rec := range batch {
		if err := m.put(ctx, k.topic, k.partition, rec); err != nil {
			if ctx.Err() == nil {
				m.logger.Debug("offsets mirror write failed; will retry", "topic", k.topic, "partition", k.partition, "err", err)
			}
			ok = false
			continue
		}
		failpoint.Hit(failpoint.Mirror)
		m.mu.Lock()
		// Drop it only if no newer record arrived meanwhile.
		if cur, found := m.pending[k]; found && cur == rec {
			delete(m.pending, k)
			if len(m.pending) == 0 {
				close(m.idle)
			}
		}
		m.mu.Unlock()
	}
	return ok
}
