package actors

import (
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/storage"
)

// TestAnotherAppsOffsetsHoldThePartition: deltaflow ingested the topic
// under app "deltaflow", then the configuration's table.app_id became
// "renamed". The table holds the old app's offsets of every partition and
// none of the new one's: starting at kafka.start_offset would read the
// topic again (before: 40 + 10 records committed twice). Every partition
// is held, naming the other app, its offset and the ways forward; once
// the new app adopts the old one's offsets (seek --from-app), it reads
// only what came after.
func TestAnotherAppsOffsetsHoldThePartition(t *testing.T) {
	h := newHarness(t, nil)
	h.produceTo(0, 40, 1)
	h.produceTo(1, 10, 2)
	r := h.start(Config{}, nil)
	waitFor(t, func() bool { next, _, _ := h.tableState(); return next[0] == 40 && next[1] == 10 })
	r.stop(t)
	h.produceTo(0, 5, 3)

	r = h.start(Config{App: "renamed"}, nil)
	waitFor(t, func() bool { return len(r.engine.deps.Health.Unhealthy()) == 3 })
	time.Sleep(time.Second) // epochs go on: none may hold a row
	_, rows, s := h.tableState()
	if rows != 50 {
		t.Fatalf("the table holds %d rows under the new app_id; want the 50 committed once, nothing read again", rows)
	}
	if got := ledger.Last(s, "renamed", topic); len(got) != 0 {
		t.Errorf("the new app committed offsets %v; want none while held", got)
	}
	why := r.engine.deps.Health.Unhealthy()[partKey(0)]
	for _, want := range []string{`"deltaflow"`, "next offset 40", "seek --from-app deltaflow", "seek --offsets"} {
		if !strings.Contains(why, want) {
			t.Errorf("unhealthy: %q; want it to name %s", why, want)
		}
	}
	if refused := strings.Join(r.engine.deps.Health.Refusals(), "; "); !strings.Contains(refused, `"deltaflow"`) {
		t.Errorf("refusals %q, what catch-up fails with; want the other app named", refused)
	}
	r.stop(t)

	// The way forward: adopt the other app's offsets.
	s, err := h.table.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	adopt := ledger.Adopt(s, "deltaflow", topic)
	if _, err := ledger.Write(t.Context(), h.table, s, "renamed", topic, adopt, "", delta.Operation{Name: "SEEK"}); err != nil {
		t.Fatal(err)
	}
	r = h.start(Config{App: "renamed"}, nil)
	defer r.stop(t)
	waitFor(t, func() bool { _, _, s := h.tableState(); return ledger.Next(s, "renamed", topic, []int32{0})[0] == 45 })
	if _, rows, _ := h.tableState(); rows != 55 {
		t.Fatalf("after adopting the offsets the table holds %d rows; want 55 (the 5 new records once)", rows)
	}
	if u := r.engine.deps.Health.Unhealthy(); len(u) != 0 {
		t.Errorf("unhealthy %v after adopting the offsets", u)
	}
}

// TestExpiredOffsetsAreNotForgotten: the table sets
// delta.setTransactionRetentionDuration and deltaflow was stopped for
// longer than it. Spark and delta-kernel treat its txns as expired; had
// deltaflow too, it would start every partition at kafka.start_offset and
// read the topic again (before: 50 + 20 records, 50 committed twice).
// Its own offsets never expire for deltaflow: it resumes where it stopped,
// also when another engine's checkpoint (delta-rs's, here) left the
// expired txns out (they are found in the commits before it), and its
// first epoch refreshes them for other readers.
func TestExpiredOffsetsAreNotForgotten(t *testing.T) {
	for _, name := range []string{"stopped", "stopped and checkpointed by delta-rs"} {
		t.Run(name, func(t *testing.T) {
			const retention = 3 * time.Second
			h := newHarness(t, nil)
			h.setProperty("delta.setTransactionRetentionDuration", "interval 3 seconds") // as Spark writes it; delta-rs reads no other form
			h.produceTo(0, 50, 1)
			r := h.start(Config{FlushInterval: 200 * time.Millisecond}, nil)
			waitFor(t, func() bool { next, _, _ := h.tableState(); return next[0] == 50 })
			r.stop(t)
			time.Sleep(retention + time.Second)
			if _, _, s := h.tableState(); len(s.LiveTxns(time.Now())) != 0 {
				t.Fatalf("txns %v are not expired for other readers after the retention", s.LiveTxns(time.Now()))
			}
			if name != "stopped" {
				testenv.DeltaRS(t, nil, "checkpoint", h.store.(*storage.Local).Root())
				if _, _, s := h.tableState(); len(s.Txns()) != 0 {
					t.Fatalf("delta-rs's checkpoint kept the expired txns %v; the case needs them dropped", s.Txns())
				}
			}

			h.produceTo(0, 20, 2)
			r = h.start(Config{FlushInterval: 200 * time.Millisecond}, nil)
			defer r.stop(t)
			waitFor(t, func() bool { next, _, _ := h.tableState(); return next[0] == 70 })
			if _, rows, _ := h.tableState(); rows != 70 {
				t.Fatalf("the table holds %d rows; want 70 (nothing read twice after the offsets expired)", rows)
			}
			waitFor(t, func() bool {
				_, _, s := h.tableState()
				live := s.LiveTxns(time.Now())
				return live[ledger.AppID("deltaflow", topic, 0)] == 69 && live[ledger.AppID("deltaflow", topic, 1)] == -1
			})
		})
	}
}

// setProperty commits one table property.
func (h *harness) setProperty(key, value string) {
	h.t.Helper()
	s, err := h.table.Snapshot(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.table.Commit(h.t.Context(), s, []delta.Action{{MetaData: s.Metadata().WithProperty(key, value)}}, delta.Operation{Name: "SET TBLPROPERTIES"}); err != nil {
		h.t.Fatal(err)
	}
}
