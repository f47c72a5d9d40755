package actors

import (
	"strings"
	"testing"
	"time"
)

// The committer's side of Progress: failing at the backoff cap starts a
// failure period that only a working epoch or a commit ends, and a commit
// moves LastCommit.
func TestProgressFailurePeriod(t *testing.T) {
	t0 := time.Date(2026, 6, 22, 9, 0, 0, 0, time.UTC)
	p := newProgress(t0)
	if got := p.lastCommitAt(); !got.Equal(t0) {
		t.Fatalf("last commit %v before any; want the start %v", got, t0)
	}
	p.failing(false, t0.Add(time.Second))
	if p.failingSince.Load() != 0 {
		t.Fatal("a failure below the backoff cap started a failure period")
	}
	p.failing(true, t0.Add(time.Minute))
	p.failing(true, t0.Add(2*time.Minute))
	if got := time.Unix(0, p.failingSince.Load()); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("failing since %v; want the first failure at the cap", got)
	}
	p.epochDone()
	if p.failingSince.Load() != 0 {
		t.Fatal("a working epoch did not end the failure period")
	}
	p.failing(true, t0.Add(3*time.Minute))
	p.committedNow(t0.Add(4 * time.Minute))
	if p.failingSince.Load() != 0 || !p.lastCommitAt().Equal(t0.Add(4*time.Minute)) {
		t.Fatal("a commit did not end the failure period and move the last commit")
	}
}

// LastCommit keeps its monotonic clock reading (issue 29, item 6): the
// stall watchdog measures with it, so a step of the wall clock (NTP on a
// Pi that booted without a network) neither fakes nor hides a stall.
func TestProgressLastCommitIsMonotonic(t *testing.T) {
	p := newProgress(time.Now())
	p.committedNow(time.Now())
	// The time package's String prints "m=±seconds" for a monotonic
	// reading, and only then.
	if got := p.lastCommitAt(); !strings.Contains(got.String(), " m=") {
		t.Fatalf("last commit %s carries no monotonic clock reading", got)
	}
}
