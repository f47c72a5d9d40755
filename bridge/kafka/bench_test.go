package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/internal/sim"
)

// BenchmarkProduceConsume produces b.N simulated sensor records to kfake with
// ProduceAsync, then polls them back with a group Consumer.
func BenchmarkProduceConsume(b *testing.B) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	cfg := Config{Brokers: c.ListenAddrs(), Group: "bench"}
	p, err := NewProducer(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	s := sim.New(sim.Config{Seed: 1, Events: b.N})
	ctx := context.Background()

	b.ResetTimer()
	start := time.Now()
	var bytes int64
	for range b.N {
		k, v, _ := s.Next(nil)
		bytes += int64(len(k) + len(v))
		p.ProduceAsync(ctx, &kgo.Record{Key: k, Value: v})
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	produced := time.Since(start)

	start = time.Now()
	cons, err := NewConsumer(cfg, &handler{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	for n := 0; n < b.N; {
		bs, err := cons.Poll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, bt := range bs {
			n += len(bt.Records)
		}
	}
	consumed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/produced.Seconds(), "produced/s")
	b.ReportMetric(float64(b.N)/consumed.Seconds(), "consumed/s")
	b.ReportMetric(float64(bytes)/float64(b.N), "B/record")
}
