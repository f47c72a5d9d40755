package actors

import (
	"fmt"
	"strconv"
	"strings"

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
