package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"

	"github.com/deltaflow/deltaflow/actors/mapping"
	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/messages"
	"github.com/deltaflow/deltaflow/storage"
)

// Config tunes the engine. Zero fields take the defaults noted.
type Config struct {
	// App prefixes the txn appIds ("<app>-<topic>-<partition>"); default
	// "deltaflow". Two deployments writing one table need different apps.
	App string
	// Topic is the Kafka topic; required.
	Topic string
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

func (c *Config) setDefaults() {
	if c.App == "" {
		c.App = "deltaflow"
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = time.Minute
	}
	if c.FlushMaxBytes <= 0 {
		c.FlushMaxBytes = 8 << 20
	}
	if c.MemoryBudget <= 0 {
		c.MemoryBudget = 16 << 20
	}
	if c.MaxUnfinishedEpochs <= 0 {
		c.MaxUnfinishedEpochs = 2
	}
	if c.Backoff.Initial <= 0 {
		c.Backoff = Backoff{Initial: 200 * time.Millisecond, Max: 30 * time.Second}
	}
	if c.RetryBackoff.Initial <= 0 {
		c.RetryBackoff = Backoff{Initial: c.Backoff.Initial, Max: min(c.Backoff.Max, 5*time.Second)}
	}
	if c.MaxRetry <= 0 {
		c.MaxRetry = 10 * time.Minute
	}
	if c.EventTimeColumn == "" {
		c.EventTimeColumn = "event_time"
	}
	if c.Writer.RowGroupRows == 0 {
		c.Writer.RowGroupRows = 16 << 10 // bounds each buffer's encoder memory
	}
}

// streamPageSize is the page size of the files buffers write: every open
// file holds a page buffer per column, and 32 KiB pages halve a file's
// encoder memory (the library default is 256 KiB) for files ~10% larger,
// which OPTIMIZE rewrites with the default.
const streamPageSize = 32 << 10

// Deps are the engine's connections to the outside.
type Deps struct {
	Table  *delta.Table
	Mapper *mapping.Mapper
	// TableSchema, if set, is the table's schema: data files then use its
	// physical column names and column ids (column mapping).
	TableSchema *delta.StructType
	Outbox      Outbox
	Metrics     *Metrics
	Health      *Health
	Logger      *slog.Logger
}

// Engine runs the actors. Create it, create the Kafka consumer with the
// engine as its Handler, then Start.
type Engine struct {
	cfg    Config
	deps   Deps
	system *actor.ActorSystem
	reg    *registry
	budget *Budget
	fetch  *fetcher
	ready  chan struct{} // closed once the committer is spawned

	committer   *actor.PID
	maintenance *actor.PID  // nil when maintenance is disabled
	maintainer  *maintainer // the maintenance actor's worker (tests run rounds on it)
	cons        Consumer
	progress    *progress
	cancel      context.CancelFunc
	loopDone    chan error
	stopping    atomic.Bool
}

// NewEngine checks the configuration and prepares an engine.
func NewEngine(cfg Config, deps Deps) (*Engine, error) {
	cfg.setDefaults()
	if cfg.Topic == "" {
		return nil, errors.New("engine: no topic")
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
	return &Engine{cfg: cfg, deps: deps, reg: newRegistry(), budget: NewBudget(cfg.MemoryBudget, cfg.MaxUnfinishedEpochs),
		ready: make(chan struct{}), system: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return deps.Logger.With("component", "actors")
		}))}, nil
}

// Assigned implements kafka.Handler: the committer spawns readers for the
// partitions and answers where the Delta log says each continues.
func (e *Engine) Assigned(ctx context.Context, topic string, partitions []int32) (map[int32]int64, error) {
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	reply := make(chan map[int32]int64, 1)
	e.system.Root.Send(e.committer, &messages.Assign{Topic: topic, Partitions: partitions, Reply: reply})
	select {
	case offsets := <-reply:
		e.deps.Logger.Info("partitions assigned", "partitions", partitions, "offsets", offsets)
		return offsets, nil
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
func (e *Engine) Start(cons Consumer, offsets OffsetCommitter, store storage.Store, partitionColumns []string) error {
	e.cons = cons
	e.progress = newProgress(time.Now())
	e.fetch = newFetcher(cons, e.reg, e.budget, e.deps.Metrics, e.deps.Logger)
	e.fetch.system = e.system
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
	bcfg := &bufferConfig{
		store: store, dataSchema: dataSchema, tableSchema: e.deps.TableSchema, partitionColumns: partitionColumns,
		writer: writer, budget: e.budget, health: e.deps.Health, metrics: e.deps.Metrics, backoff: e.cfg.RetryBackoff,
		maxRetry: e.cfg.MaxRetry, logger: e.deps.Logger, beforeRows: e.cfg.beforeRows,
	}
	pcfg := &pipelineConfig{topic: e.cfg.Topic, mapper: e.deps.Mapper, buffer: bcfg, reg: e.reg,
		metrics: e.deps.Metrics, logger: e.deps.Logger}
	ccfg := &committerConfig{
		app: e.cfg.App, topic: e.cfg.Topic, table: e.deps.Table, flushInterval: e.cfg.FlushInterval,
		epochTimeout: max(2*e.cfg.FlushInterval, e.cfg.MaxRetry+time.Minute), idleEpochs: 3,
		backoff: e.cfg.Backoff, retry: retryPolicy{backoff: e.cfg.RetryBackoff, maxElapsed: e.cfg.MaxRetry}, pipeline: pcfg, outbox: e.deps.Outbox,
		offsets: offsets, fetch: e.fetch, budget: e.budget, health: e.deps.Health, metrics: e.deps.Metrics,
		logger: e.deps.Logger, eventTime: e.cfg.EventTimeColumn, progress: e.progress,
	}
	// Maintenance first: the committer tells it about checkpoints.
	if err := e.startMaintenance(); err != nil {
		return err
	}
	ccfg.maintenance = e.maintenance
	guardian := &restartStrategy{backoff: e.cfg.Backoff, onRestart: func(child *actor.PID, reason any, n int, delay time.Duration) {
		e.deps.Logger.Error("committer failed; restarting", "reason", reason, "restarts", n, "delay", delay)
		e.deps.Metrics.Restarts.WithLabelValues("committer").Inc()
		e.deps.Outbox.Publish(&bridge.ActorEvent{Actor: "committer", Action: bridge.ActorRestarted, Reason: fmt.Sprint(reason), Restarts: n})
	}}
	props := actor.PropsFromProducer(newCommitter(ccfg), actor.WithGuardian(guardian))
	pid, err := e.system.Root.SpawnNamed(props, "committer")
	if err != nil {
		return fmt.Errorf("engine: spawn committer: %w", err)
	}
	e.committer = pid
	bcfg.committer = pid
	e.fetch.committer = pid
	close(e.ready)
	e.deps.Outbox.Publish(&bridge.ActorEvent{Actor: "committer", Action: bridge.ActorStarted})

	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.loopDone = make(chan error, 1)
	go func() { e.loopDone <- e.fetch.run(ctx) }()
	go e.watchBudget(ctx)
	return nil
}

// startMaintenance spawns the maintenance actor, when enabled, under the
// same restart strategy as the committer.
func (e *Engine) startMaintenance() error {
	if !e.cfg.Maintenance.enabled() {
		return nil
	}
	m := &maintainer{cfg: e.cfg.Maintenance, table: e.deps.Table, writer: e.cfg.Writer, outbox: e.deps.Outbox,
		metrics: e.deps.Metrics, logger: e.deps.Logger.With("component", "maintenance")}
	e.maintainer = m
	guardian := &restartStrategy{backoff: e.cfg.Backoff, onRestart: func(_ *actor.PID, reason any, n int, delay time.Duration) {
		e.deps.Logger.Error("maintenance failed; restarting", "reason", reason, "restarts", n, "delay", delay)
		e.deps.Metrics.Restarts.WithLabelValues("maintenance").Inc()
		e.deps.Outbox.Publish(&bridge.ActorEvent{Actor: "maintenance", Action: bridge.ActorRestarted, Reason: fmt.Sprint(reason), Restarts: n})
	}}
	pid, err := e.system.Root.SpawnNamed(actor.PropsFromProducer(newMaintenanceActor(m), actor.WithGuardian(guardian)), "maintenance")
	if err != nil {
		return fmt.Errorf("engine: spawn maintenance: %w", err)
	}
	e.maintenance = pid
	e.deps.Outbox.Publish(&bridge.ActorEvent{Actor: "maintenance", Action: bridge.ActorStarted})
	return nil
}

// watchBudget starts an epoch early when buffers pass FlushMaxBytes. It
// sleeps until they do (no timer while the pipeline is idle), then asks
// again every budgetRecheck while they stay above it.
func (e *Engine) watchBudget(ctx context.Context) {
	e.budget.Observe(func(b int64) { e.deps.Metrics.BufferedBytes.Set(float64(b)) })
	for e.budget.WaitAbove(ctx, e.cfg.FlushMaxBytes) {
		e.system.Root.Send(e.committer, &messages.CommitNow{Reason: "max_bytes"})
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

// Flush commits everything read so far and waits for it.
func (e *Engine) Flush(ctx context.Context) error {
	reply := make(chan error, 1)
	e.system.Root.Send(e.committer, &messages.CommitNow{Reason: "request", Reply: reply})
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
// not. A loop not started yet pauses before its first poll.
func (e *Engine) Pause(ctx context.Context) error {
	e.fetch.userPaused.Store(true)
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

// Resume undoes Pause.
func (e *Engine) Resume() {
	e.fetch.userPaused.Store(false)
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

// Position returns the next offset the fetch loop will read, per partition.
func (e *Engine) Position() map[int32]int64 { return e.fetch.position() }

// Stop stops reading, commits what was read (within ctx), closes the Kafka
// consumer and stops the actors. The returned error is the final commit's.
func (e *Engine) Stop(ctx context.Context) error {
	e.cancel()
	<-e.loopDone
	err := e.Flush(ctx)
	e.stopping.Store(true)
	e.cons.Close()
	if e.maintenance != nil {
		// A maintenance run in progress is cancelled; its orphans are VACUUM's.
		_ = e.system.Root.PoisonFuture(e.maintenance).Wait()
		e.deps.Outbox.Publish(&bridge.ActorEvent{Actor: "maintenance", Action: bridge.ActorStopped})
	}
	if perr := e.system.Root.PoisonFuture(e.committer).Wait(); perr != nil && err == nil {
		err = perr
	}
	e.deps.Outbox.Publish(&bridge.ActorEvent{Actor: "committer", Action: bridge.ActorStopped})
	return err
}

func init() {
	// protoactor's process registry is 1024 concurrent maps of
	// cmap.SHARD_COUNT shards each: 32768 Go maps, ~3 MiB of heap that
	// every GC cycle scans, for the few dozen actors of the engine. One
	// shard per map leaves 1024 locks, plenty.
	cmap.SHARD_COUNT = 1
}
