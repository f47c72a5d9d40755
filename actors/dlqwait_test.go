package actors

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/deltaflow/deltaflow/messages"
	"github.com/deltaflow/deltaflow/storage"
)

// unreachableDLQ is an outbox whose DLQ acknowledges nothing until a
// moment: a NATS outage, as the committer sees it.
type unreachableDLQ struct {
	Outbox
	until time.Time
}

func (o unreachableDLQ) PublishDLQ(ctx context.Context, letters []messages.DeadLetter) error {
	if time.Now().Before(o.until) {
		return errors.New("dlq unreachable")
	}
	return o.Outbox.PublishDLQ(ctx, letters)
}

// TestDLQWaitIsBounded: while the DLQ acknowledges nothing, an epoch with
// bad records does not commit; it waits at most MaxRetry, is then dropped
// and re-read, and once the DLQ answers every record is in the table or
// the DLQ exactly once.
func TestDLQWaitIsBounded(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(5_000, 0.1, 7)
	outage := 3 * time.Second
	h.outbox = unreachableDLQ{Outbox: NewOutbox(h.bridge), until: time.Now().Add(outage)}
	r := h.start(Config{MaxRetry: 300 * time.Millisecond}, nil)
	m := r.metrics()
	time.Sleep(outage - time.Second)
	if s, err := h.table.Snapshot(t.Context()); err != nil || s.NumFiles() != 0 {
		t.Fatalf("committed data while the DLQ was unreachable: %v, %v", s, err)
	}
	h.waitCommitted(r, 30*time.Second)
	r.stop(t)
	h.checkExactlyOnce()
	if n := value(t, m.Restarts.WithLabelValues("pipeline")); n == 0 {
		t.Error("the waiting epoch was never given up (no pipeline restart)")
	}
	if n := value(t, m.DLQWaiting); n != 0 {
		t.Errorf("deltaflow_dlq_waiting_letters = %v after the DLQ came back", n)
	}
	if n := m.DeadLetterCount(); n == 0 {
		t.Error("no dead letters counted")
	}
}

// value reads a counter or gauge.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// TestStopDuringDLQWait: an epoch waits for the DLQ (down for longer than
// the test) under the default ten-minute retry limit; Stop still ends the
// engine within its context, since the committer's actor does not sit in
// the retries (they run off it), and nothing is lost: the next run commits
// every record once the DLQ answers.
func TestStopDuringDLQWait(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(2_000, 0.1, 7)
	h.outbox = unreachableDLQ{Outbox: NewOutbox(h.bridge), until: time.Now().Add(time.Hour)}
	r := h.start(Config{MaxRetry: 10 * time.Minute}, nil)
	m := r.metrics()
	for deadline := time.Now().Add(30 * time.Second); value(t, m.DLQWaiting) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no epoch waited for the DLQ within 30s")
		}
	}
	if err := stopPromptly(t, r, "in the DLQ retries"); err == nil {
		t.Error("Stop reported its final commit done while the DLQ was down")
	}
	if s, err := h.table.Snapshot(t.Context()); err != nil || s.NumFiles() != 0 {
		t.Fatalf("committed data while the DLQ was unreachable: %v, %v", s, err)
	}
	h.outbox = nil
	r = h.start(Config{}, nil)
	h.waitCommitted(r, 30*time.Second)
	r.stop(t)
	h.checkExactlyOnce()
}

// TestStopWhileTheTableLoads: the table's store is down as the engine
// starts, and the committer retries loading it under the default ten-minute
// retry limit; Stop still ends the engine within its context, since the
// load runs off the committer's actor (issue 26: it sat in Receive, and a
// stop or restart waited the retries out). Once the store answers, the
// next run commits every record once.
func TestStopWhileTheTableLoads(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(500, 0, 8)
	faulty := storage.NewFaulty(h.store)
	var lists atomic.Int32
	faulty.Before(func(op storage.Op, _ string) error {
		if op == storage.OpList {
			lists.Add(1)
		}
		return nil
	})
	faulty.Fail(storage.Rule{Op: storage.OpList})
	r := h.start(Config{MaxRetry: 10 * time.Minute}, faulty)
	for deadline := time.Now().Add(30 * time.Second); lists.Load() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the table load never met the failing store within 30s")
		}
	}
	stopPromptly(t, r, "loading the table")
	r = h.start(Config{}, nil)
	h.waitCommitted(r, 30*time.Second)
	r.stop(t)
	h.checkExactlyOnce()
}

// stopPromptly stops r's engine with 2 s for its final commit and fails the
// test unless it has stopped, committer included, within 30 s (where
// names what the committer would be stuck in); it returns Stop's error and
// shuts the actor system down.
func stopPromptly(t *testing.T, r *running, where string) error {
	t.Helper()
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		stopped <- r.engine.Stop(ctx)
	}()
	var err error
	select {
	case err = <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatalf("Stop still waits after 30s: the committer is stuck %s", where)
	}
	if _, alive := r.engine.system.ProcessRegistry.GetLocal(committerName(testTable)); alive {
		t.Fatalf("the committer still runs after Stop: stuck %s", where)
	}
	r.engine.system.Shutdown()
	return err
}
