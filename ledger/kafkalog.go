package ledger

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/deltaflow/deltaflow/delta"
)

// Start positions (kafka.start_offset): where a partition the table holds no
// offset of starts.
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"
)

// Held, as a partition's next offset in a start plan, in the consumer's
// Handler.Assigned answer or in its Seek, holds the partition: it stays
// assigned but is not fetched until a Seek gives it an offset. The engine
// holds a partition whose offset the log no longer has, or whose start it
// refuses to choose.
const Held int64 = -2

// Data-loss policies (kafka.on_data_loss).
const (
	// OnDataLossFail refuses to read a partition whose next offset the log
	// no longer holds (Spark's failOnDataLoss=true, a consumer's
	// auto.offset.reset=none): the partition is held, unread, until a human
	// decides.
	OnDataLossFail = "fail"
	// OnDataLossSkip resumes such a partition where the log now starts,
	// recording what was skipped in the table's history.
	OnDataLossSkip = "skip"
)

// LogRange is the offsets a partition's log holds: records at Start up to,
// not including, End (the high watermark). Start == End: empty.
type LogRange struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// TopicLogs is what the brokers say of a topic's partitions at one moment:
// the topic's ID and each partition's log range. The consumer hands it to
// [Handler.Assigned] so the handler can check its stored offsets against
// the log before anything is read.
type TopicLogs struct {
	Topic string
	// ID is the topic's ID (KIP-516) as Kafka's tools print it (URL-safe
	// base64, e.g. "pLDKJ2HLSx-Xk5yGoJwFhg"); a topic deleted and created
	// again under the same name gets a new one. Empty when the brokers
	// predate topic IDs.
	ID string
	// Ranges holds every partition asked about.
	Ranges map[int32]LogRange
}

// Partitions returns the partitions of l, sorted.
func (l TopicLogs) Partitions() []int32 { return slices.Sorted(maps.Keys(l.Ranges)) }

// FormatTopicID renders a topic ID as Kafka's tools do; the zero ID (brokers
// without topic IDs) is "".
func FormatTopicID(id [16]byte) string {
	if id == [16]byte{} {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// Causes of a [DataLossError].
const (
	// LossRetention: the records after the stored offset were deleted
	// (retention, DeleteRecords) before they were read.
	LossRetention = "retention"
	// LossRecreated: the topic was deleted and created again (its ID
	// changed), or its log ends before the stored offset (recreated, or
	// truncated by an unclean leader election): what follows the stored
	// offset is not what the stored offset counted.
	LossRecreated = "recreated"
)

// DataLossError reports a partition whose stored next offset the log no
// longer continues from: reading on would silently skip records. Its
// message names the partition, the offsets and what to do.
type DataLossError struct {
	Topic     string
	Partition int32
	Cause     string // LossRetention or LossRecreated
	// Next is the next offset the table says to read.
	Next int64
	// Log is the partition's log when it was checked.
	Log LogRange
	// StoredID and ID are the topic ID recorded with the offsets and the
	// topic's ID now, when they differ (Cause LossRecreated).
	StoredID, ID string
	// Resume is where reading continues when the loss is skipped: the log
	// start. (A log ending before Next without a new topic ID was recreated
	// on brokers without IDs, or wiped, far more likely on a small cluster
	// than truncated by an unclean leader election: its records are new.)
	Resume int64
}

// Lost is the number of records known to be lost: those retention deleted
// between Next and the log start; -1 when unknown (a recreated topic: what
// followed Next in the old topic cannot be counted).
func (e *DataLossError) Lost() int64 {
	if e.Cause == LossRetention {
		return e.Log.Start - e.Next
	}
	return -1
}

func (e *DataLossError) Error() string {
	var what string
	switch {
	case e.Cause == LossRetention:
		what = fmt.Sprintf("offsets %d-%d (%d records) were deleted (retention or DeleteRecords) before they were read: the log now starts at %d",
			e.Next, e.Log.Start-1, e.Lost(), e.Log.Start)
	case e.StoredID != "":
		what = fmt.Sprintf("the topic was deleted and created again (topic ID %s, the table's offsets are of %s): "+
			"its next offset %d counts records of the old topic; %s", e.ID, e.StoredID, e.Next, e.Log.describe("the new log"))
	default:
		what = fmt.Sprintf("the log ends at %d, before the table's next offset %d: the topic was recreated (or its log wiped "+
			"or truncated), so its records are not the ones the table counted; %s", e.Log.End, e.Next, e.Log.describe("the log"))
	}
	return fmt.Sprintf("kafka: data loss on %s[%d]: %s. Nothing of the partition is read. To accept the loss, set "+
		"kafka.on_data_loss: skip (resumes at offset %d, recorded as DATA_LOSS in the table's history) or run "+
		"`deltaflow seek --offsets %d:%d --force`, then restart deltaflow",
		e.Topic, e.Partition, what, e.Resume, e.Partition, e.Resume)
}

// describe says what a log holds, as "<name> holds offsets 45-59".
func (r LogRange) describe(name string) string {
	if r.Start == r.End {
		return fmt.Sprintf("%s is empty (its next offset is %d)", name, r.End)
	}
	return fmt.Sprintf("%s holds offsets %d-%d", name, r.Start, r.End-1)
}

// CheckNext compares where the table says partition p continues (next,
// under the topic ID storedID, "" if none was recorded) with the partition's
// log now (r, under the topic ID id) and returns the loss reading from next
// would cause, or nil when next is a record of the log or its end. A
// negative next (nothing stored) is never a loss.
func CheckNext(topic string, p int32, next int64, storedID, id string, r LogRange) *DataLossError {
	if next < 0 {
		return nil
	}
	e := &DataLossError{Topic: topic, Partition: p, Next: next, Log: r, Resume: r.Start}
	switch {
	case storedID != "" && id != "" && storedID != id:
		e.Cause, e.StoredID, e.ID = LossRecreated, storedID, id
	case next > r.End:
		e.Cause = LossRecreated
	case next < r.Start:
		e.Cause = LossRetention
	default:
		return nil
	}
	return e
}

// CheckSeek refuses an explicit start (seek) that would record a recreated
// topic's new ID (logs.ID) while some partition the table holds an offset
// of keeps it, not in next: under the new ID that offset of the old topic
// would look valid, and the records before it would be skipped. It is
// PlanStarts' recreated-topic rule for starts a human chooses.
func CheckSeek(s *delta.Snapshot, app, topic string, logs TopicLogs, next map[int32]int64) error {
	stored := s.Metadata().Configuration[TopicIDProperty(app, topic)]
	if stored == "" || logs.ID == "" || stored == logs.ID {
		return nil
	}
	var left []int32
	for _, p := range slices.Sorted(maps.Keys(Last(s, app, topic))) {
		if _, ok := next[p]; !ok {
			left = append(left, p)
		}
	}
	if len(left) == 0 {
		return nil
	}
	return fmt.Errorf("refusing: topic %s was deleted and created again (topic ID %s; the table's offsets are of %s), and "+
		"partitions %v would keep offsets of the old topic: give every partition an offset (--offsets for all %d, "+
		"--timestamp or --group)", topic, logs.ID, stored, left, len(logs.Ranges))
}

// TP is one Kafka topic partition: how the engine, the consumer and the
// ledger name what a table reads, now that one table may read several
// topics and one topic feed several tables.
type TP struct {
	Topic     string
	Partition int32
}

func (tp TP) String() string { return fmt.Sprintf("%s[%d]", tp.Topic, tp.Partition) }

// ByTopic splits per-partition values by topic: what the per-topic ledger
// functions take.
func ByTopic[V any](m map[TP]V) map[string]map[int32]V {
	out := map[string]map[int32]V{}
	for tp, v := range m {
		if out[tp.Topic] == nil {
			out[tp.Topic] = map[int32]V{}
		}
		out[tp.Topic][tp.Partition] = v
	}
	return out
}

// Of returns topic's per-partition values keyed by TP.
func Of[V any](topic string, m map[int32]V) map[TP]V {
	out := make(map[TP]V, len(m))
	for p, v := range m {
		out[TP{topic, p}] = v
	}
	return out
}

// CompareTP orders topic partitions by topic, then partition.
func CompareTP(a, b TP) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}
