package actors

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/internal/sim"
)

// sumLag is deltaflow_lag_records summed over the partitions.
func sumLag(m *Metrics) float64 {
	var n float64
	for p := range int32(3) {
		n += testutil.ToFloat64(m.Lag.WithLabelValues(topic, partitionLabel(p)))
	}
	return n
}

// TestPausedLagIsMeasured: while the control service has paused reading,
// deltaflow_paused is 1 and deltaflow_lag_records follows what is produced
// meanwhile instead of freezing (no records are read to measure it by), so
// a pause cannot hide a growing backlog.
func TestPausedLagIsMeasured(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(300, 0, 21)
	r := h.start(Config{FlushInterval: 50 * time.Millisecond}, nil)
	defer r.stop(t)
	m := r.engine.deps.Metrics
	h.waitCommitted(r, 30*time.Second)
	if err := r.engine.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.Paused); got != 1 {
		t.Errorf("deltaflow_paused = %v while paused, want 1", got)
	}
	h.produce(600, 0, 22)
	deadline := time.Now().Add(15 * time.Second)
	for sumLag(m) != 600 {
		if time.Now().After(deadline) {
			t.Fatalf("deltaflow_lag_records sums to %v while paused with 600 records produced meanwhile", sumLag(m))
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.engine.Resume()
	if got := testutil.ToFloat64(m.Paused); got != 0 {
		t.Errorf("deltaflow_paused = %v after resume, want 0", got)
	}
	h.waitCommitted(r, 30*time.Second)
}

// TestFutureEventTimesLeftOutOfFreshness: one device with its clock a year
// ahead must not make the freshness negative for good: the files whose
// newest event time lies in the future are counted, and the freshness
// comes from the others.
func TestFutureEventTimesLeftOutOfFreshness(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(200, 0, 31)
	p, err := kafka.NewProducer(h.kcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ahead := sim.New(sim.Config{Seed: 32, Events: 20, Start: time.Now().AddDate(1, 0, 0)})
	for range 20 {
		key, value, _ := ahead.Next(nil)
		p.ProduceAsync(t.Context(), &kgo.Record{Topic: topic, Key: slices.Clone(key), Value: slices.Clone(value)})
	}
	if err := p.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	p.Close()
	h.records += 20
	r := h.start(Config{}, nil)
	defer r.stop(t)
	h.waitCommitted(r, 30*time.Second)
	m := r.metrics()
	// The metrics follow the commit on the committer's actor, after the
	// log shows it: a loaded machine reads them between the two.
	deadline := time.Now().Add(10 * time.Second)
	for (m.eventFreshness() <= 0 || testutil.ToFloat64(m.FutureEvents) < 1) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if f := m.eventFreshness(); f <= 0 {
		t.Errorf("deltaflow_event_freshness_seconds = %v with events a year ahead committed; want the others' freshness (> 0)", f)
	}
	if newest := testutil.ToFloat64(m.NewestEvent); newest > float64(time.Now().Unix()) {
		t.Errorf("deltaflow_newest_event_timestamp_seconds = %v, in the future", newest)
	}
	if n := testutil.ToFloat64(m.FutureEvents); n < 1 {
		t.Errorf("deltaflow_future_event_files_total = %v, want the files of the events ahead counted", n)
	}
}
