package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/internal/secret"
	"github.com/deltaflow/deltaflow/storage"
)

// DefaultConnectTimeout bounds how long a start waits for Kafka, the
// table's store and NATS to answer before it gives up (run
// --connect-timeout).
const DefaultConnectTimeout = 30 * time.Second

// Names of the dependencies a probe asks, in ProbeResult.Name.
const (
	ProbeKafka = "kafka"
	ProbeStore = "store"
	ProbeNATS  = "nats"
	// ProbeSchemaRegistry is asked only when a table reads the registry.
	ProbeSchemaRegistry = "schema_registry"
)

// ProbeResult is one dependency's answer to Probe.
type ProbeResult struct {
	Name   string `json:"name"`
	Target string `json:"target"` // what was asked: brokers, table URI, server
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"` // what was found
	Error  string `json:"error,omitempty"`  // why it failed
	Millis int64  `json:"ms"`
}

// Probe asks, concurrently and each within timeout, the services cfg
// names: Kafka for the topic's metadata (a topic the brokers do not know
// fails), the table's store for a put-if-absent probe object (deleted
// after), NATS (bridge.Ping), and when a table reads it, the schema
// registry for each such table's subject (probeRegistry). Results come in
// that order. Nothing is written but the probe object (and the
// directories a local table and the embedded server's store would have).
func Probe(ctx context.Context, cfg *Config, timeout time.Duration) []ProbeResult {
	probes := []probe{
		{ProbeKafka, fmt.Sprintf("%v topic %s", cfg.Kafka.Brokers, cfg.Kafka.Topic), func(ctx context.Context) (string, error) {
			info, err := kafka.Ping(ctx, cfg.Kafka, nil)
			if err == nil {
				err = info.Err
			}
			return fmt.Sprintf("topic %s: %d partitions", cfg.Kafka.Topic, info.Partitions), err
		}},
		{ProbeStore, cfg.Table.URI, func(ctx context.Context) (string, error) {
			return "put-if-absent honoured", probeStore(ctx, cfg)
		}},
		{ProbeNATS, natsTarget(cfg.NATS), func(ctx context.Context) (string, error) {
			return bridge.Ping(ctx, cfg.NATS)
		}},
	}
	if len(cfg.registryTables()) > 0 {
		probes = append(probes, probe{ProbeSchemaRegistry, secret.RedactURL(strings.Join(cfg.SchemaRegistry.URL, ",")), func(ctx context.Context) (string, error) {
			return probeRegistry(ctx, cfg)
		}})
	}
	out := make([]ProbeResult, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			start := time.Now()
			detail, err := p.run(ctx)
			r := ProbeResult{Name: p.name, Target: p.target, OK: err == nil, Millis: time.Since(start).Milliseconds()}
			if err != nil {
				r.Error = withinTimeout(ctx, err, "--timeout "+timeout.String()).Error()
			} else {
				r.Detail = detail
			}
			out[i] = r
		})
	}
	wg.Wait()
	return out
}

// probe is one dependency Probe asks: run says what it found.
type probe struct {
	name, target string
	run          func(context.Context) (string, error)
}

// withinTimeout words an error that is the deadline passing as such,
// naming the flag that set it (within: "--connect-timeout 30s"), in place
// of Go's "context deadline exceeded".
func withinTimeout(ctx context.Context, err error, within string) error {
	if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() == nil {
		return err
	}
	words := "no answer within " + within
	msg := err.Error()
	if strings.Contains(msg, context.DeadlineExceeded.Error()) {
		msg = strings.Replace(msg, context.DeadlineExceeded.Error(), words, 1)
	} else {
		msg = words + ": " + msg
	}
	return &noAnswer{msg: msg, err: err}
}

// noAnswer is withinTimeout's error: its words, the deadline's error
// beneath.
type noAnswer struct {
	msg string
	err error
}

func (e *noAnswer) Error() string { return e.msg }
func (e *noAnswer) Unwrap() error { return e.err }

func natsTarget(c bridge.Config) string {
	if c.URL == "" {
		return "embedded"
	}
	return secret.RedactURL(c.URL)
}

// probeStore opens the table's store and checks, with a probe object,
// that it answers and honours put-if-absent (storage.single_writer
// accepts one that does not).
func probeStore(ctx context.Context, cfg *Config) error {
	store, err := storage.Open(ctx, cfg.Table.URI, cfg.StorageOptions())
	if err != nil {
		return fmt.Errorf("open table storage: %w", err)
	}
	return CheckAtomicCommits(ctx, store, cfg.Storage.SingleWriter, slog.New(slog.DiscardHandler))
}
