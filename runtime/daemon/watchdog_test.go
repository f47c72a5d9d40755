package daemon

import (
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/actors"
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
		w := newWatch()
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
		w := newWatch()
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
		w := newWatch()
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
			w := newWatch()
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
