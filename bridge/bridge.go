package bridge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deltaflow/deltaflow/internal/secret"
)

// ErrInvalidOption is wrapped by New when the options conflict or miss a
// required value.
var ErrInvalidOption = errors.New("bridge: invalid option")

// Reconnect policy: retry forever, so a NATS outage heals by itself; the
// jitter keeps several deltaflow instances from reconnecting in lockstep.
const (
	reconnectWait   = 2 * time.Second
	reconnectJitter = 500 * time.Millisecond
)

// Opt sets how a Bridge is built (as opposed to Config, which is what users
// write).
type Opt interface{ apply(*buildCfg) }

type optFunc func(*buildCfg)

func (f optFunc) apply(c *buildCfg) { f(c) }

type buildCfg struct {
	tables     []string
	version    string
	natsOpts   []nats.Option
	retryBase  time.Duration
	retryLimit time.Duration
}

// WithTable names a Delta table this bridge serves; it appears in every
// subject, KV key and the default DLQ stream name of the table. At least
// one is required; give it once per table of the process (Table returns
// each one's Bridge).
func WithTable(name string) Opt {
	return optFunc(func(c *buildCfg) { c.tables = append(c.tables, name) })
}

// WithVersion sets the semantic version the control service reports,
// overriding the default "0.0.0".
func WithVersion(v string) Opt { return optFunc(func(c *buildCfg) { c.version = v }) }

// withNATSOptions appends raw nats.go options (tests shorten reconnect waits).
func withNATSOptions(o ...nats.Option) Opt {
	return optFunc(func(c *buildCfg) { c.natsOpts = append(c.natsOpts, o...) })
}

// withRetry sets the offsets mirror's retry delays (tests shorten them).
func withRetry(base, limit time.Duration) Opt {
	return optFunc(func(c *buildCfg) { c.retryBase, c.retryLimit = base, limit })
}

// embeddedServer is what the bridge uses of the in-process nats-server
// (server.go); builds tagged nonatsserver have none (server_none.go).
type embeddedServer interface {
	nats.InProcessConnProvider
	ClientURL() string
	Shutdown()
	WaitForShutdown()
	JetStreamEnabled() bool
	reopenStore() error
}

// Bridge is the process's link to NATS as one table sees it: the
// connection (and, with no URL configured, the embedded server) and the
// KV offsets bucket are the process's, shared by every table's Bridge
// (Table); the DLQ stream, the events' and the KV keys' table, the offsets
// mirror and the control service are the table's. All methods are safe
// for concurrent use.
type Bridge struct {
	*conn
	table  string
	dlq    string // DLQ stream name
	mirror *OffsetMirror

	// unacked holds the ids of dead letters sent whose acknowledgement
	// never came (see PublishDLQ).
	unackedMu sync.Mutex
	unacked   map[string]struct{}

	control micro.Service // under conn.mu
	// deleted are the table's deleted-keys buckets opened (under conn.mu),
	// whose watchers Close stops.
	deleted []*DeletedKeys
}

// conn is what the tables' Bridges share.
type conn struct {
	cfg    Config
	build  buildCfg
	logger *slog.Logger

	ns embeddedServer // nil when connected to an external server
	nc *nats.Conn
	js jetstream.JetStream
	kv jetstream.KeyValue

	mu     sync.Mutex
	tables map[string]*Bridge
	closed bool
}

// New connects to NATS (starting the embedded server when cfg.URL is empty),
// then creates or updates the KV bucket and each table's DLQ stream. Zero
// fields of cfg take their defaults; a cfg.DLQStream names the stream of
// a single table. ctx bounds the setup only. The Bridge returned is the
// first table's.
func New(ctx context.Context, cfg Config, logger *slog.Logger, opts ...Opt) (*Bridge, error) {
	build := buildCfg{version: "0.0.0", retryBase: 100 * time.Millisecond, retryLimit: 5 * time.Second}
	for _, o := range opts {
		o.apply(&build)
	}
	if len(build.tables) == 0 {
		return nil, fmt.Errorf("%w: WithTable is required", ErrInvalidOption)
	}
	if cfg.DLQStream != "" && len(build.tables) > 1 {
		return nil, fmt.Errorf("%w: nats.dlq_stream names one table's stream; %d tables each have their own", ErrInvalidOption, len(build.tables))
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &conn{cfg: cfg, build: build, logger: logger.With("component", "bridge"), tables: map[string]*Bridge{}}
	if cfg.embedded() {
		ns, err := startEmbedded(cfg, len(build.tables))
		if err != nil {
			return nil, err
		}
		c.ns = ns
		c.logger.Info("embedded nats-server started", "listen", ns.ClientURL(), "store_dir", cfg.StoreDir)
	}
	if err := c.connect(); err != nil {
		c.shutdownServer()
		return nil, err
	}
	if err := c.setup(ctx); err != nil {
		c.nc.Close()
		c.shutdownServer()
		return nil, err
	}
	var first *Bridge
	for _, table := range build.tables {
		dlq := cfg.DLQStream
		if dlq == "" {
			dlq = DefaultDLQStream(table)
		}
		b := &Bridge{conn: c, table: table, dlq: dlq, unacked: map[string]struct{}{}}
		if err := b.ensureDLQ(ctx); err != nil {
			c.nc.Close()
			c.shutdownServer()
			return nil, err
		}
		b.mirror = newOffsetMirror(b.PutOffset, c.logger.With("table", table), build.retryBase, build.retryLimit)
		c.tables[table] = b
		if first == nil {
			first = b
		}
	}
	return first, nil
}

// Table returns the Bridge of table name, one New was given (nil for
// another).
func (b *Bridge) Table(name string) *Bridge {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tables[name]
}

// connect dials NATS with the reconnect policy and authentication of b.cfg.
func (b *conn) connect() error {
	cfg := b.cfg
	log := b.logger
	opts := []nats.Option{
		nats.Name("deltaflow " + strings.Join(b.build.tables, ",")),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.ReconnectJitter(reconnectJitter, reconnectJitter),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected; reconnecting", "err", err)
			} else {
				log.Info("nats disconnected")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "server", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Warn("nats async error", "subject", subj, "err", err)
		}),
	}
	opts = append(opts, authOptions(cfg)...)
	url := cfg.URL
	if b.ns != nil {
		// In-process: no TCP hop, and the connection lives exactly as long
		// as the server it belongs to.
		opts = append(opts, nats.InProcessServer(b.ns))
		url = b.ns.ClientURL()
	}
	opts = append(opts, b.build.natsOpts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return fmt.Errorf("connect nats %s: %w", secret.RedactURL(url), err)
	}
	b.nc = nc
	b.logger.Info("nats connected", "server", nc.ConnectedUrlRedacted(), "max_payload", nc.MaxPayload())
	return nil
}

// authOptions are the authentication and TLS options of cfg.
func authOptions(cfg Config) []nats.Option {
	var opts []nats.Option
	switch {
	case cfg.Token != "":
		opts = append(opts, nats.Token(string(cfg.Token)))
	case cfg.User != "":
		opts = append(opts, nats.UserInfo(cfg.User, string(cfg.Password)))
	case cfg.CredsFile != "":
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if t := cfg.TLS; t.enabled() {
		opts = append(opts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify}))
		if t.CAFile != "" {
			opts = append(opts, nats.RootCAs(t.CAFile))
		}
		if t.CertFile != "" {
			opts = append(opts, nats.ClientCert(t.CertFile, t.KeyFile))
		}
	}
	return opts
}

// setup creates or updates the JetStream assets; running it again (another
// instance, a restart) changes nothing.
func (b *conn) setup(ctx context.Context) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	js, err := jetstream.New(b.nc,
		jetstream.WithDefaultTimeout(b.cfg.PublishTimeout),
		// Unanswered async publishes fail and free their slot instead of
		// lingering after PublishDLQ gave up on them.
		jetstream.WithPublishAsyncTimeout(b.cfg.PublishTimeout),
	)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	b.js = js
	return b.ensureKV(ctx)
}

// ensureKV creates or updates the offsets bucket. One revision per key is
// enough: the mirror is latest-wins and the Delta log keeps the history.
func (b *conn) ensureKV(ctx context.Context) error {
	kv, err := b.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      b.cfg.KVBucket,
		Description: "deltaflow recovery offsets mirror (a hint; the Delta log is the authority)",
		History:     1,
		Replicas:    b.cfg.KVReplicas,
	})
	if err != nil {
		return fmt.Errorf("create kv bucket %s: %w", b.cfg.KVBucket, err)
	}
	b.mu.Lock()
	b.kv = kv
	b.mu.Unlock()
	return nil
}

// dlqDuplicateWindow is how long JetStream remembers a DLQ message id: a
// redelivered epoch (after a crash before commit) republishes the same
// letters, which must be stored once.
const dlqDuplicateWindow = 24 * time.Hour

// ensureDLQ creates or updates the table's DLQ stream.
func (b *Bridge) ensureDLQ(ctx context.Context) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	maxAge := b.cfg.DLQMaxAge
	if maxAge < 0 {
		maxAge = 0 // JetStream: 0 keeps messages forever
	}
	dup := dlqDuplicateWindow
	if maxAge > 0 && maxAge < dup {
		dup = maxAge // JetStream requires duplicates <= max age
	}
	_, err := b.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        b.dlq,
		Description: "deltaflow dead letters of table " + b.table,
		Subjects:    []string{DLQStreamSubject(b.table)},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      maxAge,
		MaxBytes:    int64(b.cfg.DLQMaxBytes),
		// Full, the stream refuses new letters instead of dropping the
		// oldest: a letter it acknowledged is never lost but to max age.
		Discard:    jetstream.DiscardNew,
		Duplicates: dup,
		MaxMsgSize: -1, // the server's max_payload is the limit
		Replicas:   b.cfg.KVReplicas,
	})
	if IsFull(err) {
		return fmt.Errorf("create dlq stream %s: the JetStream store has no room for nats.dlq_max_bytes (%s): "+
			"lower it, or give the server more (its max_file_store): %w", b.dlq, b.cfg.DLQMaxBytes, err)
	}
	if err != nil {
		return fmt.Errorf("create dlq stream %s: %w", b.dlq, err)
	}
	return nil
}

// DLQUsage is how full the DLQ stream is.
type DLQUsage struct {
	Stream   string
	Bytes    uint64 // stored
	MaxBytes int64  // the stream's bound (nats.dlq_max_bytes)
	Letters  uint64
}

// DLQUsage asks the server how full the DLQ stream is.
func (b *Bridge) DLQUsage(ctx context.Context) (DLQUsage, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	s, err := b.js.Stream(ctx, b.dlq)
	if err != nil {
		return DLQUsage{}, fmt.Errorf("dlq stream %s: %w", b.dlq, err)
	}
	info := s.CachedInfo() // fetched by Stream just now
	return DLQUsage{Stream: b.dlq, Bytes: info.State.Bytes, MaxBytes: info.Config.MaxBytes, Letters: info.State.Msgs}, nil
}

// bound returns ctx limited by PublishTimeout unless it has an earlier
// deadline, so no NATS call waits forever.
func (b *conn) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.cfg.PublishTimeout)
}

// TableName returns the table this Bridge serves.
func (b *Bridge) TableName() string { return b.table }

// ClientURL returns the URL clients such as the nats CLI use to reach the
// server this bridge is connected to (the embedded one, if any), without
// credentials.
func (b *conn) ClientURL() string {
	if b.ns != nil {
		return b.ns.ClientURL()
	}
	return b.nc.ConnectedUrlRedacted()
}

// Healthy reports whether the NATS connection is up, for /readyz. While it
// is down, events are buffered and KV/DLQ calls fail with transient errors.
func (b *conn) Healthy() bool { return b.nc.IsConnected() }

// Mirror returns the table's offsets mirror.
func (b *Bridge) Mirror() *OffsetMirror { return b.mirror }

// closeFlushTimeout bounds how long Close waits for pending mirror writes.
const closeFlushTimeout = 2 * time.Second

// Close stops every table's control service and offsets mirror (pending
// mirror writes get closeFlushTimeout to land, so a clean stop leaves the
// KV equal to the log; past it they are dropped: the Delta log is the
// authority and the next start corrects the mirror), flushes buffered
// events, closes the connection and shuts the embedded server down: the
// whole process's bridge, whichever table's Bridge it is called on. Safe
// to call more than once.
func (b *Bridge) Close() error {
	c := b.conn
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	tables := make([]*Bridge, 0, len(c.tables))
	var deleted []*DeletedKeys
	for _, name := range c.build.tables {
		tables = append(tables, c.tables[name])
		deleted = append(deleted, c.tables[name].deleted...)
	}
	c.mu.Unlock()
	for _, d := range deleted {
		d.stop()
	}

	var errs []error
	for _, t := range tables {
		if svc := t.control; svc != nil {
			if err := svc.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop control service of %s: %w", t.table, err))
			}
		}
	}
	for _, t := range tables {
		if c.nc.IsConnected() {
			ctx, cancel := context.WithTimeout(context.Background(), closeFlushTimeout)
			if err := t.mirror.Flush(ctx); err != nil {
				c.logger.Warn("offsets mirror not flushed on close; the next start corrects it", "table", t.table,
					"pending", t.mirror.Pending(), "err", err)
			}
			cancel()
		}
		t.mirror.close()
	}
	if c.nc.IsConnected() {
		// Best effort: events are observations, and a server going away
		// at the same moment is no reason to fail Close.
		if err := c.nc.FlushTimeout(time.Second); err != nil {
			c.logger.Warn("events not flushed on close", "err", err)
		}
	}
	c.nc.Close()
	c.shutdownServer()
	return errors.Join(errs...)
}

func (b *conn) shutdownServer() {
	if b.ns != nil {
		b.ns.Shutdown()
		b.ns.WaitForShutdown() // until it has released its port and store
		b.logger.Info("embedded nats-server stopped")
	}
}
