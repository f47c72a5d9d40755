package actors

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/messages"
)

// ErrCannotCatchUp is returned by CatchUp when the engine refuses part of
// its work until a human steps in (Health's refusals: a partition held, a
// full DLQ stream): it would never catch up, and a cron run must say why it
// did not, in the refusals' own words.
var ErrCannotCatchUp = errors.New("cannot catch up")

// catchUpPoll is how often CatchUp compares positions and commits with its
// targets.
const catchUpPoll = 50 * time.Millisecond

// CatchUp returns nil once the table holds every record that was in the
// owned partitions when the engine first owned some: the targets are the
// end offsets read then (the last stable offsets under read_committed). It commits as soon as everything is read
// rather than at the next flush interval, so a cron run (`run
// --until-latest`) ends promptly. It returns ctx's error if ctx ends first,
// and ErrCannotCatchUp (with the refusals) once the engine refuses part of
// its work, also while its flush waits. The engine keeps running: Stop it
// after.
func (e *Engine) CatchUp(ctx context.Context) error {
	tick := time.NewTicker(catchUpPoll)
	defer tick.Stop()
	wait := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			return nil
		}
	}
	for len(e.cons.Owned()) == 0 {
		if err := wait(); err != nil {
			return err
		}
	}
	var targets map[tp]int64
	for {
		var err error
		if targets, err = e.cons.EndOffsets(ctx); err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.deps.Logger.Warn("catch-up: high watermarks unavailable; retrying", "err", err)
		if err := wait(); err != nil {
			return err
		}
	}
	e.deps.Logger.Info("catch-up: reading up to the high watermarks", "targets", ledger.ByTopic(targets))
	// Commit as soon as everything is read, and again while each such
	// commit moves the offsets but leaves some uncommitted: a reader that
	// stopped for room in the memory budget maps the rest of its poll only
	// once an epoch's flush frees it. The flush runs beside the checks: an
	// epoch that waits (for room in a full DLQ) must not hide the refusal
	// that says why.
	flushCtx, cancelFlush := context.WithCancel(ctx)
	defer cancelFlush()
	var flushing chan error // the flush in flight, if any
	flushed := false
	var flushedAt map[tp]int64 // the committed offsets at the last flush
	emptySeen := map[tp]int{}  // consecutive checks a partition looked empty
	for {
		if err := wait(); err != nil {
			return err
		}
		if refused := e.deps.Health.Refusals(); len(refused) > 0 {
			return fmt.Errorf("%w: %s", ErrCannotCatchUp, strings.Join(refused, "; "))
		}
		select {
		case err := <-flushing:
			flushing = nil
			if err != nil && ctx.Err() == nil {
				e.deps.Logger.Warn("catch-up: flush failed; the timer will retry", "err", err)
			}
		default:
		}
		committed, err := e.Committed(ctx)
		if err != nil {
			e.deps.Logger.Debug("catch-up: committed offsets unavailable", "err", err)
			continue
		}
		done, read := e.caughtUp(ctx, targets, committed, emptySeen)
		if done {
			e.deps.Logger.Info("catch-up: caught up", "committed", ledger.ByTopic(committed))
			return nil
		}
		if read && flushing == nil && (!flushed || !maps.Equal(committed, flushedAt)) {
			flushed, flushedAt = true, committed
			flushing = make(chan error, 1)
			go func() { flushing <- e.commitNow(flushCtx, messages.ReasonCatchUp) }()
		}
	}
}

// caughtUp reports whether every owned partition is committed up to its
// target (done), and whether every one is at least read up to it (read).
// emptySeen counts, per partition, the consecutive checks it looked empty.
func (e *Engine) caughtUp(ctx context.Context, targets, committed map[tp]int64, emptySeen map[tp]int) (done, read bool) {
	pos := e.Position()
	var lag map[tp]int64
	done, read = true, true
	for _, p := range e.cons.Owned() {
		target := targets[p]
		c, ok := committed[p]
		if target <= 0 || (ok && c >= target) {
			continue
		}
		if _, reading := pos[p]; !reading && (!ok || c < 0) {
			// Nothing committed and nothing read: the partition may hold
			// nothing from its start offset on (start_offset latest, or
			// retention emptied it).
			if lag == nil {
				var err error
				if lag, err = e.cons.Lag(ctx); err != nil {
					lag = map[tp]int64{}
				}
			}
			// Twice in a row, so records just polled but not yet routed
			// (no position yet) do not pass for an empty log.
			if l, known := lag[p]; known && l == 0 {
				if emptySeen[p]++; emptySeen[p] >= 2 {
					continue
				}
			} else {
				emptySeen[p] = 0
			}
		}
		done = false
		if pos[p] < target {
			read = false
		}
	}
	return done, read
}
