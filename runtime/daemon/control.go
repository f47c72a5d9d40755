package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/deltaflow/deltaflow/actors"
	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/ledger"
)

// controller answers the NATS control service (bridge.Controller):
// `nats req deltaflow.<table>.control.status ”` and flush, pause, resume.
// A pause ends by itself after maxPause.
type controller struct {
	engine   *actors.Engine
	metrics  *actors.Metrics
	health   *actors.Health
	version  string
	table    string
	maxPause time.Duration
	publish  func(bridge.Event) error
	logger   *slog.Logger

	mu sync.Mutex
	// pausedAt is when the current pause began (zero: not paused); limit
	// resumes it at until.
	pausedAt, until time.Time
	limit           *time.Timer
}

func (c *controller) Status(ctx context.Context) (any, error) {
	committed, err := c.engine.Committed(ctx)
	if err != nil {
		return nil, err
	}
	degraded := c.health.Degraded()
	st := &bridge.StatusReply{
		Version: c.version, Table: c.table, TableVersion: int64(gaugeValue(c.metrics.TableVersion)),
		Committed: ledger.ByTopic(committed), Positions: ledger.ByTopic(c.engine.Position()), BufferedBytes: int64(gaugeValue(c.metrics.BufferedBytes)),
		Healthy: len(degraded) == 0, Degraded: degraded,
	}
	c.mu.Lock()
	if !c.pausedAt.IsZero() {
		until := c.until
		st.PausedUntil = &until
	}
	c.mu.Unlock()
	return st, nil
}

func (c *controller) Flush(ctx context.Context) error { return c.engine.CommitNow(ctx) }

// Pause pauses reading until Resume, or for d (0: maxPause, and no more)
// from the first pause: pausing again while paused does not extend it.
// Control requests are serialized, so a resume never slips in between.
func (c *controller) Pause(ctx context.Context, d time.Duration) error {
	by := bridge.ByDuration
	switch {
	case d > c.maxPause:
		return fmt.Errorf("%w: pause: duration %s is longer than control.max_pause (%s)", bridge.ErrBadRequest, d, c.maxPause)
	case d == 0:
		d, by = c.maxPause, bridge.ByMaxPause
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pausedAt.IsZero() {
		at := time.Now()
		c.pausedAt, c.until = at, at.Add(d)
		c.limit = time.AfterFunc(d, func() { c.resume(at, by) })
		c.logger.Warn("reading Kafka paused by the control service", "resumes_at", c.until)
		c.event(&bridge.PauseEvent{Action: bridge.Paused, By: bridge.ByControl, Until: c.until})
	}
	// Failing, the engine still pauses (its loop was not there yet to
	// confirm): the limit holds either way.
	return c.engine.Pause(ctx)
}

func (c *controller) Resume(context.Context) error {
	c.mu.Lock()
	at := c.pausedAt
	c.mu.Unlock()
	c.resume(at, bridge.ByControl)
	return nil
}

// resume ends the pause that began at (zero: whatever the engine has),
// unless another one has begun since: a late limit timer does not end a
// newer pause.
func (c *controller) resume(at time.Time, by string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pausedAt.Equal(at) {
		return
	}
	c.engine.Resume()
	if at.IsZero() {
		return // not paused through this controller: nothing to report
	}
	c.limit.Stop()
	until := c.until
	c.pausedAt, c.until = time.Time{}, time.Time{}
	paused := time.Since(at)
	switch by {
	case bridge.ByMaxPause:
		c.logger.Warn("reading Kafka resumed: the pause lasted control.max_pause", "paused", paused.Round(time.Second), "max_pause", c.maxPause)
	case bridge.ByDuration:
		c.logger.Info("reading Kafka resumed: the pause lasted the duration asked", "paused", paused.Round(time.Second))
	default:
		c.logger.Info("reading Kafka resumed by the control service", "paused", paused.Round(time.Second))
	}
	c.event(&bridge.PauseEvent{Action: bridge.Resumed, By: by, Until: until, PausedMS: paused.Milliseconds()})
}

// event publishes ev; events are observations, a failure is only logged.
func (c *controller) event(ev bridge.Event) {
	if err := c.publish(ev); err != nil {
		c.logger.Warn("pause event not published", "err", err)
	}
}

// stop cancels a pending limit: the engine is stopping.
func (c *controller) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.limit != nil {
		c.limit.Stop()
	}
}

// gaugeValue reads a gauge's current value.
func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil || m.Gauge == nil {
		return 0
	}
	return m.Gauge.GetValue()
}
