package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/deltaflow/deltaflow/ledger"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Admin answers the questions one-shot commands (takeover, seek) and the
// start positions ask of the brokers about cfg.Topic: its ID and where each
// partition's log starts and ends, the first offset at a time, and a
// consumer group's committed offsets. It uses the same brokers, SASL and TLS as the consumer.
type Admin struct {
	topic string
	cl    *kgo.Client
	adm   *kadm.Client
}

// NewAdmin connects lazily to cfg's brokers. A nil logger discards logs.
// Close it when done.
func NewAdmin(cfg Config, logger *slog.Logger) (*Admin, error) {
	cl, err := cfg.newClient("admin", logger)
	if err != nil {
		return nil, err
	}
	return &Admin{topic: cfg.withDefaults().Topic, cl: cl, adm: kadm.NewClient(cl)}, nil
}

// Close closes the client.
func (a *Admin) Close() { a.cl.Close() }

// TopicLogs returns the topic's ID and every partition's log range, asked
// of the brokers now.
func (a *Admin) TopicLogs(ctx context.Context) (ledger.TopicLogs, error) {
	logs, err := topicLogs(ctx, a.cl, a.adm, a.topic)
	if err == nil && len(logs.Ranges) == 0 {
		err = fmt.Errorf("kafka: topic %s has no partitions (does it exist?)", a.topic)
	}
	return logs, err
}

// OffsetsAt returns, per partition, the first offset whose record timestamp
// is at or after t (Kafka's ListOffsets by time); a partition with no such
// record gets its end offset.
func (a *Admin) OffsetsAt(ctx context.Context, t time.Time) (map[int32]int64, error) {
	return a.list(ctx, "at "+t.UTC().Format(time.RFC3339Nano), func(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
		return a.adm.ListOffsetsAfterMilli(ctx, t.UnixMilli(), topics...)
	})
}

func (a *Admin) list(ctx context.Context, what string, list func(context.Context, ...string) (kadm.ListedOffsets, error)) (map[int32]int64, error) {
	listed, err := list(ctx, a.topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: list %s offsets of %s: %w", what, a.topic, err)
	}
	out := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Topic == a.topic && o.Partition >= 0 {
			out[o.Partition] = o.Offset
		}
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("kafka: list %s offsets of %s: the topic has no partitions (does it exist?)", what, a.topic)
	}
	return out, nil
}

// GroupOffsets returns the offsets consumer group committed for the
// topic (the next offset each partition's consumer would read). Partitions
// the group never committed are absent.
func (a *Admin) GroupOffsets(ctx context.Context, group string) (map[int32]int64, error) {
	fetched, err := a.adm.FetchOffsets(ctx, group)
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: offsets of group %s: %w", group, err)
	}
	out := map[int32]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Topic == a.topic && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out, nil
}
