package actors

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/internal/sim"
)

// TestCompressionBombIsDeadLettered: a record batch that decompresses past
// kafka.max_decompress_bytes (one 16 MiB zstd record, some KiB on the wire)
// is never decompressed: it becomes one dead letter naming its partition
// and offsets, with no body, and the partition's txn moves past it in the
// same commit, so the records after it are read and a restart neither
// reads it again nor dead-letters it twice.
func TestCompressionBombIsDeadLettered(t *testing.T) {
	h := newHarness(t, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.kcfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerBatchMaxBytes(32<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s := sim.New(sim.Config{Seed: 3, Events: 4})
	good := func() *kgo.Record {
		key, value, ev := s.Next(nil)
		h.events = append(h.events, ev)
		return &kgo.Record{Topic: topic, Partition: 0, Key: key, Value: value}
	}
	bomb := &kgo.Record{Topic: topic, Partition: 0, Value: make([]byte, 16<<20)}
	for _, rec := range []*kgo.Record{good(), good(), bomb, good(), good()} {
		if err := cl.ProduceSync(t.Context(), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	h.records = 5
	r := h.start(Config{}, nil)
	h.waitCommitted(r, 30*time.Second)
	r.stop(t)
	h.checkExactlyOnce()

	// A restart resumes past the batch: nothing read again.
	r = h.start(Config{}, nil)
	if err := r.engine.CommitNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.stop(t)

	nc, err := nats.Connect(h.bridge.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := js.Stream(t.Context(), bridge.DefaultDLQStream("sensor_events"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := stream.Info(t.Context())
	if info.State.Msgs != 1 {
		t.Fatalf("the DLQ holds %d letters, want the batch's one", info.State.Msgs)
	}
	msg, err := stream.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	reason := msg.Header.Get(bridge.HeaderError)
	if msg.Header.Get(bridge.HeaderPartition) != "0" || msg.Header.Get(bridge.HeaderOffset) != "2" || len(msg.Data) != 0 ||
		!strings.Contains(reason, "[0]") || !strings.Contains(reason, "offsets 2-2") || !strings.Contains(reason, "kafka.max_decompress_bytes") {
		t.Fatalf("letter: partition %s offset %s, %d bytes, reason %q; want partition 0, offset 2, no body, a reason naming them and the limit",
			msg.Header.Get(bridge.HeaderPartition), msg.Header.Get(bridge.HeaderOffset), len(msg.Data), reason)
	}
}
