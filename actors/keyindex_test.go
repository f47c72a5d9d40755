package actors

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// An upsert table's key index is memory the process holds as it holds
// the buffers', so it is counted in the table's share of the memory
// budget: the buffers get the share less the index's bound, which is at
// most half the share (the buffers keep the other half);
// deltaflow_key_index_bytes shows what the index holds, within it.
func TestKeyIndexInMemoryBudget(t *testing.T) {
	const budget = 16 << 20
	for _, c := range []struct{ index, want int64 }{
		{1 << 20, 1 << 20},
		{12 << 20, budget / 2},
		{0, 0},
	} {
		u := newUpsertRig(t)
		u.table.route.KeyIndexMemory = c.index
		u.changes(500, 5000)
		r := u.start(Config{MemoryBudget: budget})
		waitFor(t, u.caughtUp)
		r.stop(t) // the epochs' files have entered the index once their commits landed
		tbl := r.engine.tables[0]
		held := testutil.ToFloat64(tbl.metrics.KeyIndexBytes)
		if tbl.budget.limit != budget-c.want || tbl.route.KeyIndexMemory != c.want {
			t.Errorf("key_index_memory %d of a %d-byte share: the buffers get %d, the index %d; want %d and %d",
				c.index, budget, tbl.budget.limit, tbl.route.KeyIndexMemory, budget-c.want, c.want)
		}
		if (held > 0) != (c.want > 0) || held > float64(c.want) {
			t.Errorf("key_index_memory %d: deltaflow_key_index_bytes %v, want above 0 and within %d", c.index, held, c.want)
		}
	}
}
