package kafka

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errFetchFull is what fetchBudget refuses a batch with. franz-go then
// returns the partition's records before the batch and fetches the batch
// again from its offset later; a partition with none reports the error,
// which Poll drops.
var errFetchFull = errors.New("kafka: the fetches hold kafka.max_decompress_bytes decompressed; the batch is fetched again later")

// fetchBudget is the consumer's decompressor: it bounds what one record
// batch may decompress to (franz-go's own decompressor, bounded by
// MaxDecompressBatchBytes) and, at the same limit, what the client's
// fetches hold decompressed together. franz-go decompresses a whole fetch
// response before Poll sees any of it: a 256 KiB fetch of small batches
// that each compress thousands to one once decompressed to 1.2 GiB. Now a
// batch that would take the fetches past the limit is refused, unless
// they hold nothing (it passes alone), and franz-go fetches it again when
// its partition is next fetched: nothing is skipped, and a refused batch
// costs one decompression in vain.
//
// A fetch holds what its batches decompressed to from the moment they are
// read until its broker's next fetch response is read: franz-go fetches a
// broker again only once the previous fetch has been polled entirely. The
// FetchBatchRead hook counts a batch in the goroutine that decompressed it,
// before that goroutine decompresses the next one; brokers answering at
// once may each add one batch more.
type fetchBudget struct {
	batch kgo.Decompressor
	limit int64
	held  atomic.Int64 // the sum of byNode

	mu     sync.Mutex
	byNode map[int32]int64 // what each broker's last fetch decompressed
}

func newFetchBudget(limit int) (*fetchBudget, error) {
	batch, err := batchDecompressor(limit)
	if err != nil {
		return nil, err
	}
	return &fetchBudget{batch: batch, limit: int64(limit), byNode: map[int32]int64{}}, nil
}

// batchDecompressor returns franz-go's decompressor bounded at limit bytes
// a batch. franz-go builds it only inside a client, and only when the
// client has no decompressor of ours: a client that never connects builds
// it here.
func batchDecompressor(limit int) (kgo.Decompressor, error) {
	cl, err := kgo.NewClient(kgo.MaxDecompressBatchBytes(limit))
	if err != nil {
		return nil, fmt.Errorf("kafka: decompressor: %w", err)
	}
	defer cl.Close()
	d, ok := cl.OptValue(kgo.WithDecompressor).(kgo.Decompressor)
	if !ok {
		return nil, errors.New("kafka: decompressor: franz-go built none")
	}
	return d, nil
}

// Decompress is kgo.Decompressor.
func (b *fetchBudget) Decompress(src []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	if codec == kgo.CodecNone {
		return src, nil
	}
	held := b.held.Load()
	if held >= b.limit {
		return nil, errFetchFull
	}
	out, err := b.batch.Decompress(src, codec)
	if err == nil && held > 0 && held+int64(len(out)) > b.limit {
		return nil, errFetchFull // a batch passes the limit alone only
	}
	return out, err
}

// OnFetchBatchRead is kgo.HookFetchBatchRead: it counts what a compressed
// batch decompressed to against its broker's fetch.
func (b *fetchBudget) OnFetchBatchRead(meta kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	if m.CompressionType == uint8(kgo.CodecNone) {
		return
	}
	b.mu.Lock()
	b.byNode[meta.NodeID] += int64(m.UncompressedBytes)
	b.held.Add(int64(m.UncompressedBytes))
	b.mu.Unlock()
}

// OnBrokerRead is kgo.HookBrokerRead: a broker's fetch response is read
// (before it is decompressed), so its previous fetch has been polled.
func (b *fetchBudget) OnBrokerRead(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == int16(kmsg.Fetch) {
		b.forget(meta.NodeID)
	}
}

// OnBrokerDisconnect is kgo.HookBrokerDisconnect: a broker that leads none
// of our partitions any more is fetched no more, and its idle connections
// are closed.
func (b *fetchBudget) OnBrokerDisconnect(meta kgo.BrokerMetadata, _ net.Conn) {
	b.forget(meta.NodeID)
}

func (b *fetchBudget) forget(node int32) {
	b.mu.Lock()
	b.held.Add(-b.byNode[node])
	b.byNode[node] = 0
	b.mu.Unlock()
}
