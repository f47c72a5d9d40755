package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	goversion "go/version"
	"io"
	"log/slog"
	"math"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/deltaflow/deltaflow/actors"
	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/storage"
	"github.com/deltaflow/deltaflow/upsert"
)

// StopTimeout bounds the final commit on shutdown. With one more second for
// closing the consumer and the actors, a SIGTERM ends the process within
// 10 s (docker stop's default grace period); whatever is not committed by
// then is re-read from Kafka on the next start, and Run says so with
// ErrStopTimeout.
const StopTimeout = 8 * time.Second

// ErrStopTimeout is returned by Run when the final commit on shutdown did
// not land within StopTimeout (a slow or unreachable store, a full DLQ): it
// was given up, losing nothing, since its records are read again at the
// next start. `run` exits 3 for it.
var ErrStopTimeout = fmt.Errorf("final commit not committed within the stop timeout (%s); its records are read again at the next start", StopTimeout)

// RunOptions tune one Run.
type RunOptions struct {
	// UntilLatest stops once every partition owned at start is committed up
	// to the high watermark it had then (actors.Engine.CatchUp), and Run
	// returns nil.
	UntilLatest bool
	// Version is reported by the control service; default Version().
	Version string
	// LogOutput receives the logs; default os.Stderr.
	LogOutput io.Writer
	// MemoryLimit sets the Go runtime's soft memory limit from the budget
	// (see memoryLimit), for a process that is only the daemon: not for
	// one that hosts other work too (tests, demo).
	MemoryLimit bool
	// ConnectTimeout bounds how long the start waits for each of Kafka,
	// the table's store and NATS to answer; past it Run fails, naming the
	// one that did not. Default DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Summary, if set, receives what a run with UntilLatest that caught up
	// did: its summary line, or with SummaryJSON a Summary as JSON.
	Summary     io.Writer
	SummaryJSON bool
}

// Summary is what a run with UntilLatest that caught up did, in all and
// per table.
type Summary struct {
	Rows        int64          `json:"rows"`
	Commits     int64          `json:"commits"`
	DeadLetters int64          `json:"deadLetters"`
	Seconds     float64        `json:"seconds"`
	Tables      []TableSummary `json:"tables"`
}

// TableSummary is one table's part of a Summary.
type TableSummary struct {
	Table       string `json:"table"`
	Rows        int64  `json:"rows"`
	Commits     int64  `json:"commits"`
	DeadLetters int64  `json:"deadLetters"`
}

// String is the summary line.
func (s Summary) String() string {
	return fmt.Sprintf("caught up: %d rows in %d commits, %d dead letters, %.1fs", s.Rows, s.Commits, s.DeadLetters, s.Seconds)
}

// memoryLimitOverhead is what the process holds besides the buffered data
// the budget bounds: the Kafka client's fetches, the polls in flight, the
// open files' encoders, NATS, the runtime. 16 MiB, not 20: the binary's
// own resident pages grew (half of a 1 M-event drain's peak RSS), and the
// Pi's 64 MiB matters more than the 7% of drain throughput the collector's
// extra work costs (docs/performance.md). memoryLimitPerTable is what each
// table beyond the first adds: its committer, snapshot, pipeline and
// readers (0.3–0.7 MiB measured idle; issue 26's bound is 2 MiB).
const (
	memoryLimitOverhead = 16 << 20
	memoryLimitPerTable = 2 << 20
)

// memoryLimit sets the soft memory limit to the budget plus the overhead
// of tables tables, unless GOMEMLIMIT is set, and returns the limit in
// force. Without it the garbage collector lets the heap grow to twice what
// is live, which is most of the daemon's RSS.
func memoryLimit(budget ByteSize, tables int, getenv func(string) string) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1)
	}
	limit := int64(budget) + memoryLimitOverhead + int64(max(tables-1, 0))*memoryLimitPerTable
	debug.SetMemoryLimit(limit)
	return limit
}

// Run runs the daemon until ctx ends (or, with UntilLatest, until caught
// up), then shuts down gracefully: it stops fetching, commits what was read
// within StopTimeout, and closes the consumer, the actors, the NATS bridge
// and the HTTP server. A clean shutdown returns nil.
//
// A start fails fast: Kafka, the table's store and NATS each have
// opts.ConnectTimeout to answer, or Run returns an error naming the one
// that did not. A run with UntilLatest that caught up ends with a summary
// line (rows, commits, dead letters, seconds).
func Run(ctx context.Context, cfg *Config, opts RunOptions) error {
	if opts.Version == "" {
		opts.Version = Version()
	}
	if opts.LogOutput == nil {
		opts.LogOutput = os.Stderr
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	started := time.Now()
	logger, err := NewLogger(cfg.Log, opts.LogOutput)
	if err != nil {
		return err
	}
	metrics, caughtUp, err := run(ctx, cfg, opts, logger)
	if caughtUp && err == nil {
		// After every component has stopped: the run's last line.
		sum := Summary{Seconds: math.Round(time.Since(started).Seconds()*10) / 10}
		for _, r := range cfg.Routes() {
			tm := metrics.Table(r.Table.Name)
			t := TableSummary{Table: r.Table.Name, Rows: counterValue(tm.Rows), Commits: counterValue(tm.Commits),
				DeadLetters: tm.DeadLetterCount()}
			sum.Rows, sum.Commits, sum.DeadLetters = sum.Rows+t.Rows, sum.Commits+t.Commits, sum.DeadLetters+t.DeadLetters
			sum.Tables = append(sum.Tables, t)
		}
		logger.Info(sum.String(), "rows", sum.Rows, "commits", sum.Commits, "dead_letters", sum.DeadLetters, "seconds", sum.Seconds)
		return writeSummary(opts, sum)
	}
	return err
}

// writeSummary writes sum to opts.Summary, if set.
func writeSummary(opts RunOptions, sum Summary) error {
	switch {
	case opts.Summary == nil:
		return nil
	case opts.SummaryJSON:
		enc := json.NewEncoder(opts.Summary)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	_, err := fmt.Fprintln(opts.Summary, sum)
	return err
}

// run is Run once the logger is made; it reports the process's metrics
// and whether UntilLatest caught up.
func run(ctx context.Context, cfg *Config, opts RunOptions, logger *slog.Logger) (_ *actors.Metrics, caughtUp bool, _ error) {
	logger.Info("deltaflow starting", "version", opts.Version, "config", cfg)
	if w := ToolchainWarning(runtime.Version()); w != "" {
		logger.Warn(w)
	}
	if opts.MemoryLimit {
		logger.Info("memory limit", "bytes", ByteSize(memoryLimit(cfg.Backpressure.MemoryBudget, len(cfg.Routes()), os.Getenv)).String())
	}

	build := BuildInfo()
	build.Version = opts.Version
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(build))
	metrics := actors.NewMetrics(reg)
	health := actors.NewHealth()
	ready := &readiness{health: health}
	// HTTP comes up first so /healthz answers and /readyz explains what
	// startup is waiting for.
	srv, err := startHTTP(cfg.HTTP.Listen, reg, ready, logger)
	if err != nil {
		return nil, false, err
	}
	defer srv.close()

	// Kafka first: nothing is created (a table, a NATS store) by a start
	// that could not read anyway.
	if err := pingKafka(ctx, cfg, opts.ConnectTimeout, logger); err != nil {
		return nil, false, err
	}
	// NATS before the tables: the schema registry's schemas seen before
	// are kept in its KV bucket, and a registry table's columns need them.
	bopts := []bridge.Opt{bridge.WithVersion(opts.Version)}
	for _, r := range cfg.Routes() {
		bopts = append(bopts, bridge.WithTable(r.Table.Name))
	}
	bctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	b, err := bridge.New(bctx, cfg.NATS, logger, bopts...)
	cancel()
	if err != nil {
		return nil, false, fmt.Errorf("start nats bridge: %w", withinTimeout(bctx, err, connectFlag(opts.ConnectTimeout)))
	}
	defer b.Close()
	ready.bridge.Store(b)
	if err := cfg.resolveSchemas(ctx, b.SchemaStore(registryKey(cfg.SchemaRegistry.URL)), health, logger); err != nil {
		return nil, false, err
	}

	routes := cfg.Routes()
	opened := make([]*openedRoute, len(routes))
	for i, r := range routes {
		if opened[i], err = openRoute(ctx, cfg, r, opts.ConnectTimeout, logger, metrics.Table(r.Table.Name)); err != nil {
			return nil, false, err
		}
	}
	ready.tableLoaded.Store(true)
	engineCfg, err := cfg.EngineConfig(nil)
	if err != nil {
		return nil, false, err
	}
	var engineRoutes []actors.Route
	var collector dlqCollector
	var topics, regexes []string
	for _, o := range opened {
		tb := b.Table(o.view.Table.Name)
		collector = append(collector, tb)
		for _, topic := range o.route.Topics {
			reconcileOffsets(ctx, tb, o.snap, o.view.Table.AppID, topic, logger)
		}
		topics = append(topics, o.route.Topics...)
		if o.engine.TopicRegex != nil {
			regexes = append(regexes, o.engine.TopicRegex.String())
		}
		o.engine.Outbox = actors.NewOutbox(tb)
		if o.engine.SequenceBy != "" {
			if o.engine.DeletedKeys, err = tb.DeletedKeys(ctx, o.snap.Metadata().ID, o.view.Table.DeleteRetention, upsert.AppendToken); err != nil {
				return nil, false, fmt.Errorf("table %s: %w", o.view.Table.Name, err)
			}
		}
		engineRoutes = append(engineRoutes, o.engine)
	}
	reg.MustRegister(collector)
	deps := actors.Deps{Metrics: metrics, Health: health, Logger: logger}
	if cfg.schemas != nil {
		deps.Schemas = cfg.schemas
	}
	engine, err := actors.NewEngine(engineCfg, deps, engineRoutes...)
	if err != nil {
		return nil, false, err
	}
	slices.Sort(topics)
	cons, err := kafka.NewConsumer(cfg.Kafka, engine, logger, kafka.Subscribe(slices.Compact(topics), regexes))
	if err != nil {
		return nil, false, err
	}
	if err := engine.Start(cons); err != nil {
		cons.Close()
		return nil, false, err
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	if w := cfg.Watchdog; w.StallIntervals > 0 {
		watch := &stallWatch{stallAfter: time.Duration(w.StallIntervals) * cfg.Flush.Interval, grace: w.Grace,
			backoff: actors.Backoff{Initial: w.RestartBackoff, Max: w.RestartBackoffMax}}
		check := min(max(cfg.Flush.Interval/4, time.Second), 15*time.Second)
		go runWatchdog(ctx, watch, check, watchdogDeps{engine: engine, bridge: b, metrics: metrics, ready: ready,
			logger: logger.With("component", "watchdog"), stop: stop})
	}
	go func() {
		select {
		case err := <-engine.Fatal():
			logger.Error("exiting for a restart", "err", err)
			stop(err)
		case <-ctx.Done():
		}
	}()
	for _, r := range routes {
		name := r.Table.Name
		tb := b.Table(name)
		ctrl := &controller{engine: engine, metrics: metrics.Table(name), health: health, version: opts.Version, table: name,
			maxPause: cfg.Control.MaxPause, publish: tb.Publish, logger: logger.With("component", "control", "table", name)}
		defer ctrl.stop()
		if err := tb.StartControl(ctrl); err != nil {
			logger.Warn("control service not started", "table", name, "err", err)
		}
	}
	for _, o := range opened {
		logger.Info("deltaflow running", "table", o.view.Table.Name, "uri", o.tbl.Store().URI(), "topics", o.route.Topics,
			"topic_regex", o.route.TopicRegex, "nats", b.ClientURL(), "http", srv.addr())
	}

	// With UntilLatest a caught-up engine stops as a cancelled one does;
	// one that cannot catch up (a partition held, a full DLQ) fails.
	var runErr error
	if opts.UntilLatest {
		err := engine.CatchUp(ctx)
		caughtUp = err == nil
		if errors.Is(err, actors.ErrCannotCatchUp) {
			runErr = err
		}
	}
	if !caughtUp && runErr == nil {
		<-ctx.Done()
		logger.Info("shutting down", "cause", context.Cause(ctx))
		if cause := context.Cause(ctx); errors.Is(cause, ErrStalled) || errors.Is(cause, actors.ErrTopicRecreated) {
			runErr = cause
		}
	}
	ready.stopping.Store(true)
	stopErr := stopEngine(engine, logger)
	if runErr != nil && stopErr != nil {
		// The run's failure is why it ended (exit 1, for restart
		// policies); the stop's, even a timeout (exit 3), only adds to it.
		return metrics, caughtUp, fmt.Errorf("%w; at stop: %v", runErr, stopErr)
	}
	return metrics, caughtUp, errors.Join(runErr, stopErr)
}

// openedRoute is one route's table, opened for the engine.
type openedRoute struct {
	route  Route
	view   *Config // the route as the single form
	tbl    *delta.Table
	snap   *delta.Snapshot
	engine actors.Route // but for its Outbox
}

// openRoute opens route r's table as run streams into it (openTable), writes
// its configured start positions, checks its txn retention and settles the
// engine's settings of it: its flush, maintenance and data file options
// with the table's own (delta.* properties, materialized partition
// columns).
func openRoute(ctx context.Context, cfg *Config, r Route, connectTimeout time.Duration, logger *slog.Logger,
	metrics *actors.Metrics) (*openedRoute, error) {
	view := cfg.TableView(r)
	tbl, snap, mapper, err := openTable(ctx, view, connectTimeout, logger, metrics.CorruptCheckpoints)
	if err != nil {
		return nil, err
	}
	uri := tbl.Store().URI()
	for _, topic := range r.Topics {
		tv := *view
		tv.Kafka.Topic = topic
		if err := applyStartPositions(ctx, &tv, tbl, snap, logger); err != nil {
			return nil, err
		}
	}
	if err := ledger.CheckRetention(snap, view.Flush.Interval); err != nil {
		return nil, fmt.Errorf("table %s: %w", uri, err)
	}
	tableSchema, err := snap.Schema()
	if err != nil {
		return nil, fmt.Errorf("table %s: schema: %w", uri, err)
	}
	ec, err := view.EngineConfig(snap.Metadata().Configuration)
	if err != nil {
		return nil, err
	}
	if err := snap.ApplyWriterOptions(&ec.Writer); err != nil { // e.g. materialized partition columns
		return nil, fmt.Errorf("table %s: %w", uri, err)
	}
	route := actors.Route{Name: r.Table.Name, Topics: r.Topics, Where: r.Where, KeyColumns: view.Table.KeyColumns, CopyOnWrite: view.Table.UpsertStrategy == UpsertCopyOnWrite,
		DeleteWhen: view.Table.DeleteWhen, SequenceBy: view.Table.SequenceBy, KeyIndexMemory: int64(view.Table.KeyIndexMemory), App: ec.App, FlushInterval: ec.FlushInterval,
		FlushMaxBytes: ec.FlushMaxBytes, Writer: &ec.Writer, Maintenance: &ec.Maintenance,
		Table: tbl, Mapper: mapper, TableSchema: tableSchema, PartitionColumns: snap.PartitionColumns()}
	if r.TopicRegex != "" {
		if route.TopicRegex, err = regexp.Compile(r.TopicRegex); err != nil {
			return nil, fmt.Errorf("table %s: topic_regex: %w", r.Table.Name, err)
		}
	}
	return &openedRoute{route: r, view: view, tbl: tbl, snap: snap, engine: route}, nil
}

// pingKafka fails when no broker answers within timeout; a topic the
// brokers do not know yet is only a warning (the group waits for it).
func pingKafka(ctx context.Context, cfg *Config, timeout time.Duration, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	info, err := kafka.Ping(ctx, cfg.Kafka, logger)
	if err != nil {
		return withinTimeout(ctx, err, connectFlag(timeout))
	}
	if info.Err != nil {
		logger.Warn("kafka: the topic is not there yet; waiting for it", "err", info.Err)
	}
	return nil
}

// connectFlag names the run flag that bounds a start's connections, with
// its value, for errors.
func connectFlag(timeout time.Duration) string { return "--connect-timeout " + timeout.String() }

// counterValue reads a counter of this process.
func counterValue(c prometheus.Counter) int64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return int64(m.GetCounter().GetValue())
}

// stopEngine stops the engine, giving up after StopTimeout plus a second so
// a stuck storage call cannot hold the process past its grace period.
func stopEngine(e *actors.Engine, logger *slog.Logger) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Stop(ctx) }()
	select {
	case err := <-done:
		switch {
		case err == nil:
			logger.Info("stopped cleanly", "took", time.Since(start).Round(time.Millisecond))
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("%w: %w", ErrStopTimeout, err)
		default:
			return fmt.Errorf("final commit: %w (uncommitted records are re-read on the next start)", err)
		}
	case <-time.After(StopTimeout + time.Second):
		return fmt.Errorf("%w: the engine did not stop", ErrStopTimeout)
	}
}

// OpenTable opens the configured table as `run` does before it streams:
// created from table.columns when missing, its schema evolved when the
// configuration adds nullable columns, refused when they are incompatible.
// The mapper maps records as `run` would into this table. A nil logger
// discards logs.
func OpenTable(ctx context.Context, cfg *Config, logger *slog.Logger) (*delta.Table, *delta.Snapshot, *mapping.Mapper, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return openTable(ctx, cfg, DefaultConnectTimeout, logger, nil)
}

// openTable gives the store connectTimeout to answer the put-if-absent
// probe; reading the table's log afterwards is not bounded. A corrupt
// checkpoint the table is read around is logged once and counted in
// corrupt (nil: not counted).
func openTable(ctx context.Context, cfg *Config, connectTimeout time.Duration, logger *slog.Logger,
	corrupt prometheus.Counter) (*delta.Table, *delta.Snapshot, *mapping.Mapper, error) {
	mapper, err := mapping.New(cfg.MappingConfig(), cfg.Table.PartitionColumns)
	if err != nil {
		return nil, nil, nil, err
	}
	store, err := storage.Open(ctx, cfg.Table.URI, cfg.StorageOptions())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open table storage: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	err = CheckAtomicCommits(pctx, store, cfg.Storage.SingleWriter, logger)
	cancel()
	if err != nil {
		return nil, nil, nil, withinTimeout(pctx, err, connectFlag(connectTimeout))
	}
	tbl := delta.NewTable(store, delta.OnCorruptCheckpoint(func(file string, err error) {
		logger.Warn("corrupt checkpoint: the table is read from an older checkpoint or the JSON commits before it, "+
			"as Spark does, until a newer checkpoint is written", "table", cfg.Table.Name, "file", file, "err", err)
		if corrupt != nil {
			corrupt.Inc()
		}
	}))
	snap, err := ensureTable(ctx, tbl, mapper, cfg.Table, logger)
	if err != nil {
		return nil, nil, nil, err
	}
	if snap.TypeWideningAllowed() { // a wider writer schema widens a column rather than being a dead letter
		mc := cfg.MappingConfig()
		mc.TypeWidening = true
		if mapper, err = mapping.New(mc, cfg.Table.PartitionColumns); err != nil {
			return nil, nil, nil, err
		}
	}
	return tbl, snap, mapper, nil
}

// ensureTable loads the table, creating it when missing and evolving its
// schema when the configured columns add to it (delta's EnsureSchema). An
// incompatible change (a column's type, partitioning) refuses to start,
// naming the configuration key.
func ensureTable(ctx context.Context, tbl *delta.Table, m *mapping.Mapper, t TableConfig, logger *slog.Logger) (*delta.Snapshot, error) {
	parts := m.PartitionColumns()
	snap, done, err := tbl.EnsureSchema(ctx, m.Schema(), parts, t.createConf())
	var sce *delta.SchemaChangeError
	var pe *delta.PartitioningError
	var fe *delta.FeatureNotEnabledError
	switch {
	case errors.As(err, &pe):
		return nil, fmt.Errorf("table.partition_columns: configured %v but the table is partitioned by %v (partitioning cannot change)", pe.Want, pe.Table)
	case errors.As(err, &sce):
		return nil, fmt.Errorf("table.columns: column %q: table has %s, configuration wants %s: %s; refusing to start",
			sce.Column, orAbsent(sce.OldType), orAbsent(sce.NewType), sce.Reason)
	case errors.As(err, &fe):
		return nil, fmt.Errorf("table.columns: column %q: %w; refusing to start", fe.Column, err)
	case err != nil:
		return nil, err
	}
	if done.Created {
		logger.Info("table created", "uri", tbl.Store().URI(), "partition_columns", parts)
	}
	if t.deletionVectors() && !strings.EqualFold(snap.Metadata().Configuration[deletionVectorsProperty], "true") {
		return nil, fmt.Errorf("table.write_mode: upsert marks replaced rows in deletion vectors, which table %s does not allow: "+
			"set its property %s = true (Spark: ALTER TABLE ... SET TBLPROPERTIES ('%[2]s' = true)), give a new table, "+
			"or set table.upsert_strategy: copy_on_write", tbl.Store().URI(), deletionVectorsProperty)
	}
	if done.Evolved {
		logger.Info("table schema evolved", "version", done.Version, "added", done.Added, "widened", done.Widened)
	}
	return snap, nil
}

func orAbsent(s string) string {
	if s == "" {
		return "no such column"
	}
	return s
}

// reconcileOffsets compares the KV offsets mirror with the Delta log, which
// is the authority (ledger.Reconcile): each partition whose KV value
// differs is corrected, and one the log does not know is deleted, with a
// warning.
func reconcileOffsets(ctx context.Context, b *bridge.Bridge, snap *delta.Snapshot, app, topic string, logger *slog.Logger) {
	kv, err := b.Offsets(ctx, topic)
	if err != nil {
		logger.Warn("KV offsets mirror unreadable; the Delta log alone decides", "err", err)
		return
	}
	mirror := make(map[int32]int64, len(kv))
	for p, rec := range kv {
		mirror[p] = rec.Offset
	}
	inLog := ledger.Last(snap, app, topic)
	correct, drop := ledger.Reconcile(inLog, mirror)
	for _, p := range correct {
		kvOffset := "missing"
		if rec, ok := kv[p]; ok {
			kvOffset = strconv.FormatInt(rec.Offset, 10)
		}
		logger.Warn("KV offset differs from the Delta log; correcting it (the log wins)",
			"topic", topic, "partition", p, "kv", kvOffset, "log", inLog[p])
		if err := b.PutOffset(ctx, topic, p, bridge.OffsetRecord{Offset: inLog[p], Version: snap.Version(), Time: snap.Timestamp()}); err != nil {
			logger.Warn("KV offset not corrected", "partition", p, "err", err)
		}
	}
	for _, p := range drop {
		logger.Warn("KV offset for a partition the Delta log has no offset for; deleting it (the log wins)",
			"topic", topic, "partition", p, "kv", kv[p].Offset)
		if err := b.DeleteOffset(ctx, topic, p); err != nil {
			logger.Warn("KV offset not deleted", "partition", p, "err", err)
		}
	}
}

// StorageOptions converts the storage section to what storage.Open takes.
func (c *Config) StorageOptions() storage.Options {
	s := c.Storage
	return storage.Options{Endpoint: s.Endpoint, AccessKey: s.AccessKey, SecretKey: string(s.SecretKey), Region: s.Region, Secure: s.Secure,
		CAFile: s.CAFile}
}

// NewLogger returns the process logger: text or JSON on w at the level of c.
func NewLogger(c LogConfig, w io.Writer) (*slog.Logger, error) {
	level, err := parseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	hopts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, hopts)), nil
	}
	return slog.New(slog.NewTextHandler(w, hopts)), nil
}

var semver = regexp.MustCompile(`^v(\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?)(\+[0-9A-Za-z.-]+)?$`)

// version is stamped in by release builds:
//
//	go build -ldflags "-X github.com/deltaflow/deltaflow/runtime/daemon.version=1.2.3" ./cmd/deltaflow
//
// (the Makefile and the Dockerfile do it); empty in other builds.
var version string

// revision is the VCS commit stamped in the same way (…/daemon.revision=),
// for builds where Go records none: the image's, built without .git.
var revision string

// Version is the version the binary was built as: the one stamped in with
// -ldflags -X (a leading "v" dropped), else the module version it was built
// from, else "0.0.0-dev". The control service, `deltaflow version` and
// deltaflow_build_info report it.
func Version() string {
	if version != "" {
		return strings.TrimPrefix(version, "v")
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if m := semver.FindStringSubmatch(bi.Main.Version); m != nil {
			return m[1]
		}
	}
	return "0.0.0-dev"
}

// Toolchain is the Go toolchain go.mod names (its toolchain line; a test
// keeps them equal): what deltaflow is built and tested with.
const Toolchain = "go1.27.3"

// ToolchainWarning says what is wrong with a binary built with goVersion
// when that is older than Toolchain (a GOTOOLCHAIN=local build on an older
// Go), "" otherwise.
func ToolchainWarning(goVersion string) string {
	if !goversion.IsValid(goVersion) || goversion.Compare(goVersion, Toolchain) >= 0 {
		return ""
	}
	return fmt.Sprintf("built with %s, older than the %s go.mod names and deltaflow is tested with (its security and "+
		"runtime fixes are missing): rebuild with GOTOOLCHAIN=%s, or without GOTOOLCHAIN=local, and go fetches it", goVersion, Toolchain, Toolchain)
}

// Build is what `deltaflow version` and deltaflow_build_info report.
type Build struct {
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from, with "-dirty"
	// when the work tree had changes; "" when Go recorded none (go test,
	// -buildvcs=false, a build outside a checkout).
	Revision  string `json:"revision"`
	GoVersion string `json:"goversion"`
}

// BuildInfo describes the running binary.
func BuildInfo() Build {
	b := Build{Version: Version(), Revision: revision, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok && revision == "" {
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && b.Revision != "" {
			b.Revision += "-dirty"
		}
	}
	return b
}

// buildInfo is deltaflow_build_info: always 1, labelled with the version,
// the VCS revision and the Go toolchain, as Prometheus exporters report
// their build.
func buildInfo(b Build) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "deltaflow_build_info",
		Help: "Always 1; the labels say which deltaflow build is running."}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(b.Version, b.Revision, b.GoVersion).Set(1)
	return g
}
