package messages

import (
	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Fetch is sent by the fetch loop to a table's reader of a partition with
// the records of one poll that the reader has not taken yet. Done is called
// once the rows mapped from them are written by the buffers (at once if
// there are none), so the fetch loop can bound what is in flight.
type Fetch struct {
	Gen       uint64
	Topic     string
	Partition int32
	// From is the offset the loop thinks the reader continues from (the
	// records start there or after it): a reader that stopped elsewhere
	// (it ran out of room and the loop has not heard yet) drops the
	// Fetch, and the loop hands it the records again from where it
	// stopped.
	From    int64
	Records []*kgo.Record
	Done    func()
	// Skip, if set, is the record batch after Records, which the consumer
	// refused to decompress (kafka.max_decompress_bytes): the reader
	// dead-letters it and counts its offsets consumed, so the epoch's txn
	// moves past it. The fetch loop has already moved Kafka past it.
	Skip *SkippedBatch
}

// SkippedBatch is a record batch deltaflow does not read: its offsets and
// why.
type SkippedBatch struct {
	Offset, LastOffset int64
	Reason             string
}

// RowBatch is sent by a reader to a buffer: rows of one epoch, ready for
// Parquet (data columns only, with column index and definition level set).
// The rows' byte values live in memory the batch owns; the buffer calls
// Release once it has written them, so the reader can reuse that memory.
type RowBatch struct {
	Gen   uint64
	Epoch uint64
	Rows  []parquet.Row
	// Offsets, for a table in upsert mode, are the rows' records' offsets,
	// one per row: the order of changes of equal sequence.
	Offsets []int64
	Bytes   int64
	// Reserved is what the reader counted in the memory budget, besides
	// Bytes, for the file of the epoch the rows may open (its writer's
	// fixed memory): the buffer keeps it if it opens the file, and gives
	// it back if the file was open already.
	Reserved int64
	Release  func()
}
