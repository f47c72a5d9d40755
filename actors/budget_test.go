package actors

import (
	"context"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ops       func(b *Budget)
		bytes     int64
		exhausted bool
	}{
		{"empty", func(*Budget) {}, 0, false},
		{"below the limit", func(b *Budget) { b.Add(0, 99) }, 99, false},
		{"at the limit", func(b *Budget) { b.Add(0, 60); b.Add(0, 40) }, 100, true},
		{"released", func(b *Budget) { b.Add(0, 150); b.Release(0, 60) }, 90, false},
		{"adjusted both ways", func(b *Budget) { b.Adjust(0, 80); b.Adjust(0, -30); b.Adjust(0, 10) }, 60, false},
		{"another generation's bytes ignored", func(b *Budget) { b.Add(1, 500); b.Release(1, 20) }, 0, false},
		{"new generation forgets", func(b *Budget) { b.Add(0, 500); b.NewGeneration(1); b.Add(0, 7) }, 0, false},
		{"too many epochs", func(b *Budget) { b.EpochStarted(); b.EpochStarted(); b.EpochStarted() }, 0, true},
		{"epochs done", func(b *Budget) { b.EpochStarted(); b.EpochStarted(); b.EpochStarted(); b.EpochDone() }, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBudget(100, 2)
			var seen int64 = -1
			b.Observe(func(n int64) { seen = n })
			tc.ops(b)
			if got := b.Bytes(); got != tc.bytes {
				t.Errorf("Bytes = %d, want %d", got, tc.bytes)
			}
			if seen != tc.bytes {
				t.Errorf("observed %d, want %d", seen, tc.bytes)
			}
			if got := b.Exhausted(); got != tc.exhausted {
				t.Errorf("Exhausted = %v, want %v", got, tc.exhausted)
			}
		})
	}
}

func TestBudgetWaits(t *testing.T) {
	b := NewBudget(100, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if b.WaitAbove(ctx, 10) {
		t.Fatal("WaitAbove(10) returned true on an empty budget")
	}
	above := make(chan bool)
	go func() { above <- b.WaitAbove(t.Context(), 10) }()
	b.Add(0, 5)
	select {
	case <-above:
		t.Fatal("WaitAbove(10) returned at 5 bytes")
	case <-time.After(20 * time.Millisecond):
	}
	b.Add(0, 5)
	if !<-above {
		t.Fatal("WaitAbove(10) did not report reaching 10 bytes")
	}

	b.Add(0, 90) // exhausted: Wait blocks until a release makes room
	room := make(chan bool)
	go func() { room <- b.Wait(t.Context()) }()
	select {
	case <-room:
		t.Fatal("Wait returned while the budget is exhausted")
	case <-time.After(20 * time.Millisecond):
	}
	b.Release(0, 1)
	if !<-room {
		t.Fatal("Wait did not report room after a release")
	}
}
