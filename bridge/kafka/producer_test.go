package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestProducer(t *testing.T) {
	cfg := newCluster(t)
	p, err := NewProducer(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Produce(t.Context(), []*kgo.Record{{Value: []byte("a")}, {Value: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		p.ProduceAsync(t.Context(), &kgo.Record{Key: []byte("k"), Value: []byte("c")})
	}
	if err := p.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := newConsumer(t, cfg, &handler{})
	got := pollUntil(t, c, 10*time.Second, func(o offsets) bool { return o.total() == 102 })
	if got.total() != 102 {
		t.Errorf("consumed %d records, want 102", got.total())
	}

	// A failed async produce is reported by Flush.
	p.ProduceAsync(t.Context(), &kgo.Record{Topic: "no-such-topic", Value: []byte("x")})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err == nil {
		t.Error("Flush after producing to a missing topic: nil error")
	}
}

func TestCreateTopicIdempotent(t *testing.T) {
	cfg := newCluster(t)
	for range 2 {
		if err := CreateTopic(t.Context(), cfg, "other", 4, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := CreateTopic(t.Context(), cfg, topic, 3, 1); err != nil {
		t.Fatalf("existing seeded topic: %v", err)
	}
	td, err := kadm.NewClient(mustClient(t, cfg)).ListTopics(t.Context(), "other")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td["other"].Partitions); n != 4 {
		t.Errorf("topic other has %d partitions, want 4", n)
	}
}

func TestSASL(t *testing.T) {
	for _, mech := range []string{MechPlain, MechSCRAMSHA256, MechSCRAMSHA512} {
		t.Run(mech, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic),
				kfake.EnableSASL(), kfake.Superuser(mech, "alice", "pw"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// kfake has no TLS: PLAIN in the clear, allowed explicitly.
			cfg := Config{Brokers: c.ListenAddrs(), SASL: SASL{Mechanism: mech, User: "alice", Password: "pw", AllowPlainWithoutTLS: true}}
			if err := CreateTopic(t.Context(), cfg, "t2", 1, 1); err != nil {
				t.Fatal(err)
			}
			cfg.SASL.Password = "wrong"
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			if err := CreateTopic(ctx, cfg, "t3", 1, 1); err == nil {
				t.Error("wrong password accepted")
			}

		})
	}
}
