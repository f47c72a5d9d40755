package actors

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the engine's Prometheus metrics (served at /metrics). Create
// them with NewMetrics on the registry the process serves; nothing here is
// global.
type Metrics struct {
	Records       *prometheus.CounterVec // records consumed, by partition
	DeadLetters   prometheus.Counter
	Rows          prometheus.Counter // rows committed
	Files         prometheus.Counter
	Bytes         prometheus.Counter
	Commits       prometheus.Counter
	Conflicts     prometheus.Counter
	CommitLatency prometheus.Histogram
	EpochDuration prometheus.Histogram
	BufferedBytes prometheus.Gauge
	FetchPaused   prometheus.Gauge     // 1 while reading Kafka is paused
	DLQWaiting    prometheus.Gauge     // dead letters an epoch waits to see acknowledged
	Lag           *prometheus.GaugeVec // records behind the high watermark, by partition
	Restarts      *prometheus.CounterVec
	TableVersion  prometheus.Gauge
}

// NewMetrics creates and registers the metrics on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deltaflow_records_total",
			Help: "Kafka records consumed."}, []string{"partition"}),
		DeadLetters: prometheus.NewCounter(prometheus.CounterOpts{Name: "deltaflow_dlq_records_total",
			Help: "Records sent to the dead letter queue."}),
		Rows: prometheus.NewCounter(prometheus.CounterOpts{Name: "deltaflow_rows_committed_total",
			Help: "Rows committed to the Delta table."}),
		Files: prometheus.NewCounter(prometheus.CounterOpts{Name: "deltaflow_files_committed_total",
			Help: "Data files committed."}),
		Bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "deltaflow_bytes_committed_total",
			Help: "Bytes of data files committed."}),
		Commits: prometheus.NewCounter(prometheus.CounterOpts{Name: "deltaflow_commits_total",
			Help: "Delta commits written."}),
		Conflicts: prometheus.NewCounter(prometheus.CounterOpts{Name: "deltaflow_commit_conflicts_total",
			Help: "Epochs dropped because a concurrent commit conflicted."}),
		CommitLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "deltaflow_commit_seconds",
			Help: "Time to write one Delta commit.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		EpochDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "deltaflow_epoch_seconds",
			Help: "Time from sealing an epoch to its commit.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		BufferedBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltaflow_buffered_bytes",
			Help: "Bytes of rows buffered and not yet uploaded."}),
		FetchPaused: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltaflow_fetch_paused",
			Help: "1 while reading Kafka is paused (memory budget or unfinished epochs reached, or paused by the control service)."}),
		DLQWaiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltaflow_dlq_waiting_letters",
			Help: "Dead letters of the epoch being committed that the DLQ stream has not acknowledged yet; the epoch's commit waits for them."}),
		Lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "deltaflow_lag_records",
			Help: "Records between the last one read and the partition's high watermark."}, []string{"partition"}),
		Restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deltaflow_actor_restarts_total",
			Help: "Actor and pipeline restarts after failures."}, []string{"actor"}),
		TableVersion: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltaflow_table_version",
			Help: "Latest Delta version this process committed or read."}),
	}
	if reg != nil {
		reg.MustRegister(m.Records, m.DeadLetters, m.Rows, m.Files, m.Bytes, m.Commits, m.Conflicts,
			m.CommitLatency, m.EpochDuration, m.BufferedBytes, m.FetchPaused, m.DLQWaiting, m.Lag, m.Restarts, m.TableVersion)
	}
	return m
}

func partitionLabel(p int32) string { return strconv.Itoa(int(p)) }
