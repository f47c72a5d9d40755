package actors

import (
	"context"
	"time"
)

// Backoff is a capped exponential backoff: Initial, doubling up to Max.
// (protoactor's "exponential" strategy is linear and uncapped.)
type Backoff struct {
	Initial time.Duration
	Max     time.Duration
}

// Delay is the wait before retry number n (0-based).
func (b Backoff) Delay(n int) time.Duration {
	d := b.Initial
	for i := 0; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// retry runs op until it succeeds, ctx ends, or maxElapsed has passed; it
// calls onRetry (if set) before each wait and returns op's last error.
// Transient storage and NATS errors are handled this way inside actors, so
// only exhausted retries reach a supervisor.
func retry(ctx context.Context, b Backoff, maxElapsed time.Duration, op func() error, onRetry func(attempt int, err error)) error {
	start := time.Now()
	for attempt := 0; ; attempt++ {
		err := op()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Since(start) >= maxElapsed {
			return err
		}
		if onRetry != nil {
			onRetry(attempt, err)
		}
		t := time.NewTimer(b.Delay(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
