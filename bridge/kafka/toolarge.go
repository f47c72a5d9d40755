package kafka

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BatchTooLargeError is a fetch error (inside a [PartitionError]) for a
// record batch that decompresses to more than [Config.MaxDecompressBytes].
// franz-go stops fetching the partition there, so nothing past the batch is
// read until a [Consumer.Seek] moves the partition to Next or elsewhere.
type BatchTooLargeError struct {
	Topic     string
	Partition int32
	Offset    int64 // the batch's first offset
	Next      int64 // the offset after its last record
	Limit     int64 // Config.MaxDecompressBytes
}

func (e *BatchTooLargeError) Error() string {
	return fmt.Sprintf("kafka: %s[%d]: the record batch at offsets %d-%d decompresses to more than kafka.max_decompress_bytes (%d bytes)",
		e.Topic, e.Partition, e.Offset, e.Next-1, e.Limit)
}

func (e *BatchTooLargeError) Unwrap() error { return kgo.ErrMaxDecompress }

// batchTooLarge turns franz-go's error for a batch over the bound into a
// BatchTooLargeError; other errors are returned as they are.
func batchTooLarge(err error, limit int64) error {
	tl, ok := errors.AsType[*kgo.ErrDecompressTooLarge](err)
	if !ok {
		return err
	}
	return &BatchTooLargeError{Topic: tl.Topic, Partition: tl.Partition, Offset: tl.Offset, Next: tl.NextOffset, Limit: limit}
}
