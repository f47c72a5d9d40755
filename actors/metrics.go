package actors

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/deltaflow/deltaflow/messages"
)

// Metrics are the engine's Prometheus metrics (served at /metrics). Create
// them with NewMetrics on the registry the process serves; nothing here is
// global. The value NewMetrics returns holds the process's series (the
// fetch loop's, the watchdog's, errors by component); Table returns a
// table's view, whose series carry its `table` label. Durations are
// histograms named *_duration_seconds, points in time gauges named
// *_timestamp_seconds (Unix time), as Prometheus names them.
type Metrics struct {
	// A table's series.
	Records *prometheus.CounterVec // records consumed, by topic and partition
	// DeadLetters counts the records sent to the DLQ by reason class
	// (reasonMapping, reasonUnrouted, reasonTooLarge, reasonIsolated).
	DeadLetters   *prometheus.CounterVec
	Rows          prometheus.Counter // rows committed
	Files         prometheus.Counter
	Bytes         prometheus.Counter
	Commits       prometheus.Counter
	Conflicts     prometheus.Counter
	CommitLatency prometheus.Observer
	EpochDuration prometheus.Observer
	BufferedBytes prometheus.Gauge
	// KeyIndexBytes is what an upsert table's key → file index holds (its
	// part of the table's memory share).
	KeyIndexBytes prometheus.Gauge
	DLQWaiting    prometheus.Gauge // dead letters an epoch waits to see acknowledged
	DLQFull       prometheus.Gauge // 1 while the DLQ stream refuses letters for want of room
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
	// MaintenanceRuns counts maintenance runs by task (optimize, vacuum,
	// log_cleanup) and result (done, noop, conflict, error);
	// MaintenanceDuration times them by task.
	MaintenanceRuns     *prometheus.CounterVec
	MaintenanceDuration prometheus.ObserverVec
	// Pending is, by topic and partition, the records in Kafka the table
	// does not hold yet: the high watermark minus the committed offset.
	Pending *prometheus.GaugeVec
	// PendingSeconds is how long since the table's last commit while
	// records wait (0 when none do): the lag in seconds beside Pending's
	// records.
	PendingSeconds prometheus.Gauge
	// DataLoss counts partitions found with an offset the log no longer
	// continues from, by topic, partition, cause (retention, recreated) and
	// action (held, skipped); DataLossRecords the records known lost by
	// those skipped; Held is 1 for each partition held unread because of
	// one (or because its start is in doubt).
	DataLoss        *prometheus.CounterVec
	DataLossRecords *prometheus.CounterVec
	Held            *prometheus.GaugeVec
	// Filtered counts the records the table's route filter (where) left
	// out.
	Filtered prometheus.Counter
	// StaleChanges counts an upsert table's changes ignored as older (by
	// its sequence_by column) than their key's row or delete.
	StaleChanges prometheus.Counter
	// CorruptCheckpoints counts the checkpoint files found corrupt and read
	// around (from an older checkpoint or the JSON commits), once each.
	CorruptCheckpoints prometheus.Counter

	// The process's series, shared by every view.
	FetchPaused prometheus.Gauge     // 1 while reading Kafka is paused for some table (its memory budget, or the control service)
	Paused      prometheus.Gauge     // 1 while the control service has paused reading
	Lag         *prometheus.GaugeVec // records behind the high watermark, by topic and partition
	// Errors counts failed operations against a server, by component
	// (storage, nats, kafka); Retries the ones retried after a backoff.
	Errors  *prometheus.CounterVec
	Retries *prometheus.CounterVec
	// Stalled is 1 while the stall watchdog sees records waiting and no
	// commit (see Watchdog).
	Stalled prometheus.Gauge
	// Unrouted counts, by topic, the records no route's filter took.
	Unrouted *prometheus.CounterVec

	vecs *metricVecs
	// newestEvent backs EventFreshness: Unix nanoseconds, 0 while unknown.
	newestEvent atomic.Int64
	now         func() time.Time
}

// metricVecs are the labelled series the table views curry.
type metricVecs struct {
	reg   prometheus.Registerer
	mu    sync.Mutex
	views map[string]*Metrics // by table

	records, restarts, maintenanceRuns, dataLoss   *prometheus.CounterVec
	deadLetters, rows, files, bytes, commits       *prometheus.CounterVec
	conflicts, futureEvents, dataLossRecords       *prometheus.CounterVec
	filtered, corruptCheckpoints, staleChanges     *prometheus.CounterVec
	commitLatency, epochDuration, maintenanceTimes *prometheus.HistogramVec
	buffered, dlqWaiting, dlqFull, tableVersion    *prometheus.GaugeVec
	keyIndex                                       *prometheus.GaugeVec
	lastCommit, newestEvent, pending, held         *prometheus.GaugeVec
	pendingSeconds                                 *prometheus.GaugeVec
}

// Reason classes of DeadLetters.
const (
	reasonMapping  = "mapping"
	reasonUnrouted = "unrouted"
	reasonTooLarge = "too_large"
	reasonIsolated = "isolated"
)

var deadLetterReasons = []string{reasonMapping, reasonUnrouted, reasonTooLarge, reasonIsolated}

// DeadLetterCount is the table's dead letters of every reason (of a
// table's Metrics).
func (m *Metrics) DeadLetterCount() int64 {
	var sum float64
	for _, r := range deadLetterReasons {
		var d dto.Metric
		if m.DeadLetters.WithLabelValues(r).Write(&d) == nil {
			sum += d.GetCounter().GetValue()
		}
	}
	return int64(sum)
}

// Metric components of Errors and Retries.
const (
	componentStorage = "storage"
	componentNATS    = "nats"
	componentKafka   = "kafka"
	// componentSchemaRegistry: fetching the writer schemas of registry-encoded records.
	componentSchemaRegistry = "schema_registry"
)

// NewMetrics creates and registers the metrics on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append([]string{"table"}, labels...))
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, append([]string{"table"}, labels...))
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, append([]string{"table"}, labels...))
	}
	v := &metricVecs{reg: reg, views: map[string]*Metrics{},
		records: counter("deltaflow_records_total", "Kafka records consumed, by table, topic and partition.", "topic", "partition"),
		deadLetters: counter("deltaflow_dlq_records_total",
			"Records sent to the dead letter queue, by reason: mapping (a value the table's mapping refuses), unrouted (no route's filter took it, unrouted: dlq), too_large (a record batch over kafka.max_decompress_bytes), isolated (the record every epoch failed on).",
			"reason"),
		rows:      counter("deltaflow_rows_committed_total", "Rows committed to the Delta table."),
		files:     counter("deltaflow_files_committed_total", "Data files committed."),
		bytes:     counter("deltaflow_bytes_committed_total", "Bytes of data files committed."),
		commits:   counter("deltaflow_commits_total", "Delta commits written."),
		conflicts: counter("deltaflow_commit_conflicts_total", "Epochs dropped because a concurrent commit conflicted."),
		commitLatency: histogram("deltaflow_commit_duration_seconds", "Time to write one Delta commit.",
			prometheus.ExponentialBuckets(0.005, 2, 12)),
		epochDuration: histogram("deltaflow_epoch_duration_seconds", "Time from sealing an epoch to its commit.",
			prometheus.ExponentialBuckets(0.01, 2, 14)),
		buffered: gauge("deltaflow_buffered_bytes", "Bytes of rows buffered and not yet uploaded (the table's share of backpressure.memory_budget)."),
		keyIndex: gauge("deltaflow_key_index_bytes",
			"Bytes an upsert table's key → file index holds (Bloom filters of its files' keys), within table.key_index_memory, which is counted in the table's share of backpressure.memory_budget."),
		dlqWaiting: gauge("deltaflow_dlq_waiting_letters",
			"Dead letters of the epoch being committed that the DLQ stream has not acknowledged yet; the epoch's commit waits for them."),
		dlqFull: gauge("deltaflow_dlq_full",
			"1 while the DLQ stream refuses dead letters for want of room (nats.dlq_max_bytes, the JetStream store full, or its disk full): the epoch holding them waits uncommitted until room is made."),
		restarts:     counter("deltaflow_actor_restarts_total", "Actor and pipeline restarts after failures.", "actor"),
		tableVersion: gauge("deltaflow_table_version", "Latest Delta version this process committed or read."),
		lastCommit:   gauge("deltaflow_last_commit_timestamp_seconds", "When this process last committed an epoch (Unix time); 0 before its first commit."),
		newestEvent: gauge("deltaflow_newest_event_timestamp_seconds",
			"Newest event time committed to the table by this process (Unix time, from the files' stats); 0 before its first commit."),
		futureEvents: counter("deltaflow_future_event_files_total",
			"Committed data files whose newest event time lies more than 5 minutes ahead of this host's clock; the freshness metrics leave them out."),
		maintenanceRuns: counter("deltaflow_maintenance_runs_total",
			"Maintenance runs by task (optimize, vacuum, log_cleanup) and result (done, noop, conflict, error).", "task", "result"),
		maintenanceTimes: histogram("deltaflow_maintenance_duration_seconds", "Time a maintenance run took, by task.",
			prometheus.ExponentialBuckets(0.01, 4, 10), "task"),
		pendingSeconds: gauge("deltaflow_uncommitted_seconds",
			"Seconds since the table's last commit while records wait in Kafka for it (0 when none do): at most how long the oldest of them has waited; checked by the stall watchdog."),
		pending: gauge("deltaflow_uncommitted_records",
			"Records in Kafka the table does not hold yet (high watermark minus committed offset), by topic and partition; checked by the stall watchdog.", "topic", "partition"),
		dataLoss: counter("deltaflow_data_loss_total",
			"Partitions found whose table offset the Kafka log no longer continues from (records deleted before they were read, or the topic recreated), by topic, partition, cause (retention, recreated) and action (held: not read, per kafka.on_data_loss fail; skipped: resumed at the log start).",
			"topic", "partition", "cause", "action"),
		dataLossRecords: counter("deltaflow_data_loss_records_total",
			"Records skipped under kafka.on_data_loss skip because Kafka deleted them before they were read, by topic and partition (a recreated topic's loss cannot be counted).",
			"topic", "partition"),
		filtered: counter("deltaflow_filtered_records_total", "Records the table's route filter (where) left out."),
		staleChanges: counter("deltaflow_upsert_stale_changes_total",
			"An upsert table's changes ignored because their sequence_by value is older than their key's row in the table or its remembered delete."),
		corruptCheckpoints: counter("deltaflow_corrupt_checkpoints_total",
			"Checkpoint files found corrupt, each counted once: the table is read from an older checkpoint or the JSON commits before it, as Spark does, until a newer checkpoint is written."),
		held: gauge("deltaflow_partition_held",
			"1 while a partition is held unread: the Kafka log no longer holds its table offset (kafka.on_data_loss fail), or where it starts is in doubt (another app's offsets, expired ones).",
			"topic", "partition"),
	}
	m := &Metrics{vecs: v, now: time.Now,
		FetchPaused: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltaflow_fetch_paused",
			Help: "1 while reading Kafka is paused for some table (its memory budget or unfinished epochs reached), or by the control service."}),
		Paused: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltaflow_paused",
			Help: "1 while the control service has paused reading Kafka; it resumes by itself after control.max_pause."}),
		Lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "deltaflow_lag_records",
			Help: "Records between the last one read and the partition's high watermark, by topic and partition."}, []string{"topic", "partition"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deltaflow_errors_total",
			Help: "Failed operations against a server, by component (storage, nats, kafka, schema_registry)."}, []string{"component"}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deltaflow_retries_total",
			Help: "Operations retried after a backoff, by component (storage, nats; the schema registry's fetches count in deltaflow_errors_total)."}, []string{"component"}),
		Unrouted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deltaflow_unrouted_records_total",
			Help: "Records of a topic that no route's filter (where) took, by topic: skipped, or dead-lettered with unrouted: dlq."}, []string{"topic"}),
		Stalled: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltaflow_stalled",
			Help: "1 while records wait in Kafka and no epoch has committed for watchdog.stall_intervals flush intervals (or the pipeline keeps failing); deltaflow exits after watchdog.grace."}),
	}
	// The components are known up front, so each series exists (at 0)
	// from the start and rate() sees the first error.
	for _, c := range []string{componentStorage, componentNATS, componentKafka, componentSchemaRegistry} {
		m.Errors.WithLabelValues(c)
	}
	for _, c := range []string{componentStorage, componentNATS} { // what retryPolicy retries
		m.Retries.WithLabelValues(c)
	}
	if reg != nil {
		reg.MustRegister(v.records, v.deadLetters, v.rows, v.files, v.bytes, v.commits, v.conflicts, v.commitLatency,
			v.epochDuration, v.buffered, v.keyIndex, v.dlqWaiting, v.dlqFull, v.restarts, v.tableVersion, v.lastCommit, v.newestEvent,
			v.futureEvents, v.maintenanceRuns, v.maintenanceTimes, v.pending, v.pendingSeconds, v.dataLoss, v.dataLossRecords, v.held, v.filtered, v.corruptCheckpoints, v.staleChanges,
			m.FetchPaused, m.Paused, m.Lag, m.Errors, m.Retries, m.Stalled, m.Unrouted)
	}
	return m
}

// Table returns table name's view of m: its series labelled with the
// table, the process's shared. The same name gives the same view.
func (m *Metrics) Table(name string) *Metrics {
	v := m.vecs
	v.mu.Lock()
	defer v.mu.Unlock()
	if t, ok := v.views[name]; ok {
		return t
	}
	l := prometheus.Labels{"table": name}
	t := &Metrics{vecs: v, now: m.now,
		Records:             v.records.MustCurryWith(l),
		DeadLetters:         v.deadLetters.MustCurryWith(l),
		Rows:                v.rows.WithLabelValues(name),
		Files:               v.files.WithLabelValues(name),
		Bytes:               v.bytes.WithLabelValues(name),
		Commits:             v.commits.WithLabelValues(name),
		Conflicts:           v.conflicts.WithLabelValues(name),
		CommitLatency:       v.commitLatency.WithLabelValues(name),
		EpochDuration:       v.epochDuration.WithLabelValues(name),
		BufferedBytes:       v.buffered.WithLabelValues(name),
		KeyIndexBytes:       v.keyIndex.WithLabelValues(name),
		DLQWaiting:          v.dlqWaiting.WithLabelValues(name),
		DLQFull:             v.dlqFull.WithLabelValues(name),
		Restarts:            v.restarts.MustCurryWith(l),
		TableVersion:        v.tableVersion.WithLabelValues(name),
		LastCommit:          v.lastCommit.WithLabelValues(name),
		NewestEvent:         v.newestEvent.WithLabelValues(name),
		FutureEvents:        v.futureEvents.WithLabelValues(name),
		MaintenanceRuns:     v.maintenanceRuns.MustCurryWith(l),
		MaintenanceDuration: v.maintenanceTimes.MustCurryWith(l),
		Pending:             v.pending.MustCurryWith(l),
		PendingSeconds:      v.pendingSeconds.WithLabelValues(name),
		DataLoss:            v.dataLoss.MustCurryWith(l),
		DataLossRecords:     v.dataLossRecords.MustCurryWith(l),
		Held:                v.held.MustCurryWith(l),
		Filtered:            v.filtered.WithLabelValues(name),
		StaleChanges:        v.staleChanges.WithLabelValues(name),
		CorruptCheckpoints:  v.corruptCheckpoints.WithLabelValues(name),
		FetchPaused:         m.FetchPaused, Paused: m.Paused, Lag: m.Lag, Errors: m.Errors, Retries: m.Retries, Stalled: m.Stalled,
		Unrouted: m.Unrouted,
	}
	for _, a := range []string{"committer", "pipeline", "maintenance"} {
		t.Restarts.WithLabelValues(a)
	}
	for _, r := range deadLetterReasons {
		t.DeadLetters.WithLabelValues(r)
	}
	for _, task := range []string{taskOptimize, taskVacuum, taskLogCleanup} {
		for _, r := range []string{resultDone, resultNoop, resultConflict, resultError} {
			t.MaintenanceRuns.WithLabelValues(task, r)
		}
		t.MaintenanceDuration.WithLabelValues(task)
	}
	if v.reg != nil {
		v.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "deltaflow_event_freshness_seconds",
			Help:        "Now minus the newest event time committed: how old the newest row in the table is; 0 before the first commit.",
			ConstLabels: l}, t.eventFreshness))
	}
	v.views[name] = t
	return t
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
