package kafka

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFetchDecompressionBounded: record batches each under
// kafka.max_decompress_bytes but together far over it (45 zstd batches of
// 1 MiB of zeros, some hundred bytes each on the wire, all in one 256 KiB
// fetch) were all decompressed by one fetch: one Poll brought 45 MiB. Now a
// fetch stops decompressing at the bound and the rest is fetched later: no
// Poll brings more than the bound, Poll reports no error for what it left,
// and every offset still comes once, in order.
func TestFetchDecompressionBounded(t *testing.T) {
	cfg := newCluster(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerBatchMaxBytes(2<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n, size = 45, 1 << 20
	for i := range n {
		// One at a time: each its own batch.
		rec := &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: make([]byte, size)}
		if err := cl.ProduceSync(t.Context(), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c := newConsumer(t, cfg, &handler{})
	limit := int(DefaultConfig().MaxDecompressBytes)
	got := offsets{}
	most := 0
	for deadline := time.Now().Add(30 * time.Second); got.total() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("timed out; polled %v", got)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		bs, err := c.Poll(ctx)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Poll: %v", err)
		}
		polled := 0
		for _, b := range bs {
			for _, r := range b.Records {
				polled += len(r.Value)
			}
		}
		most = max(most, polled)
		got.add(bs)
	}
	for p := range int32(3) {
		if !slices.Equal(got[p], seq(0, n/3)) {
			t.Fatalf("partition %d: polled offsets %v, want 0-%d once each, in order", p, got[p], n/3-1)
		}
	}
	if most > limit {
		t.Fatalf("one Poll brought %d MiB decompressed; kafka.max_decompress_bytes is %d MiB", most>>20, limit>>20)
	}
	t.Logf("at most %d MiB decompressed a Poll", most>>20)
}
