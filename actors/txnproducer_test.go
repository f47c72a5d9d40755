package actors

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/internal/sim"
)

// produceTxn writes n simulated records to partition p in one transaction
// of a transactional producer, committed or aborted.
func (h *harness) produceTxn(p int32, n int, seed int64, commit bool) {
	h.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.kcfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("sensor-bridge"), kgo.TransactionTimeout(10*time.Second))
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	ctx := h.t.Context()
	if err := cl.BeginTransaction(); err != nil {
		h.t.Fatal(err)
	}
	s := sim.New(sim.Config{Seed: seed, Events: n})
	for range n {
		key, value, _ := s.Next(nil)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Key: key, Value: value}).FirstErr(); err != nil {
			h.t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		h.t.Fatal(err)
	}
}

// TestTransactionalProducer: a transactional producer's commit and abort
// markers take offsets. With read_committed (the default) the aborted
// records never reach the table, and an idle partition whose last offset is
// a marker counts as caught up: no uncommitted records for the stall
// watchdog, and CatchUp (run --until-latest) returns.
func TestTransactionalProducer(t *testing.T) {
	h := newHarness(t, nil)
	h.produceTxn(0, 10, 1, true)
	h.produceTxn(0, 7, 2, false)
	h.produceTxn(0, 5, 3, true)
	r := h.start(Config{FlushInterval: time.Hour}, nil)
	defer r.stop(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := r.engine.CatchUp(ctx); err != nil {
		t.Fatalf("CatchUp on a transactional topic: %v", err)
	}
	next, rows, _ := h.tableState()
	// 10 + 1 marker + 7 aborted + 1 marker + 5 + 1 marker = 25 offsets.
	if rows != 15 || next[0] != 25 {
		t.Fatalf("table at %v with %d rows; want the 15 committed records and offset 25 (past the last marker)", next, rows)
	}
	if p := r.engine.Progress(t.Context()); p.Uncommitted != 0 {
		t.Errorf("uncommitted %d after catching up; the markers are not records waiting", p.Uncommitted)
	}
}

// TestReadUncommitted: with isolation read_uncommitted the aborted
// transaction's records are read too, as the configuration says.
func TestReadUncommitted(t *testing.T) {
	h := newHarness(t, nil)
	h.kcfg.IsolationLevel = kafka.ReadUncommitted
	h.produceTxn(0, 10, 1, true)
	h.produceTxn(0, 7, 2, false)
	r := h.start(Config{FlushInterval: time.Hour}, nil)
	defer r.stop(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := r.engine.CatchUp(ctx); err != nil {
		t.Fatalf("CatchUp: %v", err)
	}
	if next, rows, _ := h.tableState(); rows != 17 || next[0] != 19 {
		t.Fatalf("table at %v with %d rows; want all 17 records, aborted ones included, and offset 19", next, rows)
	}
}
