package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/deltaflow/deltaflow/delta"
)

// AppID is the txn appId under which the last committed offset of one
// Kafka partition is recorded: "<app>-<topic>-<partition>".
func AppID(app, topic string, partition int32) string {
	return app + "-" + topic + "-" + strconv.FormatInt(int64(partition), 10)
}

// ParseAppID is the inverse of AppID for one app and topic: the partition
// an appId records, and false for an appId of another app or topic (or not
// deltaflow's at all).
func ParseAppID(appID, app, topic string) (int32, bool) {
	rest, ok := strings.CutPrefix(appID, app+"-"+topic+"-")
	if !ok {
		return 0, false
	}
	p, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != rest {
		return 0, false
	}
	return int32(p), true
}

// TopicIDProperty is the table property under which the Kafka topic ID the
// offsets of app and topic count in is recorded:
// "deltaflow.kafkaTopicId.<app>-<topic>". A topic deleted and created again
// gets a new ID, and its offsets start over: an offset of the old topic
// means nothing in the new one.
func TopicIDProperty(app, topic string) string {
	return topicIDPrefix + app + "-" + topic
}

const topicIDPrefix = "deltaflow.kafkaTopicId."

// IsOffsetsProperty reports whether a table property is part of the
// offsets state (a TopicIDProperty of any app and topic): it belongs with
// the txn actions, so a RESTORE, which keeps those, keeps it too.
func IsOffsetsProperty(key string) bool { return strings.HasPrefix(key, topicIDPrefix) }

// Last returns the last committed offset (txn version) of every partition
// of the topic the table records for app.
func Last(s *delta.Snapshot, app, topic string) map[int32]int64 {
	out := map[int32]int64{}
	for id, v := range s.Txns() {
		if p, ok := ParseAppID(id, app, topic); ok {
			out[p] = v
		}
	}
	return out
}

// Next returns, for each of partitions, the next offset to read according
// to the table: the txn version (the last offset committed) + 1, or -1 when
// the table holds nothing of the partition.
func Next(s *delta.Snapshot, app, topic string, partitions []int32) map[int32]int64 {
	out := make(map[int32]int64, len(partitions))
	for _, p := range partitions {
		out[p] = -1
		if v, ok := s.TxnVersion(AppID(app, topic, p)); ok {
			out[p] = v + 1
		}
	}
	return out
}

// Foreign returns the offsets that other apps hold of topic in the table:
// app → partition → last committed offset, read from appIds
// "<other>-<topic>-<partition>" whose app is not app. A new table.app_id on
// a table another app filled would otherwise start every partition at
// kafka.start_offset and read the topic again. (An appId is text: app "a"
// of topic "b-c" and app "a-b" of topic "c" write the same one, so a name
// that is a dash-suffix of another topic's may be taken for one; that
// errs on the side of refusing.)
func Foreign(s *delta.Snapshot, app, topic string) map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	infix := "-" + topic + "-"
	for id, v := range s.Txns() {
		i := strings.LastIndex(id, infix)
		if i <= 0 {
			continue
		}
		other := id[:i]
		p, ok := ParseAppID(id, other, topic)
		if !ok || other == app {
			continue
		}
		if out[other] == nil {
			out[other] = map[int32]int64{}
		}
		out[other][p] = v
	}
	return out
}

// Adopt returns the next offsets that continue where app stopped on topic,
// to Write under another app: how a renamed table.app_id (or a second
// deployment) takes over the first one's progress instead of reading the
// topic again (`deltaflow seek --from-app`).
func Adopt(s *delta.Snapshot, app, topic string) map[int32]int64 {
	next := map[int32]int64{}
	for p, v := range Last(s, app, topic) {
		next[p] = v + 1
	}
	return next
}

// Recover looks in the table's log for the last offsets of partitions ps
// of app and topic that the snapshot does not hold (TxnHistory): another
// engine's checkpoint drops a txn past delta.setTransactionRetentionDuration,
// but the commits before it keep it until log cleanup. It returns the last
// offset found per partition, and whether the search was certain: every
// partition was found, or the log was read back to its first version, so
// a partition not found never had an offset.
func Recover(ctx context.Context, tbl *delta.Table, s *delta.Snapshot, app, topic string, ps []int32) (map[int32]int64, bool, error) {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = AppID(app, topic, p)
	}
	found, complete, err := tbl.TxnHistory(ctx, s, ids)
	if err != nil {
		return nil, false, fmt.Errorf("offsets of %s in the table's history: %w", topic, err)
	}
	last := map[int32]int64{}
	for i, p := range ps {
		if t, ok := found[ids[i]]; ok {
			last[p] = t.Version
		}
	}
	return last, complete, nil
}

// ErrNoPartitions is Write's refusal of a commit that would set nothing.
var ErrNoPartitions = errors.New("no partitions")

// Write commits a txn action for every partition of next, so that deltaflow
// resumes partition p at offset next[p] (txn version next[p]-1): how
// takeover, seek, the configured start positions and the engine's own
// start and data-loss decisions say where to start, the Delta log staying
// the only authority. A non-empty topicID is recorded as the topic ID the
// offsets count in (TopicIDProperty) when the table records another. op
// names the commit in the table's history. s advances to the new version,
// which is returned.
func Write(ctx context.Context, tbl *delta.Table, s *delta.Snapshot, app, topic string, next map[int32]int64, topicID string, op delta.Operation) (int64, error) {
	key := TopicIDProperty(app, topic)
	setID := topicID != "" && s.Metadata().Configuration[key] != topicID
	if len(next) == 0 && !setID {
		return 0, fmt.Errorf("set offsets of %s: %w", topic, ErrNoPartitions)
	}
	now := time.Now().UnixMilli()
	actions := make([]delta.Action, 0, len(next)+1)
	if setID {
		actions = append(actions, delta.Action{MetaData: s.Metadata().WithProperty(key, topicID)})
	}
	for _, p := range slices.Sorted(maps.Keys(next)) {
		if next[p] < 0 {
			return 0, fmt.Errorf("set offsets of %s: partition %d: negative offset %d", topic, p, next[p])
		}
		actions = append(actions, delta.Action{Txn: &delta.Txn{AppID: AppID(app, topic, p), Version: next[p] - 1, LastUpdated: &now}})
	}
	v, err := tbl.Commit(ctx, s, actions, op)
	if err != nil {
		return 0, fmt.Errorf("set offsets of %s: %w", topic, err)
	}
	return v, nil
}

// Moved returns, sorted, the partitions of read whose next offset in the
// table is no longer the one reading began from (read[p]): another writer
// advanced them, so an epoch holding them must not commit.
func Moved(s *delta.Snapshot, app, topic string, read map[int32]int64) []int32 {
	now := Next(s, app, topic, slices.Sorted(maps.Keys(read)))
	var moved []int32
	for p, next := range now {
		if next != read[p] {
			moved = append(moved, p)
		}
	}
	slices.Sort(moved)
	return moved
}

// Stale returns the txns of owned partitions to refresh at now: those an
// epoch does not advance, that no other writer moved since reading began
// from base, and that are past half of the table's
// delta.setTransactionRetentionDuration (same version, lastUpdated now).
// Committed, they keep an idle partition's offset from expiring: forgotten,
// the partition would be read again from its start offset and its records
// committed twice.
func Stale(s *delta.Snapshot, app, topic string, owned []int32, advanced map[int32]int64, base map[int32]int64, now time.Time) []delta.Txn {
	table := Next(s, app, topic, owned)
	var ids []string
	for _, p := range owned {
		if _, ok := advanced[p]; !ok && table[p] == base[p] {
			ids = append(ids, AppID(app, topic, p))
		}
	}
	return s.StaleTxns(ids, now)
}

// RetentionError is CheckRetention's refusal.
type RetentionError struct {
	Retention, FlushInterval time.Duration
}

func (e *RetentionError) Error() string {
	return fmt.Sprintf("delta.setTransactionRetentionDuration %s must be more than twice flush.interval (%s): "+
		"an idle partition's committed offset would expire before it is refreshed", e.Retention, e.FlushInterval)
}

// CheckRetention refuses a table whose txns expire before they can be
// refreshed. An owned partition's txn is re-committed by the first epoch
// after half of delta.setTransactionRetentionDuration (Stale), and epochs
// start every flush interval; with a retention under twice the interval an
// idle partition's committed offset could expire first, and its records be
// read and committed again.
func CheckRetention(s *delta.Snapshot, flushInterval time.Duration) error {
	if ret, ok := s.TxnRetention(); ok && ret <= 2*flushInterval {
		return &RetentionError{Retention: ret, FlushInterval: flushInterval}
	}
	return nil
}

// Reconcile compares a mirror of the offsets (the NATS KV bucket: last
// offset by partition) with the table's, which is the authority. It
// returns the partitions whose mirrored value is wrong or missing (set them
// to the table's) and those the table does not know (delete them), both
// sorted.
func Reconcile(table, mirror map[int32]int64) (correct, drop []int32) {
	for _, p := range slices.Sorted(maps.Keys(table)) {
		if off, ok := mirror[p]; !ok || off != table[p] {
			correct = append(correct, p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(mirror)) {
		if _, ok := table[p]; !ok {
			drop = append(drop, p)
		}
	}
	return correct, drop
}

// ForeignOffsetsError refuses to start a partition that the table holds no
// offset of for this app but holds another app's offsets of (Foreign):
// starting at kafka.start_offset would commit its records a second time.
// Adopting the other app's offsets, or a seek, says where to start.
type ForeignOffsetsError struct {
	Topic     string
	Partition int32
	App       string
	// Others are the other apps' next offsets of the partition.
	Others map[string]int64
}

func (e *ForeignOffsetsError) Error() string {
	apps := slices.Sorted(maps.Keys(e.Others))
	held := make([]string, len(apps))
	for i, a := range apps {
		held[i] = fmt.Sprintf("%q (next offset %d)", a, e.Others[a])
	}
	return fmt.Sprintf("partition %d of %s: the table holds no offset of app %q (table.app_id) but holds the offsets of %s: "+
		"starting at kafka.start_offset would write its records again. Nothing of the partition is read. To continue "+
		"where %q stopped, run `deltaflow seek --from-app %s`; to start elsewhere, `deltaflow seek --offsets %d:OFFSET` "+
		"(or kafka.start_offsets); then restart deltaflow",
		e.Partition, e.Topic, e.App, strings.Join(held, " and "), apps[0], apps[0], e.Partition)
}

// ForgottenOffsetsError refuses to start a partition the table holds no
// offset of when its offsets may have been forgotten: the table sets
// delta.setTransactionRetentionDuration, another engine's checkpoint may
// have dropped the expired txn, and log cleanup deleted the commits that
// held it (Recover was not certain). The partition may be new, or its
// records may be in the table already: only a human can say.
type ForgottenOffsetsError struct {
	Topic     string
	Partition int32
	App       string
	Retention string // the property's value
}

func (e *ForgottenOffsetsError) Error() string {
	return fmt.Sprintf("partition %d of %s: the table holds no offset of app %q, and its offsets may have expired "+
		"(delta.setTransactionRetentionDuration = %s, and the log's older commits are cleaned up): starting at "+
		"kafka.start_offset could write records again. Nothing of the partition is read. Say where it starts with "+
		"`deltaflow seek --offsets %d:OFFSET` (0 if the partition is new; `deltaflow inspect offsets` shows the KV "+
		"mirror's last known offsets), then restart deltaflow", e.Partition, e.Topic, e.App, e.Retention, e.Partition)
}
