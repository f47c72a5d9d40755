package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/deltaflow/deltaflow/actors"
	"github.com/deltaflow/deltaflow/bridge"
)

// ErrStalled is returned by Run when the stall watchdog ended it: records
// waited in Kafka and no epoch committed for too long. The process exits
// non-zero so that its restart policy starts a fresh one.
var ErrStalled = errors.New("stalled: no epoch committed while records wait; exiting for a fresh process")

// watchdogKeep is how many exits the KV bucket remembers.
const watchdogKeep = 8

// verdict is what the stall watchdog concludes from one observation.
type verdict int

const (
	healthy verdict = iota // committing, or nothing waits
	stalled                // stalled, within the grace period (or the exit is deferred)
	exitNow                // stalled past the grace period, nothing in flight, backoff respected
)

// stallWatch is the stall watchdog's logic, a plain type driven by
// observations: records waiting for stallAfter with no commit meanwhile
// (measured from the later of the last commit and when they were first
// seen waiting, on the monotonic clock), or the pipeline failing at its
// backoff cap that long, is a stall; a stall lasting grace
// exits, but never while a commit is in flight, and never sooner after the
// previous exit (of any process of the table, as recorded in the KV bucket)
// than the restart backoff: backoff.Initial doubling per recent exit up to
// backoff.Max.
type stallWatch struct {
	stallAfter time.Duration
	grace      time.Duration
	backoff    actors.Backoff

	since  time.Time // when the current stall was first seen; zero: none
	reason string
	// waitingSince is when records were first seen waiting (unpaused)
	// since nothing last waited: after an idle or paused spell, the
	// wait is measured from there, not from a commit long before.
	waitingSince time.Time
}

// observe judges p at now. exits are the recorded exits, oldest first (only
// consulted once a stall outlasts the grace period); notBefore is when an
// exit will be allowed, for a deferred one.
func (w *stallWatch) observe(now time.Time, p actors.Progress, exits func() []time.Time) (v verdict, notBefore time.Time) {
	switch {
	case p.Paused || p.Uncommitted == 0:
		w.waitingSince = time.Time{}
	case p.Uncommitted > 0 && w.waitingSince.IsZero():
		w.waitingSince = now
	}
	reason := ""
	switch idle := now.Sub(latest(p.LastCommit, w.waitingSince)); {
	case p.Paused:
		// Paused by the control service: records wait on purpose.
	case p.Uncommitted > 0 && idle >= w.stallAfter:
		reason = fmt.Sprintf("%d records wait in Kafka and no epoch committed for %s", p.Uncommitted, idle.Round(time.Second))
	case !p.FailingSince.IsZero() && now.Sub(p.FailingSince) >= w.stallAfter:
		reason = fmt.Sprintf("the pipeline has kept failing at its backoff cap since %s", p.FailingSince.UTC().Format(time.RFC3339))
	}
	if reason == "" {
		w.since, w.reason = time.Time{}, ""
		return healthy, time.Time{}
	}
	if w.since.IsZero() {
		w.since = now
	}
	w.reason = reason
	if now.Sub(w.since) < w.grace || p.Committing {
		return stalled, time.Time{}
	}
	notBefore = w.exitNotBefore(now, exits())
	if now.Before(notBefore) {
		return stalled, notBefore
	}
	return exitNow, notBefore
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// exitNotBefore is the earliest exit the restart backoff allows after the
// recorded exits: those within the last 4 × backoff.Max count as one loop.
func (w *stallWatch) exitNotBefore(now time.Time, exits []time.Time) time.Time {
	recent := 0
	var last time.Time
	for _, at := range exits {
		if now.Sub(at) < 4*w.backoff.Max {
			recent++
			last = at
		}
	}
	if recent == 0 {
		return time.Time{}
	}
	return last.Add(w.backoff.Delay(recent - 1))
}

// progressSource is what the watchdog watches: the engine.
type progressSource interface {
	Progress(ctx context.Context) actors.Progress
}

// watchdogDeps are what the watchdog loop watches and reports to.
type watchdogDeps struct {
	engine  progressSource
	bridge  *bridge.Bridge
	metrics *actors.Metrics
	ready   *readiness
	logger  *slog.Logger
	stop    context.CancelCauseFunc // ends Run with ErrStalled
}

// runWatchdog observes the engine every check until ctx ends or it stops
// Run over a stall.
func runWatchdog(ctx context.Context, w *stallWatch, check time.Duration, d watchdogDeps) {
	t := time.NewTicker(check)
	defer t.Stop()
	deferredUntil := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, check)
		p := d.engine.Progress(pctx)
		cancel()
		publishLag(d.bridge, p.Lag, time.Now())
		wasStalled := !w.since.IsZero()
		exits := func() []time.Time {
			rec, err := d.bridge.WatchdogExits(ctx)
			if err != nil {
				d.logger.Warn("watchdog: recorded exits unreadable; exiting without the restart backoff", "err", err)
			}
			return rec.Exits
		}
		v, notBefore := w.observe(time.Now(), p, exits)
		if v != healthy {
			// Each check, so that /healthz and /readyz tell how long.
			reason := w.reason
			d.ready.stalled.Store(&reason)
		}
		ev := &bridge.StalledEvent{Reason: w.reason, Since: w.since, LastCommit: p.LastCommit, Uncommitted: p.Uncommitted,
			ExitNotBefore: notBefore}
		switch {
		case v == healthy:
			if wasStalled {
				d.logger.Info("watchdog: the stall is over")
				d.metrics.Stalled.Set(0)
				d.ready.stalled.Store(nil)
			}
			deferredUntil = time.Time{}
		case v == stalled && !wasStalled:
			d.logger.Error("watchdog: stalled", "reason", w.reason, "exit_after", w.grace)
			d.metrics.Stalled.Set(1)
			_ = d.bridge.Publish(ev)
		case v == stalled && !notBefore.IsZero() && !notBefore.Equal(deferredUntil):
			deferredUntil = notBefore
			d.logger.Warn("watchdog: stalled past the grace period; the restart backoff defers the exit",
				"reason", w.reason, "exit_not_before", notBefore)
			_ = d.bridge.Publish(ev)
		case v == exitNow:
			if err := d.bridge.RecordWatchdogExit(ctx, time.Now(), watchdogKeep); err != nil {
				d.logger.Warn("watchdog: exit not recorded in the KV bucket", "err", err)
			}
			ev.Exiting = true
			_ = d.bridge.Publish(ev)
			d.logger.Error("watchdog: stalled past the grace period; exiting so the restart policy starts a fresh process",
				"reason", w.reason, "since", w.since)
			d.stop(fmt.Errorf("%w (%s)", ErrStalled, w.reason))
			return
		}
	}
}

// publishLag publishes a lag event per table and topic.
func publishLag(b *bridge.Bridge, lags []actors.TableLag, now time.Time) {
	for _, l := range lags {
		byTopic := map[string]*bridge.LagEvent{}
		for p, n := range l.Uncommitted {
			ev := byTopic[p.Topic]
			if ev == nil {
				ev = &bridge.LagEvent{Topic: p.Topic, Partitions: map[int32]int64{}}
				byTopic[p.Topic] = ev
			}
			ev.Partitions[p.Partition] = n
			ev.Total += n
		}
		tb := b.Table(l.Table)
		for _, ev := range byTopic {
			if ev.Total > 0 {
				ev.Seconds = math.Round(now.Sub(l.LastCommit).Seconds()*10) / 10
			}
			_ = tb.Publish(ev)
		}
	}
}
