package kafka

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/deltaflow/deltaflow/ledger"
)

// TestBatchTooLargeIsReportedUndecompressed: a record batch that
// decompresses past kafka.max_decompress_bytes (a 16 MiB zstd record, some
// KiB on the wire) is reported by Poll with its offsets instead of being
// decompressed, stops its partition until a Seek past it, and the records
// after it are read then.
func TestBatchTooLargeIsReportedUndecompressed(t *testing.T) {
	cfg := newCluster(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerBatchMaxBytes(32<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	small := func() *kgo.Record { return &kgo.Record{Topic: topic, Partition: 0, Value: []byte("small")} }
	for _, recs := range [][]*kgo.Record{{small(), small()}, {{Topic: topic, Partition: 0, Value: make([]byte, 16<<20)}}, {small()}} {
		if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c := newConsumer(t, cfg, &handler{})
	got := offsets{}
	var tooLarge *BatchTooLargeError
	for deadline := time.Now().Add(10 * time.Second); tooLarge == nil && time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		bs, err := c.Poll(ctx)
		cancel()
		got.add(bs)
		var pe *PartitionError
		if errors.As(err, &pe) && pe.Partition == 0 {
			tooLarge, _ = errors.AsType[*BatchTooLargeError](err)
		}
	}
	want := &BatchTooLargeError{Topic: topic, Partition: 0, Offset: 2, Next: 3, Limit: 4 << 20}
	if tooLarge == nil || *tooLarge != *want || !slices.Equal(got[0], seq(0, 2)) {
		t.Fatalf("polled %v and error %+v; want offsets 0-1, then %+v", got, tooLarge, want)
	}
	// Stopped at the batch: the record after it comes only after a Seek.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	if bs, _ := c.Poll(ctx); len(bs) != 0 {
		t.Fatalf("the partition was fetched past the batch without a seek: %v", bs)
	}
	cancel()
	c.Seek(map[ledger.TP]int64{{Topic: topic, Partition: 0}: tooLarge.Next})
	if got := pollUntil(t, c, 10*time.Second, func(o offsets) bool { return len(o[0]) == 1 }); !slices.Equal(got[0], []int64{3}) {
		t.Fatalf("after the seek polled %v, want offset 3", got[0])
	}
}

// TestBatchTooLargeReachesAnInterruptedPoll: franz-go reports a batch over
// kafka.max_decompress_bytes once and stops its partition, so a Poll whose
// context ends as the report comes in (the fetch loop interrupts polls for
// every request and room in a budget) must still return it; it was dropped,
// and the partition stayed stopped with the batch unread (a run
// --until-latest of several tables that never ended).
func TestBatchTooLargeReachesAnInterruptedPoll(t *testing.T) {
	cfg := newCluster(t)
	produceBomb(t, cfg)
	c := newConsumer(t, cfg, &handler{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := c.Poll(endsAsPolled{ctx})
	if _, ok := errors.AsType[*BatchTooLargeError](err); !ok {
		t.Fatalf("the poll interrupted as the batch too large came returned %v, not the batch", err)
	}
}

// endsAsPolled is a context that has ended by the time PollRecords returns
// (its Err) but not while PollRecords waits (its Done, until the parent's).
type endsAsPolled struct{ context.Context }

func (endsAsPolled) Err() error { return context.Canceled }

// TestBatchTooLargeAfterAPause: franz-go drops the buffered fetch of a
// paused partition at the next poll, and with it a batch-too-large report,
// after which the partition stays stopped until a seek. Pause returns the
// report it held; one in a fetch still in flight as the partition pauses
// is dropped, and Resume seeks each partition to where it continues, so
// the report comes again. (The fetch loop pauses a partition whenever no
// table takes it for a moment; a partition stopped so never moved again,
// and run --until-latest never ended.)
func TestBatchTooLargeAfterAPause(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	cfg := Config{Brokers: cluster.ListenAddrs(), Group: "g-" + t.Name()}
	produceBomb(t, cfg)
	asked := askedForTheBomb(cluster)
	c := newConsumer(t, cfg, &handler{})
	p0 := ledger.TP{Topic: topic, Partition: 0}
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("no fetch asked for the batch")
	}
	time.Sleep(300 * time.Millisecond) // its answer buffered
	_, err = c.Pause(p0)
	if tl, ok := errors.AsType[*BatchTooLargeError](err); !ok || tl.Partition != 0 {
		t.Fatalf("Pause returned %v; want the batch too large it held", err)
	}
	// A report lost to the pause is as good as this one, not acted upon:
	// after the resume it must come again.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, _ = c.Poll(ctx)
	cancel()
	c.Resume(p0)
	var tooLarge *BatchTooLargeError
	for deadline := time.Now().Add(5 * time.Second); tooLarge == nil && time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		_, err := c.Poll(ctx)
		cancel()
		tooLarge, _ = errors.AsType[*BatchTooLargeError](err)
	}
	if tooLarge == nil {
		t.Fatal("after a pause and a resume, the batch too large was never reported (the partition stayed stopped)")
	}
}

// askedForTheBomb tells when a fetch asks for partition 0 at offset 0,
// produceBomb's batch; its answer is buffered soon after.
func askedForTheBomb(cluster *kfake.Cluster) chan struct{} {
	asked := make(chan struct{}, 1)
	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		for _, rt := range req.(*kmsg.FetchRequest).Topics {
			for _, rp := range rt.Partitions {
				if rp.Partition == 0 && rp.FetchOffset == 0 {
					select {
					case asked <- struct{}{}:
					default:
					}
				}
			}
		}
		return nil, nil, false
	})
	return asked
}

// produceBomb writes to partition 0 one zstd record batch that
// decompresses to 16 MiB, past the 4 MiB kafka.max_decompress_bytes of the
// tests' consumers, some KiB on the wire.
func produceBomb(t *testing.T, cfg Config) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerBatchMaxBytes(32<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Partition: 0, Value: make([]byte, 16<<20)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestSeekRestartsAPartitionStoppedAtABatchTooLarge: franz-go stops a
// partition at a batch over kafka.max_decompress_bytes until a SetOffsets
// moves it, and any SetOffsets drops every partition's buffered fetches,
// the batch's report with them. Its group consumer takes a SetOffsets to
// the offset it last set as no move at all, so a seek back to the batch
// after such a loss must still restart the partition. (It did not: a run
// --until-latest of several tables waited on it for minutes, "partitions
// with records waiting returned none" each time the loop sought it again.)
func TestSeekRestartsAPartitionStoppedAtABatchTooLarge(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	cfg := Config{Brokers: cluster.ListenAddrs(), Group: "g-" + t.Name()}
	seed(t, cfg, map[int32]int{1: 2})
	produceBomb(t, cfg) // partition 0, offset 0
	asked := askedForTheBomb(cluster)
	c := newConsumer(t, cfg, &handler{})
	p0, p1 := ledger.TP{Topic: topic, Partition: 0}, ledger.TP{Topic: topic, Partition: 1}
	reported := func(timeout time.Duration) bool {
		for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			_, err := c.Poll(ctx)
			cancel()
			if tl, ok := errors.AsType[*BatchTooLargeError](err); ok && tl.Partition == 0 {
				return true
			}
		}
		return false
	}
	if !reported(10 * time.Second) {
		t.Fatal("the batch too large was never reported")
	}
	waitAsked := func() {
		t.Helper()
		select {
		case <-asked:
		case <-time.After(10 * time.Second):
			t.Fatal("no fetch asked for the batch after the seek")
		}
		time.Sleep(300 * time.Millisecond) // its answer buffered
	}
	for range len(asked) {
		<-asked
	}
	c.Seek(map[ledger.TP]int64{p0: 0}) // fetch the batch again: reported, and buffered
	waitAsked()
	c.Seek(map[ledger.TP]int64{p1: 1}) // drops the buffered report; partition 0 stays stopped
	c.Seek(map[ledger.TP]int64{p0: 0}) // where it was last set: must restart it all the same
	if !reported(5 * time.Second) {
		t.Fatal("after a seek back to the batch, it was never reported again (the partition stayed stopped)")
	}
}
