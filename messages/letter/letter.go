// Package letter is the dead letter: a Kafka record that did not become a
// row, with why. The reader captures it, the committer holds it with its
// epoch, the NATS bridge stores it in the DLQ stream and tools read it back:
// one type for all of them, importing nothing (messages and bridge both do).
package letter

import "strconv"

// DeadLetter is a Kafka record that could not be mapped to a row, with the
// reason. It reaches the DLQ stream before its epoch commits.
type DeadLetter struct {
	Topic string
	// TopicID is the topic's ID (Kafka's KIP-516) when the brokers have
	// IDs, set by the committer: a recreated topic reuses offsets, and its
	// records must not pass for duplicates of the old topic's.
	TopicID   string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Timestamp int64 // Kafka timestamp, ms since the epoch; 0: none
	Reason    string
	// LastOffset, when above Offset, makes the letter stand for the records
	// Offset to LastOffset: a record batch deltaflow did not read
	// (SkippedBatch), whose key, value and timestamp it does not know.
	LastOffset int64
}

// MsgID is the letter's JetStream message id,
// "topic/partition/offset/topicID" ("topic/partition/offset" without a
// topic ID): republishing the same record (an epoch replayed after a crash)
// within the DLQ stream's duplicate window (24h) stores it once, while a
// record of a recreated topic at a reused offset is a new letter.
func (d DeadLetter) MsgID() string {
	id := d.Topic + "/" + strconv.FormatInt(int64(d.Partition), 10) + "/" + strconv.FormatInt(d.Offset, 10)
	if d.TopicID != "" {
		id += "/" + d.TopicID
	}
	return id
}
