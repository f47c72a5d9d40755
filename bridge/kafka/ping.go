package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrUnreachable is matched (errors.Is) by Ping's error when no broker
// answered in time.
var ErrUnreachable = errors.New("kafka: no broker answered")

// TopicInfo is what Ping learned about cfg.Topic.
type TopicInfo struct {
	// Partitions is the topic's partition count; 0 when the brokers do
	// not know the topic (Err says why).
	Partitions int
	// Err is the brokers' error for the topic (UNKNOWN_TOPIC_OR_PARTITION,
	// TOPIC_AUTHORIZATION_FAILED), nil when it exists.
	Err error
}

// Ping asks cfg's brokers for cfg.Topic's metadata, with cfg's SASL and
// TLS, within ctx: what `config check --probe` and every start ask first,
// so an unreachable broker fails fast instead of being retried forever. A
// broker that never answers is an [ErrUnreachable] naming the last
// connection error ("connection refused"); a topic the brokers do not know
// is no error of Ping's but TopicInfo.Err.
func Ping(ctx context.Context, cfg Config, logger *slog.Logger) (TopicInfo, error) {
	cfg = cfg.withDefaults()
	var dials lastDialError
	cl, err := cfg.newClient("client", logger, kgo.WithHooks(&dials))
	if err != nil {
		return TopicInfo{}, err
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, cfg.Topic)
	if err != nil {
		reason := err
		if last := dials.get(); last != nil {
			reason = last
		}
		return TopicInfo{}, fmt.Errorf("%w (brokers %v): %w", ErrUnreachable, cfg.Brokers, reason)
	}
	t, ok := md.Topics[cfg.Topic]
	if !ok {
		return TopicInfo{Err: fmt.Errorf("topic %s not in the metadata", cfg.Topic)}, nil
	}
	if t.Err != nil {
		return TopicInfo{Err: fmt.Errorf("topic %s: %w", cfg.Topic, t.Err)}, nil
	}
	return TopicInfo{Partitions: len(t.Partitions)}, nil
}

// lastDialError keeps the last failed connection attempt.
type lastDialError struct {
	mu  sync.Mutex
	err error
}

func (d *lastDialError) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		d.mu.Lock()
		d.err = err
		d.mu.Unlock()
	}
}

func (d *lastDialError) get() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}
