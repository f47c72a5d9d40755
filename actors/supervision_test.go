package actors

import (
	"testing"
	"time"
)

// TestRestartStreak: restarts back off exponentially up to the cap, and a
// minute without failure starts the streak over.
func TestRestartStreak(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: 300 * time.Millisecond}
	var s restartStreak
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond} {
		n, delay := s.fail(b)
		if n != i+1 || delay != want {
			t.Fatalf("failure %d: streak %d, delay %s; want %d, %s", i+1, n, delay, i+1, want)
		}
	}
	s.last = time.Now().Add(-2 * time.Minute)
	if n, delay := s.fail(b); n != 1 || delay != b.Initial {
		t.Fatalf("after a quiet minute: streak %d, delay %s; want 1, %s", n, delay, b.Initial)
	}
}
