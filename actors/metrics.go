package actors

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deltaflow/deltaflow/messages"
)

// Metrics are the engine's Prometheus metrics (served at /metrics). Create
// them with NewMetrics on the registry the process serves; nothing here is
// global. Durations are histograms named *_duration_seconds, points in
// time gauges named *_timestamp_seconds (Unix time), as Prometheus names
// them.
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
	Paused        prometheus.Gauge     // 1 while the control service has paused reading
	DLQWaiting    prometheus.Gauge     // dead letters an epoch waits to see acknowledged
	DLQFull       prometheus.Gauge     // 1 while the DLQ stream refuses letters for want of room (its disk's too)
	Lag           *prometheus.GaugeVec // records behind the high watermark, by partition
	Restarts      *prometheus.CounterVec
	TableVersion  prometheus.Gauge
	// LastCommit is when this process last committed an epoch.
	LastCommit prometheus.Gauge
	// NewestEvent is the newest event time committed (the maximum of the
	// event time column over the committed files' stats), leaving out the
	// files whose newest event time lies in the future (FutureEvents).
	NewestEvent prometheus.Gauge
	// FutureEvents counts the committed files whose newest event time lies
	// more than maxEventClockSkew ahead of the clock: a device with a wrong
	// clock must not make the freshness negative for good.
	FutureEvents prometheus.Counter
	// Errors counts failed operations against a server, by component
	// (storage, nats, kafka); Retries the ones retried after a backoff.
	Errors  *prometheus.CounterVec
	Retries *prometheus.CounterVec
	// MaintenanceRuns counts maintenance runs by task (optimize, vacuum,
	// log_cleanup) and result (done, noop, conflict, error);
	// MaintenanceDuration times them by task.
	MaintenanceRuns     *prometheus.CounterVec
	MaintenanceDuration *prometheus.HistogramVec
	// Stalled is 1 while the stall watchdog sees records waiting and no
	// commit (see Watchdog).
	Stalled prometheus.Gauge
	// Pending is, by partition, the records in Kafka the table does not
	// hold yet: the high watermark minus the committed offset.
	Pending *prometheus.GaugeVec
	// DataLoss counts partitions found with an offset the log no longer
	// continues from, by partition, cause (retention, recreated) and action
	// (held, skipped); DataLossRecords the records known lost by those
	// skipped; Held is 1 for each partition held unread because of one.
	DataLoss        *prometheus.CounterVec
	DataLossRecords *prometheus.CounterVec
	Held            *prometheus.GaugeVec

	// newestEvent backs EventFreshness: Unix nanoseconds, 0 while unknown.
	newestEvent atomic.Int64
	now         func() time.Time
}

// Metric components of Errors and Retries.
const (
	componentStorage = "storage"
	componentNATS    = "nats"
	componentKafka   = "kafka"
)

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
		CommitLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "deltaflow_commit_duration_seconds",
			Help: "Time to write one Delta commit.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		EpochDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "deltaflow_epoch_duration_seconds",
			Help: "Time from sealing an epoch to its commit.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		BufferedBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltaflow_buffered_bytes",
			Help: "Bytes of rows buffered and not yet uploaded."}),
		FetchPaused: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltaflow_fetch_paused",
			Help: "1 while reading Kafka is paused (memory budget or unfinished epochs reached, or paused by the control service)."}),
		Paused: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltaflow_paused",
			Help: "1 while the control service has paused reading Kafka; it resumes by itself after control.max_pause."}),
		DLQWaiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltaflow_dlq_waiting_letters",
			Help: "Dead letters of the epoch being committed that the DLQ stream has not acknowledged yet; the epoch's commit waits for them."}),
		DLQFull: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltaflow_dlq_full",
			Help: "1 while the DLQ stream refuses dead letters for want of room (nats.dlq_max_bytes, the JetStream store full, or its disk full): the epoch holding them waits uncommitted until room is made."}),
		Lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "deltaflow_lag_records",
			Help: "Records between the last one read and the partition's high watermark."}, []string{"partition"}),
		Restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deltaflow_actor_restarts_total",
			Help: "Actor and pipeline restarts after failures."}, []string{"actor"}),
		TableVersion: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltaflow_table_version",
			Help: "Latest Delta version this process committed or read."}),
		LastCommit: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltaflow_last_commit_timestamp_seconds",
			Help: "When this process last committed an epoch (Unix time); 0 before its first commit."}),
		NewestEvent: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltaflow_newest_event_timestamp_seconds",
			Help: "Newest event time committed to the table by this process (Unix time, from the files' stats); 0 before its first commit."}),
		FutureEvents: prometheus.NewCounter(prometheus.CounterOpts{Name: "deltaflow_future_event_files_total",
			Help: "Committed data files whose newest event time lies more than 5 minutes ahead of this host's clock; the freshness metrics leave them out."}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deltaflow_errors_total",
			Help: "Failed operations against a server, by component (storage, nats, kafka)."}, []string{"component"}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deltaflow_retries_total",
			Help: "Operations retried after a backoff, by component (storage, nats)."}, []string{"component"}),
		MaintenanceRuns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deltaflow_maintenance_runs_total",
			Help: "Maintenance runs by task (optimize, vacuum, log_cleanup) and result (done, noop, conflict, error)."},
			[]string{"task", "result"}),
		MaintenanceDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "deltaflow_maintenance_duration_seconds",
			Help: "Time a maintenance run took, by task.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)}, []string{"task"}),
		Stalled: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltaflow_stalled",
			Help: "1 while records wait in Kafka and no epoch has committed for watchdog.stall_intervals flush intervals (or the pipeline keeps failing); deltaflow exits after watchdog.grace."}),
		Pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "deltaflow_uncommitted_records",
			Help: "Records in Kafka the table does not hold yet (high watermark minus committed offset), by partition; checked by the stall watchdog."}, []string{"partition"}),
		DataLoss: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deltaflow_data_loss_total",
			Help: "Partitions found whose table offset the Kafka log no longer continues from (records deleted before they were read, or the topic recreated), by partition, cause (retention, recreated) and action (held: not read, per kafka.on_data_loss fail; skipped: resumed at the log start)."},
			[]string{"partition", "cause", "action"}),
		DataLossRecords: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deltaflow_data_loss_records_total",
			Help: "Records skipped under kafka.on_data_loss skip because Kafka deleted them before they were read, by partition (a recreated topic's loss cannot be counted)."},
			[]string{"partition"}),
		Held: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "deltaflow_partition_held",
			Help: "1 while a partition is held unread because the Kafka log no longer holds its table offset (kafka.on_data_loss fail)."},
			[]string{"partition"}),
		now: time.Now,
	}
	freshness := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "deltaflow_event_freshness_seconds",
		Help: "Now minus the newest event time committed: how old the newest row in the table is; 0 before the first commit."},
		m.eventFreshness)
	// The components are known up front, so each series exists (at 0)
	// from the start and rate() sees the first error.
	for _, c := range []string{componentStorage, componentNATS, componentKafka} {
		m.Errors.WithLabelValues(c)
		m.Retries.WithLabelValues(c)
	}
	for _, a := range []string{"committer", "pipeline", "maintenance"} {
		m.Restarts.WithLabelValues(a)
	}
	for _, task := range []string{taskOptimize, taskVacuum, taskLogCleanup} {
		for _, r := range []string{resultDone, resultNoop, resultConflict, resultError} {
			m.MaintenanceRuns.WithLabelValues(task, r)
		}
		m.MaintenanceDuration.WithLabelValues(task)
	}
	if reg != nil {
		reg.MustRegister(m.Records, m.DeadLetters, m.Rows, m.Files, m.Bytes, m.Commits, m.Conflicts,
			m.CommitLatency, m.EpochDuration, m.BufferedBytes, m.FetchPaused, m.Paused, m.DLQWaiting, m.DLQFull, m.Lag, m.Restarts, m.TableVersion,
			m.LastCommit, m.NewestEvent, m.FutureEvents, freshness, m.Errors, m.Retries, m.MaintenanceRuns, m.MaintenanceDuration,
			m.Stalled, m.Pending, m.DataLoss, m.DataLossRecords, m.Held)
	}
	return m
}

// maxEventClockSkew is how far ahead of this host's clock an event time
// may lie and still count as the newest: device clocks drift a little.
const maxEventClockSkew = 5 * time.Minute

// committedFiles records the event times of committed files: the newest
// one for the freshness metrics, but for files whose newest event lies in
// the future, which are counted instead.
func (m *Metrics) committedFiles(files []messages.DataFile, col string) {
	newest, future := newestValue(files, col, m.now().Add(maxEventClockSkew))
	m.FutureEvents.Add(float64(future))
	if !newest.IsZero() {
		m.committedEvents(newest)
	}
}

// committedEvents records that events up to newest are in the table.
func (m *Metrics) committedEvents(newest time.Time) {
	for {
		old := m.newestEvent.Load()
		if newest.UnixNano() <= old {
			return
		}
		if m.newestEvent.CompareAndSwap(old, newest.UnixNano()) {
			m.NewestEvent.Set(float64(newest.UnixNano()) / 1e9)
			return
		}
	}
}

// eventFreshness is now minus the newest committed event time, in seconds
// (0 while no event was committed).
func (m *Metrics) eventFreshness() float64 {
	n := m.newestEvent.Load()
	if n == 0 {
		return 0
	}
	return m.now().Sub(time.Unix(0, n)).Seconds()
}

func partitionLabel(p int32) string { return strconv.Itoa(int(p)) }

// retrying counts a failed operation of component that is retried.
func (m *Metrics) retrying(component string) {
	m.Errors.WithLabelValues(component).Inc()
	m.Retries.WithLabelValues(component).Inc()
}
