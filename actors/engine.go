package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
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
)

// Config tunes the engine. Zero fields take DefaultConfig's values (noted
// here for the reader).
type Config struct {
	// App prefixes the txn appIds ("<app>-<topic>-<partition>"); default
	// "deltaflow". Two deployments writing one table need different apps.
	App string
	// Topic is the Kafka topic; required.
	Topic string
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
	// MemoryBudget pauses Kafka while buffers hold this many bytes: rows at
	// their mapped size until encoded, then the encoded files until
	// uploaded. Default 16 MiB.
	MemoryBudget int64
	// MaxUnfinishedEpochs pauses Kafka while more epochs are in flight;
	// default 2.
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

	beforeRows func(key string) // test hook, see bufferConfig
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

// Deps are the engine's connections to the outside.
type Deps struct {
	Table  *delta.Table // its store receives the data files
	Mapper *mapping.Mapper
	// TableSchema, if set, is the table's schema: data files then use its
	// physical column names and column ids (column mapping).
	TableSchema *delta.StructType
	// PartitionColumns are the table's, in order.
	PartitionColumns []string
	Outbox           Outbox
	Metrics          *Metrics
	Health           *Health
	Logger           *slog.Logger
}

// Names of the engine's top-level actors. Spawned by name, their PIDs are
// known before they run, so every config that sends to them is complete at
// construction.
const (
	committerName   = "committer"
	maintenanceName = "maintenance"
)

// Engine runs the actors. Create it, create the Kafka consumer with the
// engine as its Handler, then Start.
type Engine struct {
	cfg    Config
	deps   Deps
	system *actor.ActorSystem
	reg    *registry
	budget *Budget
	ready  chan struct{} // closed once the committer is spawned

	committer   *actor.PID
	maintenance *actor.PID  // nil when maintenance is disabled
	maintainer  *maintainer // the maintenance actor's worker (tests run rounds on it); nil when disabled

	// Set by Start, before it closes ready (see started).
	fetch    *fetcher
	cons     Consumer
	progress *progress
	cancel   context.CancelFunc
	loopDone chan error
	// groupCommits: the committer's Kafka group offset commits in flight.
	groupCommits sync.WaitGroup
	stopping     atomic.Bool
	fatal        chan error // see Fatal
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

// NewEngine checks the configuration and prepares an engine.
func NewEngine(cfg Config, deps Deps) (*Engine, error) {
	cfg.setDefaults()
	if cfg.Topic == "" {
		return nil, errors.New("engine: no topic")
	}
	if cfg.StartOffset != ledger.StartEarliest && cfg.StartOffset != ledger.StartLatest {
		return nil, fmt.Errorf("engine: start offset %q (want %q or %q)", cfg.StartOffset, ledger.StartEarliest, ledger.StartLatest)
	}
	if cfg.OnDataLoss != ledger.OnDataLossFail && cfg.OnDataLoss != ledger.OnDataLossSkip {
		return nil, fmt.Errorf("engine: on data loss %q (want %q or %q)", cfg.OnDataLoss, ledger.OnDataLossFail, ledger.OnDataLossSkip)
	}
	if deps.Table == nil || deps.Mapper == nil || deps.Outbox == nil {
		return nil, errors.New("engine: table, mapper and outbox are required")
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
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return deps.Logger.With("component", "actors")
	}))
	e := &Engine{cfg: cfg, deps: deps, system: system, reg: newRegistry(), budget: NewBudget(cfg.MemoryBudget, cfg.MaxUnfinishedEpochs),
		ready: make(chan struct{}), fatal: make(chan error, 1), committer: actor.NewPID(system.Address(), committerName)}
	if cfg.Maintenance.enabled() {
		e.maintenance = actor.NewPID(system.Address(), maintenanceName)
		e.maintainer = &maintainer{cfg: cfg.Maintenance, table: deps.Table, writer: cfg.Writer, outbox: deps.Outbox,
			metrics: deps.Metrics, logger: deps.Logger.With("component", maintenanceName)}
	}
	return e, nil
}

// Assigned implements kafka.Handler: the committer spawns readers for the
// partitions and answers where the Delta log says each continues.
func (e *Engine) Assigned(ctx context.Context, topic string, partitions []int32) (map[int32]int64, error) {
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	reply := make(chan messages.Assigned, 1)
	e.system.Root.Send(e.committer, &messages.Assign{Topic: topic, Partitions: partitions, Reply: reply})
	select {
	case a := <-reply:
		if a.Err != nil {
			return nil, a.Err
		}
		e.deps.Logger.Info("partitions assigned", "partitions", partitions, "offsets", a.Next)
		return a.Next, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Revoked implements kafka.Handler: the in-flight epoch is dropped.
func (e *Engine) Revoked(ctx context.Context, topic string, partitions []int32) {
	select {
	case <-e.ready:
	default:
		return
	}
	if e.stopping.Load() {
		return // the final epoch is committed; nothing in flight to drop
	}
	reply := make(chan struct{})
	e.system.Root.Send(e.committer, &messages.Revoke{Topic: topic, Partitions: partitions, Reply: reply})
	select {
	case <-reply:
	case <-ctx.Done():
	}
	e.deps.Logger.Info("partitions revoked", "partitions", partitions)
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

// Start spawns the committer (which loads the table) and the fetch loop.
// The consumer is the one dependency not in Deps: it is built with the
// engine as its kafka.Handler, so only after NewEngine.
func (e *Engine) Start(cons Consumer) error {
	e.cons = cons
	e.progress = newProgress(time.Now())
	e.fetch = newFetcher(fetcherDeps{cons: cons, reg: e.reg, budget: e.budget, system: e.system, committer: e.committer,
		metrics: e.deps.Metrics, logger: e.deps.Logger})
	writer := e.cfg.Writer
	if writer.PageBufferSize == 0 {
		writer.PageBufferSize = streamPageSize
	}
	dataSchema := e.deps.Mapper.DataSchema()
	if e.deps.TableSchema != nil {
		var err error
		if dataSchema, err = delta.MapColumns(e.deps.TableSchema, dataSchema); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
	}
	// What each open file's writer costs, reserved by the readers before
	// they make a buffer open one (materialized partition columns, which
	// differ by buffer, are settled by the buffer).
	probe, err := delta.NewFileWriter(io.Discard, dataSchema, writer)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	retry := retryPolicy{backoff: e.cfg.RetryBackoff, maxElapsed: e.cfg.MaxRetry} // storage and DLQ operations
	bcfg := &bufferConfig{fileMemory: probe.FixedMemory(),
		store: e.deps.Table.Store(), dataSchema: dataSchema, tableSchema: e.deps.TableSchema, partitionColumns: e.deps.PartitionColumns,
		writer: writer, committer: e.committer, budget: e.budget, health: e.deps.Health, metrics: e.deps.Metrics,
		retry: retry, logger: e.deps.Logger, beforeRows: e.cfg.beforeRows,
	}
	pcfg := &pipelineConfig{topic: e.cfg.Topic, mapper: pathLimited(e.deps.Mapper, bcfg), buffer: bcfg, committer: e.committer, reg: e.reg,
		metrics: e.deps.Metrics, logger: e.deps.Logger}
	ccfg := &committerConfig{
		app: e.cfg.App, topic: e.cfg.Topic, table: e.deps.Table, flushInterval: e.cfg.FlushInterval,
		starts: ledger.Policy{StartOffset: e.cfg.StartOffset, OnDataLoss: e.cfg.OnDataLoss}, kafka: cons, fatal: e.fail,
		epochTimeout: max(2*e.cfg.FlushInterval, e.cfg.MaxRetry+time.Minute), idleEpochs: 3,
		backoff: e.cfg.Backoff, retry: retry, pipeline: pcfg, outbox: e.deps.Outbox,
		offsets: cons, groupCommits: &e.groupCommits, fetch: e.fetch, budget: e.budget, health: e.deps.Health, metrics: e.deps.Metrics,
		logger: e.deps.Logger, eventTime: e.cfg.EventTimeColumn, maintenance: e.maintenance, progress: e.progress,
	}
	// Maintenance first: the committer tells it about checkpoints.
	if e.maintainer != nil {
		if err := e.spawnSupervised(maintenanceName, e.maintenance, newMaintenanceActor(e.maintainer)); err != nil {
			return err
		}
	}
	if err := e.spawnSupervised(committerName, e.committer, newCommitter(ccfg)); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.loopDone = make(chan error, 1)
	close(e.ready) // every field Start sets is set

	go func() { e.loopDone <- e.fetch.run(ctx) }()
	go e.watchBudget(ctx)
	return nil
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

// spawnSupervised spawns the top-level actor name at the PID the engine
// reserved for it, under a guardian that restarts it after a backoff.
func (e *Engine) spawnSupervised(name string, want *actor.PID, producer actor.Producer) error {
	guardian := &restartStrategy{name: name, backoff: e.cfg.Backoff, deps: &e.deps}
	pid, err := e.system.Root.SpawnNamed(actor.PropsFromProducer(producer, actor.WithGuardian(guardian)), name)
	if err != nil {
		return fmt.Errorf("engine: spawn %s: %w", name, err)
	}
	if !pid.Equal(want) {
		return fmt.Errorf("engine: %s spawned as %s, not at its reserved PID %s", name, pid, want)
	}
	e.deps.Outbox.Publish(&bridge.ActorEvent{Actor: name, Action: bridge.ActorStarted})
	return nil
}

// watchBudget starts an epoch early when buffers pass FlushMaxBytes. It
// sleeps until they do (no timer while the pipeline is idle), then asks
// again every budgetRecheck while they stay above it.
func (e *Engine) watchBudget(ctx context.Context) {
	e.budget.Observe(func(b int64) { e.deps.Metrics.BufferedBytes.Set(float64(b)) })
	for e.budget.WaitAbove(ctx, e.cfg.FlushMaxBytes) {
		e.system.Root.Send(e.committer, &messages.CommitNow{Reason: messages.ReasonMaxBytes})
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

// CommitNow starts an epoch now (messages.CommitNow) and waits until it and
// every earlier one are committed: everything read so far is in the table.
// Its flush event says reason "request".
func (e *Engine) CommitNow(ctx context.Context) error {
	return e.commitNow(ctx, messages.ReasonRequest)
}

// commitNow is CommitNow with the reason the epoch is sealed with (Stop:
// shutdown, CatchUp: catch_up).
func (e *Engine) commitNow(ctx context.Context, reason messages.Reason) error {
	reply := make(chan error, 1)
	e.system.Root.Send(e.committer, &messages.CommitNow{Reason: reason, Reply: reply})
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
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

// Committed returns the next offset to read of each assigned partition
// according to the committer's snapshot.
func (e *Engine) Committed(ctx context.Context) (map[int32]int64, error) {
	res, err := e.system.Root.RequestFuture(e.committer, &committedOffsets{}, 10*time.Second).Result()
	if err != nil {
		return nil, err
	}
	return res.(map[int32]int64), nil
}

// Position returns the next offset the fetch loop will read, per partition
// (nil before Start).
func (e *Engine) Position() map[int32]int64 {
	if !e.started() {
		return nil
	}
	return e.fetch.position()
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
	e.groupCommits.Wait()
	e.cons.Close()
	if e.maintenance != nil {
		// A maintenance run in progress is cancelled; its orphans are VACUUM's.
		_ = e.system.Root.PoisonFuture(e.maintenance).Wait()
		e.deps.Outbox.Publish(&bridge.ActorEvent{Actor: maintenanceName, Action: bridge.ActorStopped})
	}
	if perr := e.system.Root.PoisonFuture(e.committer).Wait(); perr != nil && err == nil {
		err = perr
	}
	e.deps.Outbox.Publish(&bridge.ActorEvent{Actor: committerName, Action: bridge.ActorStopped})
	return err
}

func init() {
	// protoactor's process registry is 1024 concurrent maps of
	// cmap.SHARD_COUNT shards each: 32768 Go maps, ~3 MiB of heap that
	// every GC cycle scans, for the few dozen actors of the engine. One
	// shard per map leaves 1024 locks, plenty.
	cmap.SHARD_COUNT = 1
}
