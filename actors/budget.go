package actors

import (
	"context"
	"sync"
)

// Budget bounds what one table's pipeline holds in memory: bytes buffered
// in rows not yet uploaded, and epochs started but not committed. The fetch
// loop reads the table no further while its budget is exhausted, or a
// reader of it waits for room (HasRoom; OnRoom wakes the loop). Safe for
// concurrent use.
type Budget struct {
	limit     int64
	maxEpochs int

	mu     sync.Mutex
	gen    uint64 // bytes of other generations are not counted
	bytes  int64
	epochs int
	// above is closed once bytes reach aboveAt (WaitAbove); nil when
	// nobody waits.
	above   chan struct{}
	aboveAt int64
	// observe, if set, sees the buffered bytes after every change.
	observe func(bytes int64)
	// onRoom, if set, is called whenever usage drops (see OnRoom).
	onRoom func()
}

// NewBudget returns a budget of limit bytes and maxEpochs unfinished epochs.
func NewBudget(limit int64, maxEpochs int) *Budget {
	return &Budget{limit: limit, maxEpochs: maxEpochs}
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
	if b.onRoom != nil {
		b.onRoom()
	}
}

// OnRoom makes f run whenever usage drops (bytes released, an epoch done,
// a new generation). f runs under the budget's lock: it must be quick and
// must not call back.
func (b *Budget) OnRoom(f func()) {
	b.mu.Lock()
	b.onRoom = f
	b.mu.Unlock()
}

// HasRoom reports whether reading may go on: the budget is not exhausted
// and n more bytes fit, or nothing is held (so that one thing larger than
// the budget still passes).
func (b *Budget) HasRoom(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.epochs > b.maxEpochs {
		return false
	}
	return b.bytes <= 0 || (b.bytes+n <= b.limit && b.bytes < b.limit)
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
