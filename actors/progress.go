package actors

import (
	"context"
	"maps"
	"sync/atomic"
	"time"
)

// Progress is what the engine tells a stall watchdog: whether epochs still
// commit while records wait.
type Progress struct {
	// Table is the table it is of (the engine's most stalled).
	Table string
	// LastCommit is the table's last commit; the engine's start until the
	// first. It carries its monotonic clock reading: measure with it.
	LastCommit time.Time
	// Committing is true while a commit, or the checkpoint and mirror
	// updates that follow it, is in flight: never the moment to exit.
	Committing bool
	// Uncommitted is the number of records in Kafka (up to the high
	// watermarks) the table does not hold for the owned partitions, but
	// for those held for data loss (a restart would not read them either);
	// -1 when the watermarks are unknown (Kafka unreachable).
	Uncommitted int64
	// FailingSince is when the pipeline started failing with its rebuild
	// backoff at the cap; zero when it is not.
	FailingSince time.Time
	// Paused is true while the control service has paused reading: records
	// wait on purpose.
	Paused bool
	// Lag is every table's: what the lag events say. Empty when the
	// watermarks are unknown.
	Lag []TableLag
}

// TableLag is how far one table is behind its topics.
type TableLag struct {
	Table string
	// Uncommitted is, per owned partition not held for data loss, the
	// records in Kafka the table does not hold.
	Uncommitted map[tp]int64
	// LastCommit is the table's last commit (its start until the first).
	LastCommit time.Time
}

// progress is the committer's side of Progress, written by the committer
// and read from any goroutine.
type progress struct {
	lastCommit   atomic.Pointer[time.Time] // with its monotonic reading: stalls are measured with it
	committing   atomic.Bool
	failingSince atomic.Int64                 // Unix nanoseconds; 0 when not failing at the cap
	committed    atomic.Pointer[map[tp]int64] // next offset per owned partition, -1: none yet
	// held are the partitions held for data loss: their records wait on
	// purpose (the engine says so on /healthz), not for a restart.
	held atomic.Pointer[map[tp]bool]
}

func newProgress(now time.Time) *progress {
	p := &progress{}
	p.lastCommit.Store(&now)
	empty := map[tp]int64{}
	p.committed.Store(&empty)
	p.held.Store(&map[tp]bool{})
	return p
}

// setHeld publishes the committer's held partitions.
func (p *progress) setHeld(held map[tp]bool) {
	c := maps.Clone(held)
	p.held.Store(&c)
}

// setCommitted publishes the committer's per-partition next offsets.
func (p *progress) setCommitted(next map[tp]int64) {
	c := maps.Clone(next)
	p.committed.Store(&c)
}

// failing records a pipeline failure; atCap says its backoff is at the
// cap (below it, the failures are not persistent yet).
func (p *progress) failing(atCap bool, now time.Time) {
	if !atCap {
		p.failingSince.Store(0)
		return
	}
	p.failingSince.CompareAndSwap(0, now.UnixNano())
}

// lastCommitAt is when the last commit landed; the engine's start
// before the first.
func (p *progress) lastCommitAt() time.Time { return *p.lastCommit.Load() }

// epochDone records an epoch that ended without a failure: the
// pipeline works, whether or not it had rows to commit.
func (p *progress) epochDone() { p.failingSince.Store(0) }

// committedNow records a commit that landed.
func (p *progress) committedNow(now time.Time) {
	p.lastCommit.Store(&now)
	p.failingSince.Store(0)
}

// Progress reports the engine's progress: of the table that looks most
// stalled (records waiting, and the oldest last commit), or of the first
// when none has records waiting. Uncommitted asks Kafka for the high
// watermarks (bounded by ctx), and updates deltaflow_uncommitted_records.
func (e *Engine) Progress(ctx context.Context) Progress {
	ends, endsErr := e.cons.EndOffsets(ctx)
	var worst Progress
	for i, t := range e.tables {
		p, lag := e.tableProgress(i, t, ends, endsErr)
		waiting := func(p Progress) bool { return p.Uncommitted != 0 }
		switch {
		case i == 0:
			worst = p
		case waiting(p) && (!waiting(worst) || p.LastCommit.Before(worst.LastCommit)):
			worst.Table, worst.LastCommit, worst.Uncommitted = p.Table, p.LastCommit, p.Uncommitted
		}
		worst.Committing = worst.Committing || p.Committing
		if !p.FailingSince.IsZero() && (worst.FailingSince.IsZero() || p.FailingSince.Before(worst.FailingSince)) {
			worst.FailingSince = p.FailingSince
		}
		if lag != nil {
			worst.Lag = append(worst.Lag, TableLag{Table: t.route.Name, Uncommitted: lag, LastCommit: p.LastCommit})
		}
	}
	return worst
}

// tableProgress is table i's Progress, and its records waiting per
// partition (nil when unknown); ends are the partitions' end offsets
// (unknown when endsErr).
func (e *Engine) tableProgress(i int, t *table, ends map[tp]int64, endsErr error) (Progress, map[tp]int64) {
	p := t.progress
	out := Progress{Table: t.route.Name, LastCommit: p.lastCommitAt(), Committing: p.committing.Load(),
		Uncommitted: -1, Paused: e.fetch.userPaused.Load()}
	if f := p.failingSince.Load(); f != 0 {
		out.FailingSince = time.Unix(0, f)
	}
	if endsErr != nil {
		return out, nil
	}
	out.Uncommitted = 0
	lag := map[tp]int64{}
	read := e.fetch.position(i)
	held := *p.held.Load()
	for part, next := range *p.committed.Load() {
		end, known := ends[part]
		if !known || held[part] {
			continue
		}
		var n int64
		switch pos, reading := read[part]; {
		case next >= 0:
			n = max(end-next, 0)
		case reading:
			// Nothing committed yet, but records were read: those wait,
			// and what lies beyond them.
			n = max(end-pos, 0) + 1
		default:
			// Nothing committed or read: where the partition starts
			// (retention, start_offset) is the consumer's to know, and
			// an empty partition must not look stalled.
			continue
		}
		t.metrics.Pending.WithLabelValues(part.Topic, partitionLabel(part.Partition)).Set(float64(n))
		out.Uncommitted += n
		lag[part] = n
	}
	waited := 0.0
	if out.Uncommitted > 0 {
		waited = time.Since(out.LastCommit).Seconds()
	}
	t.metrics.PendingSeconds.Set(waited)
	return out, lag
}
