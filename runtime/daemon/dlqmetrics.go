package daemon

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deltaflow/deltaflow/bridge"
)

// dlqScrapeTimeout bounds the stream info request of one scrape: a NATS
// that does not answer leaves the series out rather than hold /metrics.
const dlqScrapeTimeout = 2 * time.Second

var (
	dlqStoredDesc = prometheus.NewDesc("deltaflow_dlq_stored_bytes",
		"Bytes the DLQ stream holds (asked of NATS at each scrape).", []string{"stream"}, nil)
	dlqMaxDesc = prometheus.NewDesc("deltaflow_dlq_max_bytes",
		"The DLQ stream's bound (nats.dlq_max_bytes); full, it refuses new dead letters.", []string{"stream"}, nil)
)

// dlqCollector reports how full each table's DLQ stream is, so that an
// alert fires before it refuses letters (deltaflow_dlq_full).
type dlqCollector []*bridge.Bridge

func (dlqCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- dlqStoredDesc
	ch <- dlqMaxDesc
}

func (c dlqCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), dlqScrapeTimeout)
	defer cancel()
	for _, b := range c {
		u, err := b.DLQUsage(ctx)
		if err != nil {
			return // NATS down: /readyz says so
		}
		ch <- prometheus.MustNewConstMetric(dlqStoredDesc, prometheus.GaugeValue, float64(u.Bytes), u.Stream)
		ch <- prometheus.MustNewConstMetric(dlqMaxDesc, prometheus.GaugeValue, float64(u.MaxBytes), u.Stream)
	}
}
