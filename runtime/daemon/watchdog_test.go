package daemon

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deltaflow/deltaflow/actors"
	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/ledger"
)

// The stall watchdog's decisions on a fake clock: a stall needs records
// waiting and no commit for stallAfter; it exits after the grace period,
// never during a commit, and never sooner after the recorded exits than
// the capped backoff.
func TestStallWatch(t *testing.T) {
	t0 := time.Date(2026, 6, 22, 9, 0, 0, 0, time.UTC)
	newWatch := func() *stallWatch {
		return &stallWatch{stallAfter: 10 * time.Minute, grace: time.Minute,
			backoff: actors.Backoff{Initial: time.Minute, Max: 30 * time.Minute}}
	}
	noExits := func() []time.Time { return nil }
	waiting := actors.Progress{LastCommit: t0, Uncommitted: 500}
	// watching has seen the records waiting since t0.
	watching := func() *stallWatch {
		w := newWatch()
		w.observe(t0, waiting, noExits)
		return w
	}

	t.Run("idle topic is no stall", func(t *testing.T) {
		w := newWatch()
		if v, _ := w.observe(t0.Add(24*time.Hour), actors.Progress{LastCommit: t0}, noExits); v != healthy {
			t.Fatalf("verdict %d with nothing waiting", v)
		}
		if v, _ := w.observe(t0.Add(24*time.Hour), actors.Progress{LastCommit: t0, Uncommitted: -1}, noExits); v != healthy {
			t.Fatalf("verdict %d with Kafka unreachable", v)
		}
		if v, _ := w.observe(t0.Add(24*time.Hour), actors.Progress{LastCommit: t0, Uncommitted: 500, Paused: true}, noExits); v != healthy {
			t.Fatalf("verdict %d while paused by the control service", v)
		}
	})
	t.Run("stall, grace, exit", func(t *testing.T) {
		w := watching()
		if v, _ := w.observe(t0.Add(9*time.Minute), waiting, noExits); v != healthy {
			t.Fatalf("stalled after 9 of 10 minutes")
		}
		if v, _ := w.observe(t0.Add(10*time.Minute), waiting, noExits); v != stalled || w.reason == "" {
			t.Fatalf("verdict %d, reason %q at 10 minutes; want stalled", v, w.reason)
		}
		if v, _ := w.observe(t0.Add(10*time.Minute+59*time.Second), waiting, noExits); v != stalled {
			t.Fatalf("exit within the grace period")
		}
		if v, _ := w.observe(t0.Add(11*time.Minute), waiting, noExits); v != exitNow {
			t.Fatalf("verdict %d after the grace period; want exit", v)
		}
	})
	t.Run("never during a commit", func(t *testing.T) {
		w := watching()
		w.observe(t0.Add(10*time.Minute), waiting, noExits)
		busy := waiting
		busy.Committing = true
		if v, _ := w.observe(t0.Add(20*time.Minute), busy, noExits); v != stalled {
			t.Fatalf("verdict %d while a commit is in flight; want stalled", v)
		}
		if v, _ := w.observe(t0.Add(21*time.Minute), waiting, noExits); v != exitNow {
			t.Fatalf("verdict %d once the commit is over (still stalled); want exit", v)
		}
	})
	t.Run("a commit ends the stall", func(t *testing.T) {
		w := watching()
		w.observe(t0.Add(10*time.Minute), waiting, noExits)
		moved := waiting
		moved.LastCommit = t0.Add(10*time.Minute + 30*time.Second)
		if v, _ := w.observe(t0.Add(11*time.Minute), moved, noExits); v != healthy || !w.since.IsZero() {
			t.Fatalf("verdict %d, since %v after a commit; want healthy", v, w.since)
		}
		// A new stall gets a new grace period.
		if v, _ := w.observe(t0.Add(21*time.Minute), moved, noExits); v != stalled {
			t.Fatalf("verdict %d at the new stall's start; want stalled", v)
		}
	})
	t.Run("a burst after a long idle is no stall", func(t *testing.T) {
		// Issue 29, item 6: the first records after a day without any
		// wait since they arrived, not since the last commit.
		w := newWatch()
		if v, _ := w.observe(t0.Add(24*time.Hour), actors.Progress{LastCommit: t0}, noExits); v != healthy {
			t.Fatalf("verdict %d idle", v)
		}
		burst := t0.Add(24*time.Hour + 30*time.Second)
		if v, _ := w.observe(burst, waiting, noExits); v != healthy {
			t.Fatalf("verdict %d, reason %q as records arrive after a day idle; want healthy", v, w.reason)
		}
		if v, _ := w.observe(burst.Add(9*time.Minute), waiting, noExits); v != healthy {
			t.Fatalf("verdict %d, reason %q 9 minutes after the burst; want healthy", v, w.reason)
		}
		if v, _ := w.observe(burst.Add(10*time.Minute), waiting, noExits); v != stalled || !strings.Contains(w.reason, "for 10m0s") {
			t.Fatalf("verdict %d, reason %q 10 minutes after the burst; want stalled for 10m0s", v, w.reason)
		}
	})
	t.Run("resumed after a long pause is no stall", func(t *testing.T) {
		w := newWatch()
		paused := waiting
		paused.Paused = true
		w.observe(t0.Add(time.Hour), paused, noExits)
		if v, _ := w.observe(t0.Add(time.Hour+time.Second), waiting, noExits); v != healthy {
			t.Fatalf("verdict %d, reason %q as reading resumes after an hour's pause; want healthy", v, w.reason)
		}
	})
	t.Run("pipeline failing at its cap", func(t *testing.T) {
		w := newWatch()
		failing := actors.Progress{LastCommit: t0.Add(time.Hour), FailingSince: t0}
		if v, _ := w.observe(t0.Add(time.Hour), failing, noExits); v != stalled {
			t.Fatalf("verdict %d failing for an hour; want stalled", v)
		}
	})
	t.Run("restart backoff across exits", func(t *testing.T) {
		now := t0.Add(11 * time.Minute)
		for _, c := range []struct {
			name      string
			exits     []time.Time
			notBefore time.Time // zero: exit now
		}{
			{"first exit", nil, time.Time{}},
			{"one exit long ago", []time.Time{now.Add(-3 * time.Hour)}, time.Time{}},
			{"one recent exit", []time.Time{now.Add(-30 * time.Second)}, now.Add(30 * time.Second)},
			{"three recent exits", []time.Time{now.Add(-20 * time.Minute), now.Add(-10 * time.Minute), now.Add(-time.Minute)},
				now.Add(3 * time.Minute)},
			{"capped", []time.Time{now.Add(-100 * time.Minute), now.Add(-90 * time.Minute), now.Add(-80 * time.Minute),
				now.Add(-70 * time.Minute), now.Add(-60 * time.Minute), now.Add(-50 * time.Minute), now.Add(-40 * time.Minute),
				now.Add(-5 * time.Minute)}, now.Add(25 * time.Minute)},
		} {
			w := watching()
			w.observe(t0.Add(10*time.Minute), waiting, noExits)
			v, notBefore := w.observe(now, waiting, func() []time.Time { return c.exits })
			want := exitNow
			if !c.notBefore.IsZero() {
				want = stalled
			}
			if v != want || (!c.notBefore.IsZero() && !notBefore.Equal(c.notBefore)) {
				t.Errorf("%s: verdict %d, exit not before %v; want %d, %v", c.name, v, notBefore, want, c.notBefore)
			}
		}
	})
}

// staticProgress is an engine whose progress stands still.
type staticProgress actors.Progress

func (p staticProgress) Progress(context.Context) actors.Progress { return actors.Progress(p) }

// /readyz and /healthz tell how long a stall has lasted at each check, not
// how long it had when first seen (issue 29: "for 11s" after 60 s).
func TestWatchdogReportsTheStallsAge(t *testing.T) {
	b, err := bridge.New(t.Context(), bridge.Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir()}, testLogger(), bridge.WithTable("events"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ready := &readiness{health: actors.NewHealth()}
	w := &stallWatch{stallAfter: 10 * time.Millisecond, grace: time.Hour, backoff: actors.Backoff{Initial: time.Minute, Max: time.Hour}}
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	engine := staticProgress{LastCommit: time.Now().Add(-time.Hour), Uncommitted: 500}
	go runWatchdog(ctx, w, 20*time.Millisecond, watchdogDeps{engine: engine, bridge: b, metrics: actors.NewMetrics(nil),
		ready: ready, logger: testLogger(), stop: cancel})

	stall := func() string {
		if s := ready.stalled.Load(); s != nil {
			return *s
		}
		return ""
	}
	deadline := time.Now().Add(10 * time.Second)
	for stall() == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	first := stall()
	if !strings.Contains(first, "500 records wait") {
		t.Fatalf("stall %q; want the 500 records waiting", first)
	}
	time.Sleep(1500 * time.Millisecond) // the age is in whole seconds
	if later := stall(); later == first {
		t.Fatalf("stall still reads %q 1.5 s later; want its age now", later)
	}
}

// Each watchdog check publishes a lag event per table and topic: records
// waiting per partition, their sum, and how long since the table's last
// commit (0 when nothing waits). Before issue 30 nothing published it.
func TestWatchdogPublishesLag(t *testing.T) {
	b, err := bridge.New(t.Context(), bridge.Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir()}, testLogger(),
		bridge.WithTable("plugs"), bridge.WithTable("doors"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	nc, err := nats.Connect(b.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	events := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe("deltaflow.*.events.lag", events)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	engine := staticProgress{LastCommit: now, Lag: []actors.TableLag{
		{Table: "plugs", LastCommit: now.Add(-90 * time.Second), Uncommitted: map[ledger.TP]int64{{Topic: "plugs", Partition: 0}: 5, {Topic: "plugs", Partition: 1}: 7}},
		{Table: "doors", LastCommit: now, Uncommitted: map[ledger.TP]int64{{Topic: "doors", Partition: 0}: 0}},
	}}
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	w := &stallWatch{stallAfter: time.Hour, grace: time.Hour, backoff: actors.Backoff{Initial: time.Minute, Max: time.Hour}}
	go runWatchdog(ctx, w, 20*time.Millisecond, watchdogDeps{engine: engine, bridge: b, metrics: actors.NewMetrics(nil),
		ready: &readiness{health: actors.NewHealth()}, logger: testLogger(), stop: cancel})
	got := map[string]bridge.LagEvent{}
	for len(got) < 2 {
		select {
		case m := <-events:
			var ev bridge.LagEvent
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				t.Fatal(err)
			}
			got[m.Subject] = ev
		case <-time.After(10 * time.Second):
			t.Fatalf("lag events: %v", got)
		}
	}
	plugs, doors := got["deltaflow.plugs.events.lag"], got["deltaflow.doors.events.lag"]
	if plugs.Topic != "plugs" || plugs.Total != 12 || plugs.Partitions[1] != 7 || plugs.Seconds < 90 || plugs.Seconds > 100 {
		t.Errorf("plugs' lag event %+v", plugs)
	}
	if doors.Topic != "doors" || doors.Total != 0 || doors.Seconds != 0 {
		t.Errorf("doors' lag event %+v", doors)
	}
}
