package actors

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/nats-io/nats.go"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/storage"
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

func TestRetryable(t *testing.T) {
	accessDenied := fmt.Errorf("put stream k: %w", minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403})
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"storage fault", fmt.Errorf("Put k: %w", storage.ErrInjected), true},
		{"storage timeout", fmt.Errorf("get k: %w", context.DeadlineExceeded), true},
		{"storage access denied", accessDenied, false},
		{"bucket missing", minio.ErrorResponse{Code: "NoSuchBucket", StatusCode: 404}, false},
		{"NATS timeout", fmt.Errorf("%w: %w", bridge.ErrDLQIncomplete, nats.ErrTimeout), true},
		{"NATS authorization", nats.ErrAuthorization, false},
		{"closed bridge", fmt.Errorf("%w: %w", bridge.ErrDLQIncomplete, nats.ErrConnectionClosed), false},
		{"transient beats permanent", errors.Join(nats.ErrPermissionViolation, nats.ErrTimeout), true},
		{"commit conflict", &delta.ConflictError{Kind: delta.ConflictTxn, Version: 3, AppID: "a"}, false},
		{"unsupported table", fmt.Errorf("commit: %w", &delta.UnsupportedError{Write: true, Features: []string{"x"}}), false},
		{"unknown", errors.New("dlq unreachable"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryable(tc.err); got != tc.want {
				t.Errorf("retryable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestRetry(t *testing.T) {
	fast := retryPolicy{backoff: Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond}, maxElapsed: 2 * time.Second}
	accessDenied := fmt.Errorf("put stream k: %w", minio.ErrorResponse{Code: "AccessDenied", Message: "Access Denied.", StatusCode: 403})
	for _, tc := range []struct {
		name      string
		policy    retryPolicy
		errs      []error // op's errors, then success; the last repeats when ctx or time ends
		forever   bool    // op never succeeds
		calls     int     // want; 0: more than one
		permanent bool
		want      error // errors.Is the result; nil: success
	}{
		{"success at once", fast, nil, false, 1, false, nil},
		{"transient, then success", fast, []error{nats.ErrTimeout, storage.ErrInjected}, false, 3, false, nil},
		{"permanent stops at once", fast, []error{accessDenied}, true, 1, true, accessDenied},
		{"permanent after transient", fast, []error{storage.ErrInjected, nats.ErrAuthorization}, false, 2, true, nats.ErrAuthorization},
		{"unknown until maxElapsed", retryPolicy{backoff: fast.backoff, maxElapsed: 20 * time.Millisecond},
			[]error{storage.ErrInjected}, true, 0, false, storage.ErrInjected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, retries := 0, 0
			err := retry(t.Context(), tc.policy, func() error {
				calls++
				switch {
				case calls <= len(tc.errs):
					return tc.errs[calls-1]
				case tc.forever:
					return tc.errs[len(tc.errs)-1]
				}
				return nil
			}, func(attempt int, err error) {
				if attempt != retries {
					t.Errorf("onRetry attempt %d, want %d", attempt, retries)
				}
				retries++
			})
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("retry = %v, want success", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("retry = %v, want %v", err, tc.want)
			}
			if got := errors.Is(err, errPermanent); got != tc.permanent {
				t.Errorf("retry = %v: permanent %v, want %v", err, got, tc.permanent)
			}
			if tc.calls > 0 && calls != tc.calls {
				t.Errorf("op ran %d times, want %d", calls, tc.calls)
			}
			if tc.calls == 0 && calls < 2 {
				t.Errorf("op ran %d times, want retries until maxElapsed", calls)
			}
			if retries != calls-1 {
				t.Errorf("onRetry called %d times for %d calls", retries, calls)
			}
		})
	}
}

// A permanent error says why retry stopped: its own text, prefixed.
func TestRetryPermanentSaysWhy(t *testing.T) {
	cause := fmt.Errorf("put stream k: %w", minio.ErrorResponse{Code: "AccessDenied", Message: "Access Denied.", StatusCode: 403})
	err := retry(t.Context(), retryPolicy{backoff: Backoff{Initial: time.Millisecond, Max: time.Millisecond}, maxElapsed: time.Second},
		func() error { return cause }, nil)
	if want := "permanent failure, not retried: put stream k: Access Denied."; err == nil || err.Error() != want {
		t.Errorf("retry = %v, want %q", err, want)
	}
}

func TestRetryStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	calls := 0
	err := retry(ctx, retryPolicy{backoff: Backoff{Initial: time.Hour, Max: time.Hour}, maxElapsed: time.Hour}, func() error {
		calls++
		return storage.ErrInjected
	}, func(int, error) { cancel() })
	if !errors.Is(err, storage.ErrInjected) || calls != 1 {
		t.Errorf("retry = %v after %d calls; want the op's error after 1 (ctx cancelled during the wait)", err, calls)
	}
}

func TestEqualJitter(t *testing.T) {
	lowest := func(int64) int64 { return 0 }
	highest := func(k int64) int64 { return k - 1 }
	for _, tc := range []struct {
		d    time.Duration
		draw func(int64) int64
		want time.Duration
	}{
		{time.Second, lowest, 500 * time.Millisecond},
		{time.Second, highest, time.Second},
		{3 * time.Nanosecond, lowest, time.Nanosecond},
		{3 * time.Nanosecond, highest, 3 * time.Nanosecond},
		{time.Nanosecond, highest, time.Nanosecond}, // nothing to jitter
		{0, highest, 0},
	} {
		if got := equalJitter(tc.d, tc.draw); got != tc.want {
			t.Errorf("equalJitter(%s) = %s, want %s", tc.d, got, tc.want)
		}
	}
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	for n := range 6 {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := b.Jittered(n)
			if d < b.Delay(n)/2 || d > b.Delay(n) {
				t.Fatalf("Jittered(%d) = %s, outside [%s, %s]", n, d, b.Delay(n)/2, b.Delay(n))
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("Jittered(%d) always %s: no jitter", n, b.Delay(n))
		}
	}
}
