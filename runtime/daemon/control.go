package daemon

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/deltaflow/deltaflow/actors"
)

// controller answers the NATS control service (bridge.Controller):
// `nats req deltaflow.<table>.control.status ”` and flush, pause, resume.
type controller struct {
	engine  *actors.Engine
	metrics *actors.Metrics
	health  *actors.Health
	version string
	table   string
}

// Status is the control service's status reply.
type Status struct {
	Version      string `json:"version"`
	Table        string `json:"table"`
	TableVersion int64  `json:"table_version"`
	// Committed is the next offset to read per partition according to the
	// table; Positions the next offset the fetch loop reads.
	Committed     map[int32]int64   `json:"committed"`
	Positions     map[int32]int64   `json:"positions"`
	BufferedBytes int64             `json:"buffered_bytes"`
	Healthy       bool              `json:"healthy"`
	Degraded      map[string]string `json:"degraded,omitempty"`
}

func (c *controller) Status(ctx context.Context) (any, error) {
	committed, err := c.engine.Committed(ctx)
	if err != nil {
		return nil, err
	}
	degraded := c.health.Degraded()
	return &Status{
		Version: c.version, Table: c.table, TableVersion: int64(gaugeValue(c.metrics.TableVersion)),
		Committed: committed, Positions: c.engine.Position(), BufferedBytes: int64(gaugeValue(c.metrics.BufferedBytes)),
		Healthy: len(degraded) == 0, Degraded: degraded,
	}, nil
}

func (c *controller) Flush(ctx context.Context) error { return c.engine.CommitNow(ctx) }

func (c *controller) Pause(ctx context.Context) error { return c.engine.Pause(ctx) }

func (c *controller) Resume(context.Context) error { c.engine.Resume(); return nil }

// gaugeValue reads a gauge's current value.
func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil || m.Gauge == nil {
		return 0
	}
	return m.Gauge.GetValue()
}
