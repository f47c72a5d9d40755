package actors

import (
	"context"
	"sync"
)

// Budget bounds what the pipeline holds in memory: bytes buffered in rows
// not yet uploaded, and epochs started but not committed. The fetch loop
// pauses Kafka while the budget is exhausted. Safe for concurrent use.
type Budget struct {
	limit     int64
	maxEpochs int

	mu      sync.Mutex
	gen     uint64 // bytes of other generations are not counted
	bytes   int64
	epochs  int
	changed chan struct{} // closed and replaced whenever usage drops
	// above is closed once bytes reach aboveAt (WaitAbove); nil when
	// nobody waits.
	above   chan struct{}
	aboveAt int64
	// observe, if set, sees the buffered bytes after every change.
	observe func(bytes int64)
}

// NewBudget returns a budget of limit bytes and maxEpochs unfinished epochs.
func NewBudget(limit int64, maxEpochs int) *Budget {
	return &Budget{limit: limit, maxEpochs: maxEpochs, changed: make(chan struct{})}
}

// Add accounts n more buffered bytes of generation gen.
func (b *Budget) Add(gen uint64, n int64) {
	b.mu.Lock()
	if gen == b.gen {
		b.bytes += n
		b.observeLocked()
		if b.above != nil && b.bytes >= b.aboveAt {
			close(b.above)
			b.above = nil
		}
	}
	b.mu.Unlock()
}

// Observe makes f see the buffered bytes after every change (a gauge).
// f runs under the budget's lock: it must be quick and must not call back.
func (b *Budget) Observe(f func(bytes int64)) {
	b.mu.Lock()
	b.observe = f
	b.observeLocked()
	b.mu.Unlock()
}

func (b *Budget) observeLocked() {
	if b.observe != nil {
		b.observe(b.bytes)
	}
}

// WaitAbove blocks until the buffered bytes reach n or ctx ends, and
// reports whether they did. One goroutine waits at a time.
func (b *Budget) WaitAbove(ctx context.Context, n int64) bool {
	b.mu.Lock()
	if b.bytes >= n {
		b.mu.Unlock()
		return true
	}
	if b.above == nil {
		b.above = make(chan struct{})
	}
	ch := b.above
	b.aboveAt = n
	b.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// Release gives back n bytes of generation gen.
func (b *Budget) Release(gen uint64, n int64) {
	b.mu.Lock()
	if gen == b.gen && n != 0 {
		b.bytes -= n
		b.observeLocked()
		b.notifyLocked()
	}
	b.mu.Unlock()
}

// Adjust changes the bytes of generation gen by n, up or down.
func (b *Budget) Adjust(gen uint64, n int64) {
	if n < 0 {
		b.Release(gen, -n)
	} else {
		b.Add(gen, n)
	}
}

// NewGeneration forgets every buffered byte: the pipeline that held them is
// gone (rows in its mailboxes are never released one by one).
func (b *Budget) NewGeneration(gen uint64) {
	b.mu.Lock()
	b.gen, b.bytes = gen, 0
	b.observeLocked()
	b.notifyLocked()
	b.mu.Unlock()
}

// EpochStarted counts an epoch sealed and not yet committed or dropped.
func (b *Budget) EpochStarted() {
	b.mu.Lock()
	b.epochs++
	b.mu.Unlock()
}

// EpochDone ends an epoch counted by EpochStarted.
func (b *Budget) EpochDone() {
	b.mu.Lock()
	b.epochs--
	b.notifyLocked()
	b.mu.Unlock()
}

func (b *Budget) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// WaitRoom blocks until n more bytes fit in the budget, or nothing is held
// (so that one thing larger than the budget still passes), or ctx ends; it
// reports whether there is room.
func (b *Budget) WaitRoom(ctx context.Context, n int64) bool {
	return b.waitUntil(ctx, func() bool { return b.bytes+n <= b.limit || b.bytes <= 0 })
}

// Fits reports whether n more bytes fit in the budget.
func (b *Budget) Fits(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytes+n <= b.limit
}

// Bytes is the number of buffered bytes.
func (b *Budget) Bytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytes
}

// Exhausted reports whether reading must pause.
func (b *Budget) Exhausted() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.exhaustedLocked()
}

func (b *Budget) exhaustedLocked() bool {
	return b.bytes >= b.limit || b.epochs > b.maxEpochs
}

// Wait blocks until the budget is no longer exhausted or ctx ends, and
// reports whether it has room.
func (b *Budget) Wait(ctx context.Context) bool {
	return b.waitUntil(ctx, func() bool { return !b.exhaustedLocked() })
}

// waitUntil blocks until ok, checked under the lock whenever usage drops,
// holds or ctx ends, and reports whether ok held.
func (b *Budget) waitUntil(ctx context.Context, ok func() bool) bool {
	for {
		b.mu.Lock()
		if ok() {
			b.mu.Unlock()
			return true
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}
