package actors

import (
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/ledger"
)

// TestIdlePartitionTxnRefreshed: on a table with
// delta.setTransactionRetentionDuration, a partition that receives nothing
// for longer than the retention keeps its committed offset: the committer
// re-commits its txn (same version, new lastUpdated) with the epochs of the
// busy partition, and alone once every partition is idle. Before, the idle
// partition's txn expired, and a restart read it again from the start.
func TestIdlePartitionTxnRefreshed(t *testing.T) {
	const retention = 4 * time.Second
	h := newHarness(t, nil)
	h.setProperty("delta.setTransactionRetentionDuration", retention.String())
	r := h.start(Config{FlushInterval: 100 * time.Millisecond}, nil)
	defer r.stop(t)
	txns := func() map[string]int64 {
		s, err := h.table.Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return s.LiveTxns(time.Now()) // what other engines see
	}
	p0, p1 := ledger.AppID("deltaflow", topic, 0), ledger.AppID("deltaflow", topic, 1)
	h.produceTo(0, 10, 1)
	h.produceTo(1, 10, 2)
	waitFor(t, func() bool { got := txns(); return got[p0] == 9 && got[p1] == 9 })

	// Partition 0 stays busy for a retention while partition 1 idles...
	for i := range 8 {
		h.produceTo(0, 1, int64(10+i))
		time.Sleep(retention / 8)
	}
	// ...then both idle for another.
	time.Sleep(retention + time.Second)
	got := txns()
	if got[p0] != 17 || got[p1] != 9 {
		t.Fatalf("after idling past the retention the table holds txns %v, want %s=17 and %s=9", got, p0, p1)
	}
}
