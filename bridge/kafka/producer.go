package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Producer writes records to Kafka for tools, the demo and benchmarks
// (`deltaflow produce`); the daemon itself never produces. Records without a
// Topic go to cfg.Topic. All methods are safe for concurrent use.
type Producer struct {
	cl *kgo.Client

	mu       sync.Mutex
	asyncErr error // first failure of ProduceAsync since the last Flush
}

// NewProducer creates a producer from the connection settings of cfg
// (brokers, client_id, sasl, tls). A nil logger discards logs.
func NewProducer(cfg Config, logger *slog.Logger) (*Producer, error) {
	cl, err := cfg.newClient("producer", logger, kgo.DefaultProduceTopic(cfg.withDefaults().Topic))
	if err != nil {
		return nil, err
	}
	return &Producer{cl: cl}, nil
}

// Produce writes records and waits until all are acknowledged; it returns the
// first failure.
func (p *Producer) Produce(ctx context.Context, records []*kgo.Record) error {
	if err := p.cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return fmt.Errorf("kafka: produce: %w", err)
	}
	return nil
}

// ProduceAsync queues r and returns at once (it blocks only while the
// client's buffer is full). A failure is reported by the next Flush. r must
// not be modified until then.
func (p *Producer) ProduceAsync(ctx context.Context, r *kgo.Record) {
	p.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
		if err != nil {
			p.mu.Lock()
			if p.asyncErr == nil {
				p.asyncErr = err
			}
			p.mu.Unlock()
		}
	})
}

// Flush waits until every queued record is acknowledged and returns the first
// ProduceAsync failure since the previous Flush.
func (p *Producer) Flush(ctx context.Context) error {
	err := p.cl.Flush(ctx)
	p.mu.Lock()
	err = errors.Join(err, p.asyncErr)
	p.asyncErr = nil
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("kafka: flush: %w", err)
	}
	return nil
}

// Close flushes nothing: call Flush first to keep queued records.
func (p *Producer) Close() { p.cl.Close() }

// CreateTopic creates topic with the given partitions and replication factor
// on the brokers of cfg. A topic that already exists is not an error (its
// partition count is left as it is).
func CreateTopic(ctx context.Context, cfg Config, topic string, partitions int32, replicationFactor int16) error {
	cfg = cfg.withDefaults()
	opts, err := cfg.clientOpts(slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka: create topic %s: %w", topic, err)
	}
	defer cl.Close()
	_, err = kadm.NewClient(cl).CreateTopic(ctx, partitions, replicationFactor, nil, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kafka: create topic %s: %w", topic, err)
	}
	return nil
}
