package actors

import (
	"fmt"

	"github.com/deltaflow/deltaflow/delta"
)

// TxnAppID is the Delta txn appId under which deltaflow records the last
// committed offset of one Kafka partition: "<app>-<topic>-<partition>".
func TxnAppID(app, topic string, partition int32) string {
	return fmt.Sprintf("%s-%s-%d", app, topic, partition)
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
