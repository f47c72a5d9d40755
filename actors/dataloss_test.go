package actors

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
)

// lossEvents is an Outbox that records the data_loss events.
type lossEvents struct {
	Outbox
	mu     sync.Mutex
	events []bridge.DataLossEvent
}

func (o *lossEvents) Publish(ev bridge.Event) {
	if e, ok := ev.(*bridge.DataLossEvent); ok {
		o.mu.Lock()
		o.events = append(o.events, *e)
		o.mu.Unlock()
	}
	o.Outbox.Publish(ev)
}

func (o *lossEvents) get() []bridge.DataLossEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]bridge.DataLossEvent(nil), o.events...)
}

// admin returns an admin client of the harness's cluster.
func (h *harness) admin() *kadm.Client {
	h.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.kcfg.Brokers...))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// deleteRecords moves partition p's log start to offset at, as retention or
// kafka-delete-records.sh does.
func (h *harness) deleteRecords(p int32, at int64) {
	h.t.Helper()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: p, At: at})
	res, err := h.admin().DeleteRecords(h.t.Context(), os)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		h.t.Fatalf("delete records of %d below %d: %v", p, at, err)
	}
}

// recreateTopic deletes the topic and creates it again, empty, with three
// partitions and a new topic ID.
func (h *harness) recreateTopic() {
	h.t.Helper()
	adm := h.admin()
	if _, err := adm.DeleteTopics(h.t.Context(), topic); err != nil {
		h.t.Fatal(err)
	}
	waitFor(h.t, func() bool {
		res, err := adm.CreateTopics(h.t.Context(), 3, 1, nil, topic)
		return err == nil && res.Error() == nil
	})
}

// seekTable writes the table's next offset of partition p, as if records
// before it were committed.
func (h *harness) seekTable(p int32, next int64) {
	h.t.Helper()
	s, err := h.table.Snapshot(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := ledger.Write(h.t.Context(), h.table, s, "deltaflow", topic, map[int32]int64{p: next}, "", delta.Operation{Name: "SEEK"}); err != nil {
		h.t.Fatal(err)
	}
}

// tableState returns the table's next offset per partition and its rows.
func (h *harness) tableState() (map[int32]int64, int64, *delta.Snapshot) {
	h.t.Helper()
	s, err := h.table.Snapshot(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	next := map[int32]int64{}
	for p, v := range ledger.Last(s, "deltaflow", topic) {
		next[p] = v + 1
	}
	return next, statsRows(h.t, s), s
}

// history returns the table's commits after version from, oldest first.
func (h *harness) history(from int64) []delta.HistoryEntry {
	h.t.Helper()
	all, err := h.table.History(h.t.Context(), 0)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []delta.HistoryEntry
	for _, e := range slices.Backward(all) {
		if e.Version > from {
			out = append(out, e)
		}
	}
	return out
}

// TestRetentionLossHeld: the table's offset of partition 0 is 30, retention
// deleted offsets below 45. With on_data_loss fail (the default) partition 0
// is not read — no row of it committed, nothing skipped — the engine is
// unhealthy naming the partition, the offsets and the count, an event and
// the metrics say so, and the stall watchdog does not count its records;
// the other partitions go on.
func TestRetentionLossHeld(t *testing.T) {
	h := newHarness(t, nil)
	h.produceTo(0, 60, 1)
	h.produceTo(1, 20, 2)
	h.seekTable(0, 30)
	h.deleteRecords(0, 45)
	events := &lossEvents{Outbox: NewOutbox(h.bridge)}
	h.outbox = events
	r := h.start(Config{}, nil)
	defer r.stop(t)
	waitFor(t, func() bool { next, _, _ := h.tableState(); return next[1] == 20 })
	time.Sleep(time.Second) // epochs go on: none may hold a row of partition 0
	next, rows, _ := h.tableState()
	if next[0] != 30 || rows != 20 {
		t.Fatalf("table at %v with %d rows; want partition 0 still at 30 and only partition 1's 20 rows", next, rows)
	}
	health := r.engine.deps.Health.Unhealthy()
	if why := health[partKey(0)]; !strings.Contains(why, "offsets 30-44 (15 records)") ||
		!strings.Contains(why, "kafka.on_data_loss: skip") {
		t.Errorf("unhealthy %v; want partition 0 named with offsets 30-44, 15 records and what to do", health)
	}
	evs := events.get()
	if len(evs) != 1 || evs[0].Partition != 0 || evs[0].Action != "held" || evs[0].Cause != ledger.LossRetention ||
		evs[0].Records != 15 || evs[0].Next != 30 || evs[0].LogStart != 45 {
		t.Errorf("data_loss events %+v; want one: partition 0 held, retention, 15 records from 30, log start 45", evs)
	}
	m := r.metrics()
	if v := value(t, m.Held.WithLabelValues(topic, "0")); v != 1 {
		t.Errorf("deltaflow_partition_held{partition=0} = %v, want 1", v)
	}
	if v := value(t, m.DataLoss.WithLabelValues(topic, "0", ledger.LossRetention, "held")); v != 1 {
		t.Errorf("deltaflow_data_loss_total = %v, want 1", v)
	}
	if p := r.engine.Progress(t.Context()); p.Uncommitted != 0 {
		t.Errorf("uncommitted %d for the watchdog; a held partition's records wait on purpose", p.Uncommitted)
	}
	// `run --until-latest` fails in the hold's own words.
	err := r.engine.CatchUp(t.Context())
	if !errors.Is(err, ErrCannotCatchUp) || !strings.Contains(err.Error(), partKey(0)+": "+health[partKey(0)]) {
		t.Errorf("CatchUp = %v; want %v naming partition 0's hold", err, ErrCannotCatchUp)
	}
}

// TestRetentionLossSkipped: the same loss with on_data_loss skip resumes
// partition 0 at the log start, committing first a DATA_LOSS entry that
// says what was lost, so the 15 records that remain are read once.
func TestRetentionLossSkipped(t *testing.T) {
	h := newHarness(t, nil)
	h.produceTo(0, 60, 1)
	h.seekTable(0, 30)
	h.deleteRecords(0, 45)
	_, _, before := h.tableState()
	events := &lossEvents{Outbox: NewOutbox(h.bridge)}
	h.outbox = events
	r := h.start(Config{OnDataLoss: ledger.OnDataLossSkip}, nil)
	waitFor(t, func() bool { next, _, _ := h.tableState(); return next[0] == 60 })
	r.stop(t)
	next, rows, _ := h.tableState()
	if rows != 15 {
		t.Fatalf("table at %v holds %d rows; want the 15 records 45-59", next, rows)
	}
	ops := h.history(before.Version())
	if len(ops) == 0 || ops[0].Operation != "DATA_LOSS" {
		t.Fatalf("history after the seek %v; want a DATA_LOSS commit first", ops)
	}
	var lost []ledger.LossParameter
	if err := json.Unmarshal([]byte(ops[0].OperationParameters["partitions"].(string)), &lost); err != nil {
		t.Fatal(err)
	}
	if len(lost) != 1 || lost[0] != (ledger.LossParameter{Partition: 0, Cause: ledger.LossRetention, NextOffset: 30, LogStart: 45, LogEnd: 60, Records: 15, ResumeAt: 45}) {
		t.Errorf("DATA_LOSS parameters %v; want partition 0, 15 records from 30, resumed at 45", ops[0].OperationParameters)
	}
	if evs := events.get(); len(evs) != 1 || evs[0].Action != "skipped" || evs[0].ResumeAt != 45 {
		t.Errorf("data_loss events %+v; want one, skipped, resuming at 45", evs)
	}
	if v := value(t, r.metrics().DataLossRecords.WithLabelValues(topic, "0")); v != 15 {
		t.Errorf("deltaflow_data_loss_records_total = %v, want 15", v)
	}
	if u := r.engine.deps.Health.Unhealthy(); len(u) != 0 {
		t.Errorf("unhealthy %v after a skipped loss", u)
	}
}

// TestRecreatedTopic: deltaflow read 30 records of partition 0, then the
// topic was deleted and created again, and 60 new records arrived. The
// table's offsets count in the old topic (its ID is recorded in the
// table): with fail every partition is held; with skip every partition
// starts over at the new topic's log start, so all 60 new records are read
// (today offsets 0-29 of the new topic were never read).
func TestRecreatedTopic(t *testing.T) {
	for _, policy := range []string{ledger.OnDataLossFail, ledger.OnDataLossSkip} {
		t.Run(policy, func(t *testing.T) {
			h := newHarness(t, nil)
			h.produceTo(0, 30, 1)
			r := h.start(Config{}, nil)
			waitFor(t, func() bool { next, _, _ := h.tableState(); return next[0] == 30 })
			r.stop(t)
			_, _, s := h.tableState()
			oldID := s.Metadata().Configuration[ledger.TopicIDProperty("deltaflow", topic)]
			if oldID == "" {
				t.Fatal("the topic's ID is not recorded in the table")
			}
			h.recreateTopic()
			h.produceTo(0, 60, 2)
			events := &lossEvents{Outbox: NewOutbox(h.bridge)}
			h.outbox = events
			r = h.start(Config{OnDataLoss: policy}, nil)
			defer r.stop(t)
			if policy == ledger.OnDataLossFail {
				waitFor(t, func() bool { return len(r.engine.deps.Health.Unhealthy()) == 3 })
				time.Sleep(time.Second)
				if next, rows, _ := h.tableState(); next[0] != 30 || rows != 30 {
					t.Fatalf("table at %v with %d rows; want nothing of the new topic", next, rows)
				}
				why := r.engine.deps.Health.Unhealthy()[partKey(0)]
				if !strings.Contains(why, "deleted and created again") || !strings.Contains(why, oldID) {
					t.Errorf("unhealthy: %q; want the recreation and the old topic ID named", why)
				}
				return
			}
			waitFor(t, func() bool { next, _, _ := h.tableState(); return next[0] == 60 })
			next, rows, s := h.tableState()
			if rows != 30+60 {
				t.Fatalf("table at %v with %d rows; want the 30 old and all 60 new records", next, rows)
			}
			if newID := s.Metadata().Configuration[ledger.TopicIDProperty("deltaflow", topic)]; newID == oldID || newID == "" {
				t.Errorf("recorded topic ID %q after the skip; want the new topic's, not %q", newID, oldID)
			}
			if evs := events.get(); len(evs) != 3 || evs[0].Cause != ledger.LossRecreated || evs[0].Records != -1 {
				t.Errorf("data_loss events %+v; want one per partition, recreated, count unknown", evs)
			}
		})
	}
}

// TestStartLatestIsDurable: with start_offset latest the resolved start is
// committed before reading, so records produced while deltaflow is down
// before its first commit are read after the restart, not skipped by a
// newer "latest".
func TestStartLatestIsDurable(t *testing.T) {
	h := newHarness(t, nil)
	h.produceTo(0, 10, 1)
	r := h.start(Config{StartOffset: ledger.StartLatest}, nil)
	waitFor(t, func() bool { next, _, _ := h.tableState(); return next[0] == 10 })
	r.stop(t)
	h.produceTo(0, 5, 2)
	r = h.start(Config{StartOffset: ledger.StartLatest}, nil)
	defer r.stop(t)
	waitFor(t, func() bool { next, _, _ := h.tableState(); return next[0] == 15 })
	if _, rows, _ := h.tableState(); rows != 5 {
		t.Fatalf("%d rows; want the 5 records produced after the start was recorded", rows)
	}
}

// TestOutOfRangeWhileReading: retention overtakes a paused deltaflow; when
// it resumes, the fetch finds its offset out of the log. What it had read is
// committed, the partition is held (fail) — never reset silently to the log
// start — or (skip) resumes there after a DATA_LOSS commit naming exactly
// the records never read.
func TestOutOfRangeWhileReading(t *testing.T) {
	for _, policy := range []string{ledger.OnDataLossFail, ledger.OnDataLossSkip} {
		t.Run(policy, func(t *testing.T) {
			h := newHarness(t, nil)
			h.produceTo(0, 30, 1)
			r := h.start(Config{OnDataLoss: policy, FlushInterval: 100 * time.Millisecond}, nil)
			defer r.stop(t)
			waitFor(t, func() bool { next, _, _ := h.tableState(); return next[0] == 30 })
			if err := r.engine.Pause(t.Context()); err != nil {
				t.Fatal(err)
			}
			h.produceTo(0, 30, 2)
			h.deleteRecords(0, 45)
			r.engine.Resume()
			if policy == ledger.OnDataLossFail {
				waitFor(t, func() bool { return len(r.engine.deps.Health.Unhealthy()) == 1 })
				time.Sleep(time.Second)
				if next, rows, _ := h.tableState(); next[0] != 30 || rows != 30 {
					t.Fatalf("table at %v with %d rows; want partition 0 held at 30", next, rows)
				}
				return
			}
			waitFor(t, func() bool { next, _, _ := h.tableState(); return next[0] == 60 })
			if _, rows, _ := h.tableState(); rows != 30+15 {
				t.Fatalf("%d rows; want the 30 read before and the 15 left after the loss", rows)
			}
			var lost []ledger.LossParameter
			for _, e := range h.history(0) {
				if e.Operation == "DATA_LOSS" {
					if err := json.Unmarshal([]byte(e.OperationParameters["partitions"].(string)), &lost); err != nil {
						t.Fatal(err)
					}
				}
			}
			if len(lost) != 1 || lost[0].Records != 15 || lost[0].NextOffset != 30 {
				t.Errorf("DATA_LOSS entries %v; want one: the 15 records from offset 30", lost)
			}
		})
	}
}

// TestTopicRecreatedWhileRunning: the topic is deleted and created again
// under a running engine. franz-go keeps fetching the old topic ID, so the
// engine records what on_data_loss says (skip: every partition restarts at
// the new topic's start) and reports ErrTopicRecreated on Fatal, for the
// daemon to exit and its restart to read the new topic with a new client.
func TestTopicRecreatedWhileRunning(t *testing.T) {
	h := newHarness(t, nil)
	h.produceTo(0, 30, 1)
	r := h.start(Config{OnDataLoss: ledger.OnDataLossSkip}, nil)
	defer r.stop(t)
	waitFor(t, func() bool { next, _, _ := h.tableState(); return next[0] == 30 })
	_, _, before := h.tableState()
	h.recreateTopic()
	h.produceTo(0, 10, 2)
	select {
	case err := <-r.engine.Fatal():
		if !errors.Is(err, ErrTopicRecreated) {
			t.Fatalf("fatal %v, want ErrTopicRecreated", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no fatal error within 30s of the topic's recreation")
	}
	next, _, s := h.tableState()
	if next[0] != 0 || s.Metadata().Configuration[ledger.TopicIDProperty("deltaflow", topic)] == before.Metadata().Configuration[ledger.TopicIDProperty("deltaflow", topic)] {
		t.Errorf("table at %v under topic ID %q; want every partition at the new topic's start, under its ID", next,
			s.Metadata().Configuration[ledger.TopicIDProperty("deltaflow", topic)])
	}
}
