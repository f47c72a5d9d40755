package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"sync/atomic"
	"time"

	"github.com/deltaflow/deltaflow/ledger"

	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/messages"
	"github.com/deltaflow/deltaflow/storage"
	"github.com/deltaflow/deltaflow/upsert"
)

// Config tunes the engine: what is the process's (the memory budget, the
// start and data-loss policies, retries), and the defaults of what each
// Route may set for its table. Zero fields take DefaultConfig's values
// (noted here for the reader).
type Config struct {
	// App prefixes the txn appIds ("<app>-<topic>-<partition>") of routes
	// that set none; default "deltaflow".
	App string
	// StartOffset is where a partition the table has no offset for starts:
	// ledger.StartEarliest (default) or ledger.StartLatest. The resolved
	// offset is committed before the partition is read.
	StartOffset string
	// OnDataLoss is what to do with a partition whose table offset is no
	// longer in its Kafka log: ledger.OnDataLossFail (default: hold it) or
	// ledger.OnDataLossSkip (resume at the log start, committing DATA_LOSS).
	OnDataLoss string
	// FlushInterval is how often an epoch is committed; default 60s.
	FlushInterval time.Duration
	// FlushMaxBytes starts an epoch early once this many bytes are buffered;
	// default 8 MiB.
	FlushMaxBytes int64
	// MemoryBudget is what the process's pipelines may hold: rows at their
	// mapped size until encoded, then the encoded files until uploaded.
	// Each table gets its Route.MemoryBudget, or an equal share of what the
	// routes that set none leave. A table out of room is read no further
	// until an epoch frees some. Default 16 MiB.
	MemoryBudget int64
	// MaxUnfinishedEpochs stops reading a table while more of its epochs
	// are in flight; default 2.
	MaxUnfinishedEpochs int
	// Writer configures the data files (compression, row groups).
	Writer delta.WriterOptions
	// Backoff paces pipeline rebuilds and actor restarts after failures;
	// default 200ms doubling to 30s.
	Backoff Backoff
	// RetryBackoff paces the retries of storage and DLQ operations while
	// their server is unreachable; default Backoff.Initial doubling to 5s:
	// a retry costs one request, and with Backoff's 30s cap ingest resumed
	// up to half a minute after MinIO came back.
	RetryBackoff Backoff
	// MaxRetry is how long storage and DLQ operations are retried before
	// the epoch is given up (and re-read); default 10m.
	MaxRetry time.Duration
	// Maintenance schedules OPTIMIZE, VACUUM and log cleanup; disabled by
	// default.
	Maintenance Maintenance
	// EventTimeColumn is the timestamp column whose newest committed value
	// deltaflow_event_freshness_seconds follows; default "event_time". A
	// table without it reports no freshness.
	EventTimeColumn string
	// Unrouted is what happens to a record no route's Where takes:
	// UnroutedSkip (default: counted in deltaflow_unrouted_records_total)
	// or UnroutedDLQ (a dead letter of the first table reading its topic).
	Unrouted string

	beforeRows func(key string) // test hook, see bufferConfig
}

// What Config.Unrouted may say.
const (
	UnroutedSkip = "skip"
	UnroutedDLQ  = "dlq"
)

// Route is one table the engine writes and the topics that feed it: a
// table's own settings (zero: Config's) and its connections.
type Route struct {
	// Name is the table's: in actor names, metric labels and health keys;
	// required and unique.
	Name string
	// Topics are the topics the table reads; TopicRegex, if set, adds
	// every topic whose name matches it.
	Topics     []string
	TopicRegex *regexp.Regexp
	// Where, if set, is the filter a row must pass to go to the table (the
	// language of `cat --where`, over the table's columns).
	Where string
	// KeyColumns, if set, make the table an upsert table: one row per key,
	// each epoch's latest change of a key replacing its row, a tombstone
	// (Mapper with mapping.Config.Tombstones) deleting it (package upsert).
	// CopyOnWrite rewrites files without their replaced rows instead of
	// marking them in deletion vectors.
	KeyColumns  []string
	CopyOnWrite bool
	// SequenceBy, in an upsert table, is the column that orders a key's
	// changes (else the Kafka offset does); DeletedKeys remembers the
	// sequences of deleted keys (none: a late change older than a key's
	// delete brings it back).
	SequenceBy  string
	DeletedKeys upsert.DeletedKeys
	// KeyIndexMemory, in an upsert table, bounds its key → file index
	// (upsert.KeyIndex); none when not positive. It is counted in the
	// table's MemoryBudget share, of which it takes at most half: the
	// buffers get the rest.
	KeyIndexMemory int64
	// DeleteWhen, in an upsert table, is a filter (Where's language) that
	// makes a row that passes it a delete of its key: a compacted topic's
	// own delete marker (`__deleted = 'true'`).
	DeleteWhen string
	// App, FlushInterval, FlushMaxBytes, EventTimeColumn: as Config's.
	App             string
	FlushInterval   time.Duration
	FlushMaxBytes   int64
	EventTimeColumn string
	// MemoryBudget is the table's share of Config.MemoryBudget; 0: an
	// equal share of what the routes that set one leave.
	MemoryBudget int64
	// Writer and Maintenance, if set, replace Config's.
	Writer      *delta.WriterOptions
	Maintenance *Maintenance

	Table  *delta.Table // its store receives the data files
	Mapper *mapping.Mapper
	// TableSchema, if set, is the table's schema: data files then use its
	// physical column names and column ids (column mapping).
	TableSchema *delta.StructType
	// PartitionColumns are the table's, in order.
	PartitionColumns []string
	Outbox           Outbox
}

// reads reports whether the route's table reads topic.
func (r *Route) reads(topic string) bool {
	return slices.Contains(r.Topics, topic) || r.TopicRegex != nil && r.TopicRegex.MatchString(topic)
}

// pathLimited is m rejecting the records whose data file's key the store
// would refuse: a partition directory name past the store's segment limit,
// or a directory that with the data file's name passes its key limit. Such
// a record is a dead letter; its upload would fail every time and hold its
// partition back for good.
func pathLimited(m *mapping.Mapper, b *bufferConfig) *mapping.Mapper {
	lim := storage.Limits(b.store)
	name := len(delta.NewDataFileKey(nil, nil, b.writer.Compression)) // "part-00000-<uuid>.c000.<codec>.parquet"
	return m.WithPathLimits(mapping.PathLimits{Segment: lim.Segment, Dir: lim.Key - len("/") - name})
}

// DefaultConfig returns the engine's defaults, which are also the daemon
// configuration's. RetryBackoff stays zero: it follows Backoff.
func DefaultConfig() Config {
	return Config{
		App:                 "deltaflow",
		StartOffset:         ledger.StartEarliest,
		OnDataLoss:          ledger.OnDataLossFail,
		FlushInterval:       time.Minute,
		FlushMaxBytes:       8 << 20,
		MemoryBudget:        16 << 20,
		MaxUnfinishedEpochs: 2,
		Writer:              delta.WriterOptions{RowGroupRows: 16 << 10}, // bounds each buffer's encoder memory
		Backoff:             Backoff{Initial: 200 * time.Millisecond, Max: 30 * time.Second},
		MaxRetry:            10 * time.Minute,
		EventTimeColumn:     "event_time",
		Unrouted:            UnroutedSkip,
	}
}

// maxRetryBackoff caps RetryBackoff's default (see Config.RetryBackoff).
const maxRetryBackoff = 5 * time.Second

func (c *Config) setDefaults() {
	d := DefaultConfig()
	if c.App == "" {
		c.App = d.App
	}
	if c.StartOffset == "" {
		c.StartOffset = d.StartOffset
	}
	if c.OnDataLoss == "" {
		c.OnDataLoss = d.OnDataLoss
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = d.FlushInterval
	}
	if c.FlushMaxBytes <= 0 {
		c.FlushMaxBytes = d.FlushMaxBytes
	}
	if c.MemoryBudget <= 0 {
		c.MemoryBudget = d.MemoryBudget
	}
	if c.MaxUnfinishedEpochs <= 0 {
		c.MaxUnfinishedEpochs = d.MaxUnfinishedEpochs
	}
	if c.Backoff.Initial <= 0 {
		c.Backoff = d.Backoff
	}
	if c.RetryBackoff.Initial <= 0 {
		c.RetryBackoff = Backoff{Initial: c.Backoff.Initial, Max: min(c.Backoff.Max, maxRetryBackoff)}
	}
	if c.MaxRetry <= 0 {
		c.MaxRetry = d.MaxRetry
	}
	if c.Unrouted == "" {
		c.Unrouted = d.Unrouted
	}
	if c.EventTimeColumn == "" {
		c.EventTimeColumn = d.EventTimeColumn
	}
	if c.Writer.RowGroupRows == 0 {
		c.Writer.RowGroupRows = d.Writer.RowGroupRows
	}
}

// streamPageSize is the page size of the files buffers write: every open
// file holds a page buffer per column, and 32 KiB pages halve a file's
// encoder memory (the library default is 256 KiB) for files ~10% larger,
// which OPTIMIZE rewrites with the default.
const streamPageSize = 32 << 10

// Deps are the engine's connections to the outside that are the
// process's (each Route has its table's).
type Deps struct {
	Metrics *Metrics
	Health  *Health
	Logger  *slog.Logger
	// Schemas fetches the schemas the tables' mappers lack (their
	// mapping.Config.Registry); nil when no table reads a registry.
	Schemas SchemaFetcher
}

// Names of the engine's top-level actors, per table. Spawned by name,
// their PIDs are known before they run, so every config that sends to them
// is complete at construction.
func committerName(table string) string   { return "committer-" + table }
func maintenanceName(table string) string { return "maintenance-" + table }

// Engine runs the actors. Create it, create the Kafka consumer with the
// engine as its Handler, then Start.
type Engine struct {
	cfg    Config
	deps   Deps
	system *actor.ActorSystem
	tables []*table
	ready  chan struct{} // closed once the committers are spawned

	// Set by Start, before it closes ready (see started).
	fetch    *fetcher
	cons     Consumer
	group    *groupOffsets
	cancel   context.CancelFunc
	loopDone chan error
	stopping atomic.Bool
	fatal    chan error // see Fatal
}

// table is one route's part of the engine.
type table struct {
	route       Route // defaults applied
	committer   *actor.PID
	maintenance *actor.PID  // nil when maintenance is disabled
	maintainer  *maintainer // the maintenance actor's worker (tests run rounds on it); nil when disabled
	reg         *registry
	budget      *Budget
	metrics     *Metrics
	health      *Health
	logger      *slog.Logger
	progress    *progress // set by Start
	where       *mapping.Where
	deleteWhen  *mapping.Where
}

// optionalWhere compiles filter over m's columns; nil when there is none.
func optionalWhere(m *mapping.Mapper, filter string) (*mapping.Where, error) {
	if filter == "" {
		return nil, nil
	}
	return m.Where(filter)
}

// ErrTopicRecreated is sent on [Engine.Fatal] when the topic was deleted
// and created again while this process read it: franz-go keeps fetching the
// old topic's ID, so only a new process (a new client) reads the new topic.
// Whatever kafka.on_data_loss decided is in the table by then: a restart
// holds the partitions again, or reads the new topic where the DATA_LOSS
// commit says.
var ErrTopicRecreated = errors.New("the Kafka topic was deleted and created again under this process; restarting to read it with a new client")

// Fatal receives an error when the engine cannot go on in this process
// (ErrTopicRecreated); the daemon exits non-zero so its restart policy
// starts a fresh one.
func (e *Engine) Fatal() <-chan error { return e.fatal }

// fail reports a fatal error on Fatal, once.
func (e *Engine) fail(err error) {
	select {
	case e.fatal <- err:
	default:
	}
}

// NewEngine checks the configuration and prepares an engine writing the
// routes' tables.
func NewEngine(cfg Config, deps Deps, routes ...Route) (*Engine, error) {
	cfg.setDefaults()
	if cfg.StartOffset != ledger.StartEarliest && cfg.StartOffset != ledger.StartLatest {
		return nil, fmt.Errorf("engine: start offset %q (want %q or %q)", cfg.StartOffset, ledger.StartEarliest, ledger.StartLatest)
	}
	if cfg.OnDataLoss != ledger.OnDataLossFail && cfg.OnDataLoss != ledger.OnDataLossSkip {
		return nil, fmt.Errorf("engine: on data loss %q (want %q or %q)", cfg.OnDataLoss, ledger.OnDataLossFail, ledger.OnDataLossSkip)
	}
	if cfg.Unrouted != UnroutedSkip && cfg.Unrouted != UnroutedDLQ {
		return nil, fmt.Errorf("engine: unrouted %q (want %q or %q)", cfg.Unrouted, UnroutedSkip, UnroutedDLQ)
	}
	if len(routes) == 0 {
		return nil, errors.New("engine: no route")
	}
	if deps.Metrics == nil {
		deps.Metrics = NewMetrics(nil)
	}
	if deps.Health == nil {
		deps.Health = NewHealth()
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	shares, err := memoryShares(cfg.MemoryBudget, routes)
	if err != nil {
		return nil, err
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return deps.Logger.With("component", "actors")
	}))
	e := &Engine{cfg: cfg, deps: deps, system: system, ready: make(chan struct{}), fatal: make(chan error, 1)}
	names := map[string]bool{}
	for i, r := range routes {
		switch {
		case r.Name == "" || names[r.Name]:
			return nil, fmt.Errorf("engine: route %d: name %q empty or not unique", i, r.Name)
		case len(r.Topics) == 0 && r.TopicRegex == nil:
			return nil, fmt.Errorf("engine: route %s: no topic", r.Name)
		case r.Table == nil || r.Mapper == nil || r.Outbox == nil:
			return nil, fmt.Errorf("engine: route %s: table, mapper and outbox are required", r.Name)
		}
		names[r.Name] = true
		r.withDefaults(cfg)
		r.KeyIndexMemory = keyIndexMemory(r, shares[i])
		t := &table{route: r, committer: actor.NewPID(system.Address(), committerName(r.Name)), reg: newRegistry(),
			budget: NewBudget(shares[i]-r.KeyIndexMemory, cfg.MaxUnfinishedEpochs), metrics: deps.Metrics.Table(r.Name),
			health: deps.Health.Table(r.Name), logger: deps.Logger.With("table", r.Name)}
		var err error
		if t.where, err = optionalWhere(r.Mapper, r.Where); err != nil {
			return nil, fmt.Errorf("engine: route %s: %w", r.Name, err)
		}
		if t.deleteWhen, err = optionalWhere(r.Mapper, r.DeleteWhen); err != nil {
			return nil, fmt.Errorf("engine: route %s: delete when: %w", r.Name, err)
		}
		if r.Maintenance.enabled() {
			t.maintenance = actor.NewPID(system.Address(), maintenanceName(r.Name))
			t.maintainer = &maintainer{cfg: *r.Maintenance, table: r.Table, writer: *r.Writer, outbox: r.Outbox,
				metrics: t.metrics, logger: t.logger.With("component", "maintenance")}
		}
		e.tables = append(e.tables, t)
	}
	return e, nil
}

// withDefaults fills r's zero settings from cfg's.
func (r *Route) withDefaults(cfg Config) {
	if r.App == "" {
		r.App = cfg.App
	}
	if r.FlushInterval <= 0 {
		r.FlushInterval = cfg.FlushInterval
	}
	if r.FlushMaxBytes <= 0 {
		r.FlushMaxBytes = cfg.FlushMaxBytes
	}
	if r.EventTimeColumn == "" {
		r.EventTimeColumn = cfg.EventTimeColumn
	}
	if r.Writer == nil {
		w := cfg.Writer
		r.Writer = &w
	}
	if r.Writer.RowGroupRows == 0 {
		r.Writer.RowGroupRows = cfg.Writer.RowGroupRows
	}
	if r.Maintenance == nil {
		m := cfg.Maintenance
		r.Maintenance = &m
	}
}

// memoryShares splits budget among the routes: each one's MemoryBudget, the
// rest equally among those that set none.
func memoryShares(budget int64, routes []Route) ([]int64, error) {
	shares := make([]int64, len(routes))
	rest, open := budget, 0
	for i, r := range routes {
		shares[i] = r.MemoryBudget
		rest -= r.MemoryBudget
		if r.MemoryBudget <= 0 {
			open++
		}
	}
	if open > 0 && rest < int64(open) {
		return nil, fmt.Errorf("engine: the routes' memory budgets leave %d bytes of %d for the %d routes that set none", rest, budget, open)
	}
	for i := range shares {
		if shares[i] <= 0 {
			shares[i] = rest / int64(open)
		}
	}
	return shares, nil
}

// keyIndexMemory is what route r's key index may hold of its memory
// share: its KeyIndexMemory, at most half the share, so that the buffers
// keep room to read on; 0 without an index (not an upsert table).
func keyIndexMemory(r Route, share int64) int64 {
	if len(r.KeyColumns) == 0 || r.KeyIndexMemory <= 0 {
		return 0
	}
	return min(r.KeyIndexMemory, share/2)
}

// unroutedFor says whether table i's readers of topic decide which of
// its records no route takes: when the table is the first reading the
// topic and every table reading it filters (a table without a filter takes
// every record). nil otherwise.
func (e *Engine) unroutedFor(i int, topic string) *unrouted {
	tables := e.readers(topic)
	if len(tables) == 0 || tables[0] != e.tables[i] {
		return nil
	}
	u := &unrouted{dlq: e.cfg.Unrouted == UnroutedDLQ, metric: e.deps.Metrics.Unrouted.WithLabelValues(topic)}
	for _, t := range tables {
		if t.where == nil {
			return nil
		}
		if t != e.tables[i] {
			u.others = append(u.others, otherRoute{name: t.route.Name, mapper: t.route.Mapper, where: t.where})
		}
	}
	return u
}

// readers returns the tables that read topic.
func (e *Engine) readers(topic string) []*table {
	var out []*table
	for _, t := range e.tables {
		if t.route.reads(topic) {
			out = append(out, t)
		}
	}
	return out
}

// Assigned implements kafka.Handler: the committer of every table reading
// the topic checks its offsets of the partitions and spawns their readers;
// the consumer starts each partition at the lowest offset any of them
// continues from (the others skip what they hold), and holds one every
// table holds.
func (e *Engine) Assigned(ctx context.Context, topic string, partitions []int32) (map[int32]int64, error) {
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	tables := e.readers(topic)
	if len(tables) == 0 {
		return nil, fmt.Errorf("no table reads topic %s", topic)
	}
	replies := make([]chan messages.Assigned, len(tables))
	for i, t := range tables {
		replies[i] = make(chan messages.Assigned, 1)
		e.system.Root.Send(t.committer, &messages.Assign{Topic: topic, Partitions: partitions, Reply: replies[i]})
	}
	start := map[int32]int64{}
	var starts []tableStarts
	for i, t := range tables {
		var a messages.Assigned
		select {
		case a = <-replies[i]:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if a.Err != nil {
			return nil, fmt.Errorf("table %s: %w", t.route.Name, a.Err)
		}
		starts = append(starts, tableStarts{sink: slices.Index(e.tables, t), gen: a.Gen, offsets: ledger.Of(topic, a.Next)})
		for p, off := range a.Next {
			if cur, ok := start[p]; !ok || cur == ledger.Held || (off != ledger.Held && off < cur) {
				start[p] = off
			}
		}
	}
	e.fetch.assigned(topicPartitions(topic, partitions), starts)
	e.deps.Logger.Info("partitions assigned", "topic", topic, "partitions", partitions, "offsets", start)
	return start, nil
}

// Revoked implements kafka.Handler: the in-flight epochs of every table
// reading the topic are dropped.
func (e *Engine) Revoked(ctx context.Context, topic string, partitions []int32) {
	select {
	case <-e.ready:
	default:
		return
	}
	if e.stopping.Load() {
		return // the final epochs are committed; nothing in flight to drop
	}
	for _, t := range e.readers(topic) {
		reply := make(chan struct{})
		e.system.Root.Send(t.committer, &messages.Revoke{Topic: topic, Partitions: partitions, Reply: reply})
		select {
		case <-reply:
		case <-ctx.Done():
		}
	}
	e.fetch.revoked(topicPartitions(topic, partitions))
	e.deps.Logger.Info("partitions revoked", "topic", topic, "partitions", partitions)
}

// topicPartitions names partitions of topic.
func topicPartitions(topic string, partitions []int32) []tp {
	tps := make([]tp, len(partitions))
	for i, p := range partitions {
		tps[i] = tp{Topic: topic, Partition: p}
	}
	return tps
}

// BrokerDialed implements kafka.BrokerWatcher: a failed connection to a
// broker makes /readyz report Kafka degraded until a connection succeeds.
func (e *Engine) BrokerDialed(addr string, err error) {
	if err != nil {
		e.deps.Metrics.Errors.WithLabelValues(componentKafka).Inc()
		e.deps.Health.Degrade("kafka", fmt.Sprintf("broker %s: %v", addr, err))
		return
	}
	e.deps.Health.Recover("kafka")
}

// Start spawns the committers (which load their tables) and the fetch
// loop. The consumer is the one dependency not in Deps: it is built with
// the engine as its kafka.Handler, so only after NewEngine.
func (e *Engine) Start(cons Consumer) error {
	e.cons = cons
	e.group = newGroupOffsets(cons, len(e.tables), e.deps.Logger)
	sinks := make([]*sink, len(e.tables))
	for i, t := range e.tables {
		sinks[i] = &sink{name: t.route.Name, committer: t.committer, reg: t.reg, budget: t.budget}
	}
	e.fetch = newFetcher(fetcherDeps{cons: cons, sinks: sinks, system: e.system, metrics: e.deps.Metrics, health: e.deps.Health,
		logger: e.deps.Logger, schemas: e.deps.Schemas})
	ccfgs := make([]*committerConfig, len(e.tables))
	for i, t := range e.tables {
		ccfg, err := e.tableConfig(i, t)
		if err != nil {
			return err
		}
		ccfgs[i] = ccfg
	}
	for i, t := range e.tables {
		// Maintenance first: the committer tells it about checkpoints.
		if t.maintainer != nil {
			if err := e.spawnSupervised(t, maintenanceName(t.route.Name), "maintenance", t.maintenance, newMaintenanceActor(t.maintainer)); err != nil {
				return err
			}
		}
		if err := e.spawnSupervised(t, committerName(t.route.Name), "committer", t.committer, newCommitter(ccfgs[i])); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.loopDone = make(chan error, 1)
	close(e.ready) // every field Start sets is set

	go func() { e.loopDone <- e.fetch.run(ctx) }()
	for _, t := range e.tables {
		go e.watchBudget(ctx, t)
	}
	return nil
}

// tableConfig wires table i's committer, pipeline and buffers.
func (e *Engine) tableConfig(i int, t *table) (*committerConfig, error) {
	r := t.route
	t.progress = newProgress(time.Now())
	writer := *r.Writer
	if writer.PageBufferSize == 0 {
		writer.PageBufferSize = streamPageSize
	}
	retry := retryPolicy{backoff: e.cfg.RetryBackoff, maxElapsed: e.cfg.MaxRetry} // storage and DLQ operations
	fetch := e.fetch
	// pipelineOf is the pipeline of mapper m's rows into the table of
	// tableSchema: made again when the table's schema evolves.
	pipelineOf := func(m *mapping.Mapper, tableSchema *delta.StructType) (*pipelineConfig, error) {
		dataSchema := m.DataSchema()
		if tableSchema != nil {
			var err error
			if dataSchema, err = delta.MapColumns(tableSchema, dataSchema); err != nil {
				return nil, fmt.Errorf("engine: table %s: %w", r.Name, err)
			}
		}
		// What each open file's writer costs, reserved by the readers
		// before they make a buffer open one (materialized partition
		// columns, which differ by buffer, are settled by the buffer).
		probe, err := delta.NewFileWriter(io.Discard, dataSchema, writer)
		if err != nil {
			return nil, fmt.Errorf("engine: table %s: %w", r.Name, err)
		}
		var up *upsert.Table
		if len(r.KeyColumns) > 0 {
			keys, err := upsert.NewKeys(m.DataSchema(), r.KeyColumns)
			if err != nil {
				return nil, fmt.Errorf("engine: table %s: %w", r.Name, err)
			}
			// A new index with each schema: a key column's encoding may
			// change with it (an integer widened to a decimal).
			up = &upsert.Table{Keys: keys, CopyOnWrite: r.CopyOnWrite, Writer: writer, Index: upsert.NewKeyIndex(r.KeyIndexMemory)}
			if up.Index != nil {
				up.Index.Observe(func(b int64) { t.metrics.KeyIndexBytes.Set(float64(b)) })
			}
			if r.SequenceBy != "" {
				if up.Sequence, err = upsert.NewSequence(m.DataSchema(), r.SequenceBy); err != nil {
					return nil, fmt.Errorf("engine: table %s: sequence_by: %w", r.Name, err)
				}
				up.Deleted = r.DeletedKeys
			}
		}
		bcfg := &bufferConfig{fileMemory: probe.FixedMemory(), upsert: up,
			store: r.Table.Store(), dataSchema: dataSchema, tableSchema: tableSchema, partitionColumns: r.PartitionColumns,
			writer: writer, committer: t.committer, budget: t.budget, health: t.health, metrics: t.metrics,
			retry: retry, logger: t.logger, beforeRows: e.cfg.beforeRows,
		}
		return &pipelineConfig{tableName: r.Name, mapper: pathLimited(m, bcfg), where: t.where, deleteWhen: t.deleteWhen, buffer: bcfg, committer: t.committer, reg: t.reg,
			metrics: t.metrics, logger: t.logger, unrouted: func(topic string) *unrouted { return e.unroutedFor(i, topic) },
			behind: func(gen uint64, p tp, from, need int64, schema int) { fetch.behind(i, gen, p, from, need, schema) }}, nil
	}
	pcfg, err := pipelineOf(r.Mapper, r.TableSchema)
	if err != nil {
		return nil, err
	}
	return &committerConfig{
		name: r.Name, sink: i, app: r.App, table: r.Table, flushInterval: r.FlushInterval,
		starts: ledger.Policy{StartOffset: e.cfg.StartOffset, OnDataLoss: e.cfg.OnDataLoss}, kafka: e.cons, fatal: e.fail,
		epochTimeout: max(2*r.FlushInterval, e.cfg.MaxRetry+time.Minute), idleEpochs: 3,
		backoff: e.cfg.Backoff, retry: retry, pipeline: pcfg, pipelineOf: pipelineOf, outbox: r.Outbox,
		group: e.group, fetch: fetch, budget: t.budget, health: t.health, metrics: t.metrics,
		logger: t.logger, eventTime: r.EventTimeColumn, maintenance: t.maintenance, progress: t.progress,
	}, nil
}

// started reports whether Start succeeded. Pause, Resume, Position and
// Stop check it: the fields they use are Start's.
func (e *Engine) started() bool {
	select {
	case <-e.ready:
		return true
	default:
		return false
	}
}

// errNotStarted is returned by the methods that need a started engine.
var errNotStarted = errors.New("engine not started")

// spawnSupervised spawns table t's top-level actor name (of kind label) at
// the PID the engine reserved for it, under a guardian that restarts it
// after a backoff.
func (e *Engine) spawnSupervised(t *table, name, label string, want *actor.PID, producer actor.Producer) error {
	guardian := &restartStrategy{name: name, label: label, backoff: e.cfg.Backoff, metrics: t.metrics, outbox: t.route.Outbox, logger: t.logger}
	pid, err := e.system.Root.SpawnNamed(actor.PropsFromProducer(producer, actor.WithGuardian(guardian)), name)
	if err != nil {
		return fmt.Errorf("engine: spawn %s: %w", name, err)
	}
	if !pid.Equal(want) {
		return fmt.Errorf("engine: %s spawned as %s, not at its reserved PID %s", name, pid, want)
	}
	t.route.Outbox.Publish(&bridge.ActorEvent{Actor: name, Action: bridge.ActorStarted})
	return nil
}

// watchBudget starts an epoch of table t early when its buffers pass its
// FlushMaxBytes. It sleeps until they do (no timer while the pipeline is
// idle), then asks again every budgetRecheck while they stay above it.
func (e *Engine) watchBudget(ctx context.Context, t *table) {
	t.budget.Observe(func(b int64) { t.metrics.BufferedBytes.Set(float64(b)) })
	for t.budget.WaitAbove(ctx, t.route.FlushMaxBytes) {
		e.system.Root.Send(t.committer, &messages.CommitNow{Reason: messages.ReasonMaxBytes})
		select {
		case <-ctx.Done():
			return
		case <-time.After(budgetRecheck):
		}
	}
}

// budgetRecheck is how often watchBudget repeats its request while the
// buffers stay past FlushMaxBytes (an epoch already running takes the
// request as soon as it ends).
const budgetRecheck = 100 * time.Millisecond

// CommitNow starts an epoch of every table now (messages.CommitNow) and
// waits until it and every earlier one are committed: everything read so
// far is in the tables. Its flush events say reason "request".
func (e *Engine) CommitNow(ctx context.Context) error {
	return e.commitNow(ctx, messages.ReasonRequest)
}

// commitNow is CommitNow with the reason the epochs are sealed with (Stop:
// shutdown, CatchUp: catch_up). The tables commit at once; the first error
// is returned.
func (e *Engine) commitNow(ctx context.Context, reason messages.Reason) error {
	replies := make([]chan error, len(e.tables))
	for i, t := range e.tables {
		replies[i] = make(chan error, 1)
		e.system.Root.Send(t.committer, &messages.CommitNow{Reason: reason, Reply: replies[i]})
	}
	var errs []error
	for i, reply := range replies {
		select {
		case err := <-reply:
			if err != nil {
				errs = append(errs, fmt.Errorf("table %s: %w", e.tables[i].route.Name, err))
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}

// Pause stops reading Kafka until Resume (the control service). It returns
// once the fetch loop has paused (it interrupts the poll in flight): records
// that poll returns are still read, records produced after Pause returns are
// not. After Start, a loop not polling yet (the table still loading) pauses
// before its first poll; before Start, Pause returns an error.
func (e *Engine) Pause(ctx context.Context) error {
	if !e.started() {
		return fmt.Errorf("pause: %w", errNotStarted)
	}
	e.fetch.userPaused.Store(true)
	e.deps.Metrics.Paused.Set(1)
	e.fetch.interruptPoll()
	for e.fetch.looping.Load() && !e.fetch.userPauseDone.Load() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("pause: the fetch loop has not paused yet: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// Resume undoes Pause; before Start it does nothing.
func (e *Engine) Resume() {
	if !e.started() {
		return
	}
	e.fetch.userPaused.Store(false)
	e.deps.Metrics.Paused.Set(0)
	e.fetch.interruptPoll()
}

// Committed returns, per assigned partition, the next offset to read
// according to the committers' snapshots: for a partition several tables
// read, the lowest.
func (e *Engine) Committed(ctx context.Context) (map[tp]int64, error) {
	out := map[tp]int64{}
	for _, t := range e.tables {
		res, err := e.system.Root.RequestFuture(t.committer, &committedOffsets{}, 10*time.Second).Result()
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.route.Name, err)
		}
		lowest(out, res.(map[tp]int64))
	}
	return out, nil
}

// Position returns the next offset the fetch loop hands the readers, per
// partition: for a partition several tables read, the lowest (nil before
// Start).
func (e *Engine) Position() map[tp]int64 {
	if !e.started() {
		return nil
	}
	out := map[tp]int64{}
	for i := range e.tables {
		lowest(out, e.fetch.position(i))
	}
	return out
}

// lowest merges m into into, keeping the lower offset of a partition in
// both.
func lowest(into, m map[tp]int64) {
	for p, off := range m {
		if cur, ok := into[p]; !ok || off < cur {
			into[p] = off
		}
	}
}

// Stop stops reading, commits what was read (within ctx), closes the Kafka
// consumer and stops the actors. The returned error is the final commit's.
// Before Start (or after it failed) there is nothing to stop: it returns nil.
func (e *Engine) Stop(ctx context.Context) error {
	if !e.started() {
		return nil
	}
	e.cancel()
	<-e.loopDone
	err := e.commitNow(ctx, messages.ReasonShutdown)
	e.stopping.Store(true)
	// The last commits' group offsets first: answered after the leave,
	// franz-go warns that the member was kicked from the group.
	e.group.inFlight.Wait()
	e.cons.Close()
	for _, t := range e.tables {
		if t.maintenance != nil {
			// A maintenance run in progress is cancelled; its orphans are VACUUM's.
			_ = e.system.Root.PoisonFuture(t.maintenance).Wait()
			t.route.Outbox.Publish(&bridge.ActorEvent{Actor: maintenanceName(t.route.Name), Action: bridge.ActorStopped})
		}
		if perr := e.system.Root.PoisonFuture(t.committer).Wait(); perr != nil && err == nil {
			err = perr
		}
		t.route.Outbox.Publish(&bridge.ActorEvent{Actor: committerName(t.route.Name), Action: bridge.ActorStopped})
	}
	return err
}

func init() {
	// protoactor's process registry is 1024 concurrent maps of
	// cmap.SHARD_COUNT shards each: 32768 Go maps, ~3 MiB of heap that
	// every GC cycle scans, for the few dozen actors of the engine. One
	// shard per map leaves 1024 locks, plenty.
	cmap.SHARD_COUNT = 1
}
