package actors

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/deltaflow/deltaflow/delta"
)

// TxnAppID is the Delta txn appId under which deltaflow records the last
// committed offset of one Kafka partition: "<app>-<topic>-<partition>".
func TxnAppID(app, topic string, partition int32) string {
	return fmt.Sprintf("%s-%s-%d", app, topic, partition)
}

// ParseTxnAppID is the inverse of TxnAppID for one app and topic: the
// partition an appId records, and false for an appId of another app or
// topic (or not deltaflow's at all).
func ParseTxnAppID(appID, app, topic string) (int32, bool) {
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

// TableOffsets returns the last committed offset (txn version) of every
// partition of the topic the table records for app.
func TableOffsets(s *delta.Snapshot, app, topic string) map[int32]int64 {
	out := map[int32]int64{}
	for id, v := range s.Txns() {
		if p, ok := ParseTxnAppID(id, app, topic); ok {
			out[p] = v
		}
	}
	return out
}

// CommittedOffsets returns, for each partition, the next offset to read
// according to the table: the txn version (the last offset committed) + 1,
// or -1 when the table holds nothing of the partition.
func CommittedOffsets(s *delta.Snapshot, app, topic string, partitions []int32) map[int32]int64 {
	out := make(map[int32]int64, len(partitions))
	for _, p := range partitions {
		out[p] = -1
		if v, ok := s.TxnVersion(TxnAppID(app, topic, p)); ok {
			out[p] = v + 1
		}
	}
	return out
}

// SetOffsets writes, in one Delta commit, a txn action for every partition
// of next so that deltaflow resumes partition p at offset next[p] (txn
// version next[p]-1): how takeover, seek, the configured start positions and
// the engine's own start and data-loss decisions tell the engine where to
// start, the Delta log staying the only authority. A non-empty topicID is
// recorded as the topic ID the offsets count in (TopicIDProperty), when the
// table records another. op names the commit in the table's history. s
// advances to the new version, which is returned.
func SetOffsets(ctx context.Context, tbl *delta.Table, s *delta.Snapshot, app, topic string, next map[int32]int64, topicID string, op delta.Operation) (int64, error) {
	key := TopicIDProperty(app, topic)
	setID := topicID != "" && s.Metadata().Configuration[key] != topicID
	if len(next) == 0 && !setID {
		return 0, fmt.Errorf("set offsets of %s: no partitions", topic)
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
		actions = append(actions, delta.Action{Txn: &delta.Txn{AppID: TxnAppID(app, topic, p), Version: next[p] - 1, LastUpdated: &now}})
	}
	v, err := tbl.Commit(ctx, s, actions, op)
	if err != nil {
		return 0, fmt.Errorf("set offsets of %s: %w", topic, err)
	}
	return v, nil
}
