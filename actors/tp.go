package actors

import (
	"maps"
	"slices"

	"github.com/deltaflow/deltaflow/ledger"
)

// tp is a Kafka topic partition: what readers, epochs and offsets are keyed
// by, since a table may read several topics.
type tp = ledger.TP

// sortedTPs returns m's keys in topic, then partition order.
func sortedTPs[V any](m map[tp]V) []tp { return slices.SortedFunc(maps.Keys(m), ledger.CompareTP) }
