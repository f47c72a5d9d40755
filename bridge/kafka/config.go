package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/deltaflow/deltaflow/internal/tlsfiles"

	"github.com/deltaflow/deltaflow/ledger"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/deltaflow/deltaflow/internal/bytesize"
	"github.com/deltaflow/deltaflow/internal/configview"
	"github.com/deltaflow/deltaflow/internal/secret"
)

// Modes of [Config.Mode].
const (
	// ModeGroup joins the consumer group [Config.Group]; Kafka assigns the
	// partitions, so several deltaflow processes can share a topic.
	ModeGroup = "group"
	// ModePartitions reads the fixed [Config.Partitions] without a group.
	ModePartitions = "partitions"
)

// minMetadataAge is franz-go's MetadataMinAge default, below which
// MetadataMaxAge cannot go.
const minMetadataAge = 5 * time.Second

// Isolation levels of [Config.IsolationLevel].
const (
	// ReadCommitted reads only records of committed transactions (and
	// every non-transactional record); reading stops at the last stable
	// offset while a transaction is open.
	ReadCommitted = "read_committed"
	// ReadUncommitted reads every record, those of aborted transactions
	// too.
	ReadUncommitted = "read_uncommitted"
)

// SASL mechanisms of [SASL.Mechanism].
const (
	MechPlain       = "PLAIN"
	MechSCRAMSHA256 = "SCRAM-SHA-256"
	MechSCRAMSHA512 = "SCRAM-SHA-512"
)

// ErrInvalidConfig is matched (errors.Is) by every error [Config.Validate]
// returns.
var ErrInvalidConfig = errors.New("kafka: invalid config")

// ConfigError reports one invalid configuration key. Its message names the
// key as it is written in the YAML file, under the top-level "kafka" section:
// `kafka.sasl.mechanism: unknown "FOO"`.
type ConfigError struct {
	Key string // dotted YAML path, e.g. "kafka.sasl.mechanism"
	Msg string
}

func (e *ConfigError) Error() string { return e.Key + ": " + e.Msg }

// Is makes every ConfigError match [ErrInvalidConfig].
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Config is the "kafka" section of deltaflow.yaml. A zero field takes the
// default given in its comment; [DefaultConfig] returns them all.
type Config struct {
	// Brokers are the seed brokers, host:port. Default ["127.0.0.1:9092"].
	Brokers []string `yaml:"brokers"`
	// Topic is the topic to read. Default "sensor-events".
	Topic string `yaml:"topic"`
	// Group is the consumer group (mode group), also used to commit offsets
	// for lag tools in mode partitions. Default "deltaflow".
	Group string `yaml:"group"`
	// Mode is "group" (Kafka assigns partitions) or "partitions" (read the
	// fixed Partitions, no group membership). Default "group".
	Mode string `yaml:"mode"`
	// Partitions are the partitions to read in mode "partitions"; required
	// there and invalid in mode "group".
	Partitions []int32 `yaml:"partitions"`
	// StartOffset is where to start a partition for which the Delta table has
	// no offset yet: "earliest" or "latest". The offset it resolves to is
	// written into the table before the partition is read, so a restart
	// resumes there, not at a newer "latest". Default "earliest".
	StartOffset string `yaml:"start_offset"`
	// OnDataLoss is what happens when the table's offset for a partition is
	// no longer in the log (retention or DeleteRecords deleted records
	// before they were read; the topic was deleted and created again):
	// "fail" refuses to read that partition (deltaflow goes unhealthy,
	// naming the partition, the offsets and the count) until a human
	// decides; "skip" resumes at the log start and records the loss as a
	// DATA_LOSS commit in the table's history. Either way an event, a
	// metric and a log line report it. Default "fail", as Spark's
	// failOnDataLoss.
	OnDataLoss string `yaml:"on_data_loss"`
	// IsolationLevel is "read_committed": records of aborted transactions
	// never reach the table, and reading waits for open ones; or
	// "read_uncommitted": every record is read. Default "read_committed".
	IsolationLevel string `yaml:"isolation_level"`
	// StartOffsets are explicit start positions, partition → first offset
	// to read, for partitions the Delta table holds no offset for yet. `run`
	// writes them into the table as txn actions before it reads (the Delta
	// log stays the only authority); unlisted partitions fall back to
	// StartOffset. Exclusive with StartTimestamp. Default: none.
	StartOffsets map[int32]int64 `yaml:"start_offsets"`
	// StartTimestamp (RFC 3339) starts every partition the table holds no
	// offset for yet at its first record at or after that time (Kafka's
	// ListOffsets by time; a partition with none starts at its end), written
	// into the table like StartOffsets. Default: none.
	StartTimestamp string `yaml:"start_timestamp"`
	// ClientID identifies the client to the brokers. Default "deltaflow".
	ClientID string `yaml:"client_id"`
	// InstanceID makes the process a static member of the group (KIP-345),
	// unique per process: restarted after a crash, it takes its partitions
	// back at once, where a dynamic member waits for the session timeout
	// (45 s) of its dead predecessor. Only in mode group; empty: dynamic.
	InstanceID string `yaml:"instance_id"`
	// FetchMaxWait bounds how long a broker holds a fetch with no new data:
	// the client's rhythm while the topic is idle (a fetch round trip every
	// FetchMaxWait). A partition resumed while every other one was idle is
	// fetched once the fetch in flight returns. Default 500ms, as Kafka's
	// own consumer (fetch.max.wait.ms).
	FetchMaxWait time.Duration `yaml:"fetch_max_wait"`
	// MetadataMaxAge bounds how old the client's view of the cluster may
	// grow: a topic created later that a table's topic_regex matches is
	// read within it. Default 1m (franz-go's own is 5m); at least 5s.
	MetadataMaxAge time.Duration `yaml:"metadata_max_age"`
	// FetchMaxBytes bounds one fetch response, so it bounds memory (several
	// times this once decompressed; a partition's first batch comes whole
	// even when larger). Default 256 KiB.
	FetchMaxBytes int32 `yaml:"fetch_max_bytes"`
	// FetchMaxPartitionBytes bounds one partition's share of a fetch. It
	// counts compressed bytes, so what a fetch holds in memory once
	// decompressed is several times larger. Default 256 KiB.
	FetchMaxPartitionBytes int32 `yaml:"fetch_max_partition_bytes"`
	// MaxPollRecords bounds the records one Poll returns; the engine holds
	// at most two polls in flight. Default 2048.
	MaxPollRecords int `yaml:"max_poll_records"`
	// MaxDecompressBytes bounds what one record batch may decompress to
	// (franz-go's MaxDecompressBatchBytes): a few KiB of zstd can hold
	// hundreds of MiB. Poll reports a batch over it as a [BatchTooLargeError]
	// without decompressing it. It also bounds what the fetches hold
	// decompressed until they are polled: a fetch of many small batches
	// stops there, and the rest is fetched later. Default 4 MiB, four times
	// the largest batch Kafka's producers build by default (1 MB).
	MaxDecompressBytes bytesize.Size `yaml:"max_decompress_bytes"`
	// SASL authenticates to the brokers; off when Mechanism is empty.
	SASL SASL `yaml:"sasl"`
	// TLS encrypts the connections to the brokers; off unless Enabled.
	TLS TLS `yaml:"tls"`
}

// SASL is the "kafka.sasl" section.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (any case); empty
	// disables SASL.
	Mechanism string `yaml:"mechanism"`
	User      string `yaml:"user"`
	// Password is never printed or logged ([secret.Secret]).
	Password secret.Secret `yaml:"password"`
	// AllowPlainWithoutTLS lets PLAIN send the password in the clear, to
	// anyone on the path to the brokers, when TLS is off. Default false:
	// refused (use TLS or SCRAM).
	AllowPlainWithoutTLS bool `yaml:"allow_plain_without_tls"`
}

// TLS is the "kafka.tls" section.
type TLS struct {
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of CAs to trust instead of the system pool.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and key for mutual
	// TLS; both or neither.
	CertFile           string `yaml:"cert_file"`
	KeyFile            string `yaml:"key_file"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// DefaultConfig returns the configuration with every default filled in.
func DefaultConfig() Config { return Config{}.withDefaults() }

// Effective returns c as the clients use it: every zero field set to its
// default.
func (c Config) Effective() Config { return c.withDefaults() }

// withDefaults fills the zero fields with their defaults; the one place
// defaults are set.
func (c Config) withDefaults() Config {
	if len(c.Brokers) == 0 {
		c.Brokers = []string{"127.0.0.1:9092"}
	}
	if c.Topic == "" {
		c.Topic = "sensor-events"
	}
	if c.Group == "" {
		c.Group = "deltaflow"
	}
	if c.Mode == "" {
		c.Mode = ModeGroup
	}
	if c.StartOffset == "" {
		c.StartOffset = ledger.StartEarliest
	}
	if c.OnDataLoss == "" {
		c.OnDataLoss = ledger.OnDataLossFail
	}
	if c.IsolationLevel == "" {
		c.IsolationLevel = ReadCommitted
	}
	if c.ClientID == "" {
		c.ClientID = "deltaflow"
	}
	if c.MetadataMaxAge == 0 {
		c.MetadataMaxAge = time.Minute
	}
	if c.FetchMaxWait == 0 {
		c.FetchMaxWait = 500 * time.Millisecond
	}
	if c.FetchMaxPartitionBytes == 0 {
		c.FetchMaxPartitionBytes = 256 << 10
	}
	if c.FetchMaxBytes == 0 {
		c.FetchMaxBytes = 256 << 10
	}
	if c.MaxPollRecords == 0 {
		c.MaxPollRecords = 2048
	}
	if c.MaxDecompressBytes == 0 {
		c.MaxDecompressBytes = 4 << 20
	}
	return c
}

// Validate checks the configuration (zero fields count as their defaults) and
// returns every problem found, each a [*ConfigError] naming its key.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &ConfigError{Key: "kafka." + key, Msg: fmt.Sprintf(format, args...)})
	}
	for i, b := range c.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			bad(fmt.Sprintf("brokers[%d]", i), "%q is not host:port", b)
		}
	}
	switch c.Mode {
	case ModeGroup:
		if len(c.Partitions) > 0 {
			bad("partitions", "only valid with mode %q", ModePartitions)
		}
	case ModePartitions:
		if c.InstanceID != "" {
			bad("instance_id", "only valid with mode %q", ModeGroup)
		}
		if len(c.Partitions) == 0 {
			bad("partitions", "required with mode %q", ModePartitions)
		}
		seen := make(map[int32]bool, len(c.Partitions))
		for _, p := range c.Partitions {
			if p < 0 {
				bad("partitions", "negative partition %d", p)
			} else if seen[p] {
				bad("partitions", "partition %d listed twice", p)
			}
			seen[p] = true
		}
	default:
		bad("mode", "unknown %q (want %q or %q)", c.Mode, ModeGroup, ModePartitions)
	}
	if c.StartOffset != ledger.StartEarliest && c.StartOffset != ledger.StartLatest {
		bad("start_offset", "unknown %q (want %q or %q)", c.StartOffset, ledger.StartEarliest, ledger.StartLatest)
	}
	if c.IsolationLevel != ReadCommitted && c.IsolationLevel != ReadUncommitted {
		bad("isolation_level", "unknown %q (want %q or %q)", c.IsolationLevel, ReadCommitted, ReadUncommitted)
	}
	if c.OnDataLoss != ledger.OnDataLossFail && c.OnDataLoss != ledger.OnDataLossSkip {
		bad("on_data_loss", "unknown %q (want %q or %q)", c.OnDataLoss, ledger.OnDataLossFail, ledger.OnDataLossSkip)
	}
	for p, o := range c.StartOffsets {
		if p < 0 || o < 0 {
			bad("start_offsets", "partition %d: offset %d (want a partition >= 0 and an offset >= 0)", p, o)
		}
	}
	if c.StartTimestamp != "" {
		if len(c.StartOffsets) > 0 {
			bad("start_timestamp", "set together with start_offsets; choose one")
		}
		if _, err := c.StartTime(); err != nil {
			bad("start_timestamp", "%v", err)
		}
	}
	if c.MetadataMaxAge < minMetadataAge {
		bad("metadata_max_age", "must be >= %s (the client's least metadata refresh interval), got %s", minMetadataAge, c.MetadataMaxAge)
	}
	if c.FetchMaxWait < 0 {
		bad("fetch_max_wait", "must be > 0, got %s", c.FetchMaxWait)
	}
	if c.FetchMaxPartitionBytes < 0 {
		bad("fetch_max_partition_bytes", "must be > 0, got %d", c.FetchMaxPartitionBytes)
	}
	if c.FetchMaxBytes < 0 {
		bad("fetch_max_bytes", "must be > 0, got %d", c.FetchMaxBytes)
	}
	if c.MaxPollRecords < 0 {
		bad("max_poll_records", "must be > 0, got %d", c.MaxPollRecords)
	}
	if c.MaxDecompressBytes < 0 || c.MaxDecompressBytes > math.MaxInt32 {
		bad("max_decompress_bytes", "must be > 0 and < 2GiB, got %s", c.MaxDecompressBytes)
	}
	if m := c.SASL.Mechanism; m == "" {
		if c.SASL.User != "" || c.SASL.Password != "" {
			bad("sasl.mechanism", "required when sasl.user or sasl.password is set")
		}
	} else {
		if !slices.ContainsFunc([]string{MechPlain, MechSCRAMSHA256, MechSCRAMSHA512},
			func(k string) bool { return strings.EqualFold(k, m) }) {
			bad("sasl.mechanism", "unknown %q (want %s, %s or %s)", m, MechPlain, MechSCRAMSHA256, MechSCRAMSHA512)
		}
		if c.SASL.User == "" {
			bad("sasl.user", "required with sasl.mechanism")
		}
		if strings.EqualFold(m, MechPlain) && !c.TLS.Enabled && !c.SASL.AllowPlainWithoutTLS {
			bad("sasl.mechanism", "PLAIN without TLS sends the password in the clear: set kafka.tls.enabled, "+
				"use SCRAM-SHA-256 or SCRAM-SHA-512, or accept it with kafka.sasl.allow_plain_without_tls: true")
		}
	}
	t := c.TLS
	if !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.InsecureSkipVerify) {
		// Refuse rather than silently connecting in plaintext.
		bad("tls.enabled", "must be true when other tls keys are set")
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		bad("tls.cert_file", "cert_file and key_file must be set together")
	}
	return errors.Join(errs...)
}

// StartTime parses StartTimestamp: RFC 3339, or a date (midnight UTC).
// The zero time when unset.
func (c Config) StartTime() (time.Time, error) {
	return ParseTime(c.StartTimestamp)
}

// ParseTime parses a start time: RFC 3339 ("2026-06-22T09:15:00Z") or a
// date ("2026-06-22", midnight UTC); "" is the zero time.
func ParseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q: want RFC 3339 (2026-06-22T09:15:00Z) or a date (2026-06-22)", s)
}

// String describes the configuration on one line, every key as the YAML
// section names it, the SASL password redacted.
func (c Config) String() string { return configview.Line("kafka", c) }

// GoString keeps %#v from printing the password.
func (c Config) GoString() string { return c.String() }

// LogValue logs the configuration as a group, without the SASL password.
func (c Config) LogValue() slog.Value { return configview.LogValue(c) }

// isolation is the fetch isolation level of c (with its defaults).
func (c Config) isolation() kgo.IsolationLevel {
	if c.IsolationLevel == ReadUncommitted {
		return kgo.ReadUncommitted()
	}
	return kgo.ReadCommitted()
}

// clientOpts are the kgo options every client of ours shares: brokers,
// identity, SASL, TLS and logging. c has its defaults.
func (c Config) clientOpts(logger *slog.Logger) ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(c.ClientID),
		kgo.WithLogger(kgoLogger{logger}),
		kgo.MetadataMaxAge(c.MetadataMaxAge),
		// KIP-714 telemetry compresses its pushes with lz4, whose pooled
		// 4 MiB blocks cost ~8 MiB of heap for metrics that /metrics
		// already exposes: too much on a Pi.
		kgo.DisableClientMetrics(),
	}
	switch strings.ToUpper(c.SASL.Mechanism) {
	case "":
	case MechPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: c.SASL.User, Pass: string(c.SASL.Password)}.AsMechanism()))
	case MechSCRAMSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASL.User, Pass: string(c.SASL.Password)}.AsSha256Mechanism()))
	case MechSCRAMSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASL.User, Pass: string(c.SASL.Password)}.AsSha512Mechanism()))
	}
	if c.TLS.Enabled {
		tc, err := c.TLS.config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	return opts, nil
}

// newClient validates cfg and returns a client with the shared options
// (clientOpts) plus extra; what names the client in errors. A nil logger
// discards logs.
func (c Config) newClient(what string, logger *slog.Logger, extra ...kgo.Opt) (*kgo.Client, error) {
	c = c.withDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opts, err := c.clientOpts(logger)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: new %s: %w", what, err)
	}
	return cl, nil
}

func (t TLS) config() (*tls.Config, error) {
	return tlsfiles.Files{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile,
		InsecureSkipVerify: t.InsecureSkipVerify}.Config("kafka.tls")
}

// kgoLogger sends franz-go's logs to slog, its info lines at debug:
// franz-go's info is the client's own chatter (each assignment, seek and
// heartbeat that a rebalance cuts short), which deltaflow says in its own
// words where it matters; log.level debug shows it.
type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel {
	// Ask the handler the cheapest question first: most of franz-go's
	// volume is debug.
	switch {
	case k.l.Enabled(context.Background(), slog.LevelDebug):
		return kgo.LogLevelDebug
	case k.l.Enabled(context.Background(), slog.LevelWarn):
		return kgo.LogLevelWarn
	default:
		return kgo.LogLevelError
	}
}

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l := slog.LevelDebug
	switch level {
	case kgo.LogLevelError:
		l = slog.LevelError
	case kgo.LogLevelWarn:
		l = slog.LevelWarn
	}
	k.l.Log(context.Background(), l, "kgo: "+msg, keyvals...)
}
