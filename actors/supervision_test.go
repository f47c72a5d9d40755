package actors

import (
	"testing"
	"time"
)

// TestFailureStreak: restarts back off exponentially up to the cap, and
// a minute without failure starts the streak over.
func TestFailureStreak(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 4 * time.Second}
	t0 := time.Date(2026, 6, 22, 9, 0, 0, 0, time.UTC)
	var s failureStreak
	for i, tc := range []struct {
		at    time.Duration // since t0
		delay time.Duration
		n     int
	}{
		{0, time.Second, 1},
		{10 * time.Second, 2 * time.Second, 2},
		{20 * time.Second, 4 * time.Second, 3},
		{30 * time.Second, 4 * time.Second, 4}, // capped
		{90 * time.Second, 4 * time.Second, 5}, // a minute exactly: still the streak
		{151 * time.Second, time.Second, 1},    // over a minute without failure: a new streak
		{152 * time.Second, 2 * time.Second, 2},
	} {
		delay, n := s.fail(t0.Add(tc.at), b)
		if delay != tc.delay || n != tc.n {
			t.Errorf("failure %d at +%s: delay %s, streak %d; want %s, %d", i, tc.at, delay, n, tc.delay, tc.n)
		}
	}
}
