package actors

import (
	"testing"
	"time"
)

// Storage and DLQ retries wait at most 5 s by default, whatever the
// rebuild backoff: a server that comes back after a long outage is used
// again within seconds (with the 30 s cap, MinIO outage scenarios took
// 23–33 s to commit again).
func TestRetryBackoffDefaults(t *testing.T) {
	var c Config
	c.setDefaults()
	if got := c.RetryBackoff.Delay(100); got != 5*time.Second {
		t.Errorf("default retry delay after many attempts = %s, want 5s", got)
	}
	if got := c.Backoff.Delay(100); got != 30*time.Second {
		t.Errorf("default rebuild delay after many failures = %s, want 30s", got)
	}
	// A faster Backoff (tests) makes retries as fast.
	c = Config{Backoff: Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}}
	c.setDefaults()
	if want := (Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}); c.RetryBackoff != want {
		t.Errorf("RetryBackoff = %+v, want %+v", c.RetryBackoff, want)
	}
}
