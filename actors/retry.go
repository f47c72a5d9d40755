package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/storage"
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

// Jittered is Delay(n) with equal jitter: a random wait in [Delay/2,
// Delay], so that the writers (and buffers) that failed together against
// one server do not all come back to it at the same instant.
func (b Backoff) Jittered(n int) time.Duration { return equalJitter(b.Delay(n), rand.Int64N) }

// equalJitter returns a wait in [d/2, d]; int64n(k) draws in [0, k).
func equalJitter(d time.Duration, int64n func(int64) int64) time.Duration {
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + time.Duration(int64n(int64(d-half)+1))
}

// retryPolicy bounds the retries of one operation.
type retryPolicy struct {
	backoff    Backoff       // between attempts, jittered
	maxElapsed time.Duration // then the last error is returned
}

// storageRetrying is the retry callback of a storage operation (the
// committer's loads and commits, the buffers' uploads): it counts the retry,
// reports storage degraded on /readyz and logs "<what> failed; retrying"
// with attrs, the attempt and the error. Whoever succeeds next recovers it.
func storageRetrying(m *Metrics, h *Health, logger *slog.Logger, what string, attrs ...any) func(attempt int, err error) {
	return func(attempt int, err error) {
		m.retrying(componentStorage)
		h.Degrade("storage", err.Error())
		logger.Warn(what+" failed; retrying", append(slices.Clip(attrs), "attempt", attempt+1, "err", err)...)
	}
}

// errPermanent is wrapped around an error retry gave up on at once.
var errPermanent = errors.New("permanent failure, not retried")

// retryable is the engine's one retry policy. Transient storage and NATS
// errors are retried inside the actor; so are errors nobody has classified
// (a failure not met before may well pass, and giving up costs an epoch).
// Errors no retry can cure are not: a commit conflict (the caller re-reads
// the table), a table this writer does not support, and what
// bridge.IsPermanent and storage.IsPermanent call permanent (credentials,
// permissions, a missing bucket, a rejected request, a closed bridge;
// bridge.IsTransient wins when a joined DLQ error holds both kinds).
func retryable(err error) bool {
	var unsupported *delta.UnsupportedError
	return !delta.IsConflict(err) && !errors.As(err, &unsupported) &&
		!bridge.IsPermanent(err) && !storage.IsPermanent(err)
}

// retry runs op until it succeeds, ctx ends, or p.maxElapsed has passed; it
// calls onRetry (if set) before each wait and returns op's last error. An
// error retryable refuses ends it at once, wrapped in errPermanent. Storage
// and NATS failures are handled this way inside actors, so only exhausted
// retries and permanent failures reach a supervisor.
func retry(ctx context.Context, p retryPolicy, op func() error, onRetry func(attempt int, err error)) error {
	start := time.Now()
	for attempt := 0; ; attempt++ {
		err := op()
		if err == nil {
			return nil
		}
		if !retryable(err) {
			return fmt.Errorf("%w: %w", errPermanent, err)
		}
		if ctx.Err() != nil || time.Since(start) >= p.maxElapsed {
			return err
		}
		if onRetry != nil {
			onRetry(attempt, err)
		}
		t := time.NewTimer(p.backoff.Jittered(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
