package actors

import (
	"context"
	"slices"
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

	b.Add(0, 90) // exhausted: no room until a release makes some, which OnRoom hears
	roomed := make(chan struct{}, 1)
	b.OnRoom(func() { roomed <- struct{}{} })
	if !b.Exhausted() || b.HasRoom(0) {
		t.Fatal("a full budget has room")
	}
	b.Release(0, 1)
	select {
	case <-roomed:
	default:
		t.Fatal("OnRoom did not hear the release")
	}
	if b.Exhausted() || !b.HasRoom(0) {
		t.Fatal("no room after a release")
	}
}

// Observe reports the bytes at once, then after every change.
func TestBudgetObserve(t *testing.T) {
	b := NewBudget(100, 2)
	b.Add(0, 40)
	var seen []int64
	b.Observe(func(n int64) { seen = append(seen, n) })
	b.Add(0, 10)
	b.Release(0, 20)
	b.Add(1, 5) // another generation: no change, nothing seen
	b.NewGeneration(1)
	if want := []int64{40, 50, 30, 0}; !slices.Equal(seen, want) {
		t.Errorf("observed %v, want %v", seen, want)
	}
}

func TestBudgetWaitAbove(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ops   func(b *Budget) // run after WaitAbove(10) started waiting
		start int64           // bytes before waiting
		want  bool
	}{
		{"already above", func(*Budget) {}, 10, true},
		{"reached while waiting", func(b *Budget) { b.Add(0, 6) }, 4, true},
		{"not reached: ctx ends", func(b *Budget) { b.Add(0, 5) }, 4, false},
		{"another generation's bytes do not count", func(b *Budget) { b.Add(1, 50) }, 0, false},
		{"released bytes do not count", func(b *Budget) { b.Add(0, 5); b.Release(0, 5); b.Add(0, 5) }, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBudget(100, 2)
			b.Add(0, tc.start)
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			got := make(chan bool)
			go func() { got <- b.WaitAbove(ctx, 10) }()
			time.Sleep(10 * time.Millisecond) // let it wait
			tc.ops(b)
			if g := <-got; g != tc.want {
				t.Errorf("WaitAbove(10) = %v, want %v", g, tc.want)
			}
		})
	}
	// A budget waited on once can be waited on again.
	b := NewBudget(100, 2)
	for i := range 2 {
		done := make(chan bool)
		go func() { done <- b.WaitAbove(t.Context(), int64(10*(i+1))) }()
		time.Sleep(10 * time.Millisecond)
		b.Add(0, 10)
		if !<-done {
			t.Fatalf("wait %d did not return true", i)
		}
	}
}

// Too many unfinished epochs leave no room, however few bytes are held,
// until one is done (which OnRoom hears).
func TestBudgetEpochs(t *testing.T) {
	b := NewBudget(100, 1)
	b.EpochStarted()
	b.EpochStarted()
	roomed := make(chan struct{}, 1)
	b.OnRoom(func() { roomed <- struct{}{} })
	if !b.Exhausted() || b.HasRoom(0) {
		t.Fatal("room with too many epochs unfinished")
	}
	b.EpochDone()
	<-roomed
	if b.Exhausted() || !b.HasRoom(0) {
		t.Fatal("no room once an epoch was done")
	}
}

// HasRoom says n more bytes fit, or nothing is held (a thing larger than
// the whole budget must still pass); Fits says whether n fit now.
func TestBudgetHasRoom(t *testing.T) {
	b := NewBudget(100, 2)
	if !b.HasRoom(500) {
		t.Fatal("an empty budget had no room for one thing larger than it")
	}
	b.Add(0, 80)
	if b.Fits(30) || !b.Fits(20) {
		t.Fatalf("with 80 of 100 held: Fits(30) %v, Fits(20) %v", b.Fits(30), b.Fits(20))
	}
	if b.HasRoom(30) || !b.HasRoom(20) {
		t.Fatalf("with 80 of 100 held: HasRoom(30) %v, HasRoom(20) %v", b.HasRoom(30), b.HasRoom(20))
	}
	b.Release(0, 80)
	if !b.HasRoom(500) {
		t.Fatal("no room for more than the budget once nothing was held")
	}
}
