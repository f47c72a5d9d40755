package daemon

import (
	"context"
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
	// resumes it after maxPause.
	pausedAt time.Time
	limit    *time.Timer
}

// Status is the control service's status reply.
type Status struct {
	Version      string `json:"version"`
	Table        string `json:"table"`
	TableVersion int64  `json:"table_version"`
	// Committed is the next offset to read per topic and partition
	// according to the table; Positions the next offset the fetch loop
	// reads.
	Committed     map[string]map[int32]int64 `json:"committed"`
	Positions     map[string]map[int32]int64 `json:"positions"`
	BufferedBytes int64                      `json:"buffered_bytes"`
	Healthy       bool                       `json:"healthy"`
	Degraded      map[string]string          `json:"degraded,omitempty"`
	// PausedUntil is when a pause by the control service ends by itself;
	// absent while reading.
	PausedUntil *time.Time `json:"paused_until,omitempty"`
}

func (c *controller) Status(ctx context.Context) (any, error) {
	committed, err := c.engine.Committed(ctx)
	if err != nil {
		return nil, err
	}
	degraded := c.health.Degraded()
	st := &Status{
		Version: c.version, Table: c.table, TableVersion: int64(gaugeValue(c.metrics.TableVersion)),
		Committed: ledger.ByTopic(committed), Positions: ledger.ByTopic(c.engine.Position()), BufferedBytes: int64(gaugeValue(c.metrics.BufferedBytes)),
		Healthy: len(degraded) == 0, Degraded: degraded,
	}
	c.mu.Lock()
	if !c.pausedAt.IsZero() {
		until := c.pausedAt.Add(c.maxPause)
		st.PausedUntil = &until
	}
	c.mu.Unlock()
	return st, nil
}

func (c *controller) Flush(ctx context.Context) error { return c.engine.CommitNow(ctx) }

// Pause pauses reading until Resume, or for maxPause from the first pause:
// pausing again while paused does not extend it. Control requests are
// serialized, so a resume never slips in between.
func (c *controller) Pause(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pausedAt.IsZero() {
		at := time.Now()
		c.pausedAt = at
		c.limit = time.AfterFunc(c.maxPause, func() { c.resume(at, bridge.ByMaxPause) })
		c.logger.Warn("reading Kafka paused by the control service", "resumes_at", at.Add(c.maxPause))
		c.event(&bridge.PauseEvent{Action: bridge.Paused, By: bridge.ByControl, Until: at.Add(c.maxPause)})
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
	c.pausedAt = time.Time{}
	paused := time.Since(at)
	if by == bridge.ByMaxPause {
		c.logger.Warn("reading Kafka resumed: the pause lasted control.max_pause", "paused", paused.Round(time.Second), "max_pause", c.maxPause)
	} else {
		c.logger.Info("reading Kafka resumed by the control service", "paused", paused.Round(time.Second))
	}
	c.event(&bridge.PauseEvent{Action: bridge.Resumed, By: by, Until: at.Add(c.maxPause), PausedMS: paused.Milliseconds()})
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
