package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// ErrInjected is the error Faulty returns when a Rule has no Err of its own.
var ErrInjected = errors.New("storage: injected fault")

// Op names a Store method, for Faulty rules and hooks.
type Op string

// The operations Faulty can fail.
const (
	OpGet         Op = "Get"
	OpOpen        Op = "Open"
	OpPut         Op = "Put"
	OpPutIfAbsent Op = "PutIfAbsent"
	OpPutStream   Op = "PutStream"
	OpList        Op = "List"
	OpStat        Op = "Stat"
	OpDelete      Op = "Delete"
)

// Rule says which calls Faulty fails. A call matches when its operation and
// key match; for List the key is the prefix, for Delete any of the keys.
type Rule struct {
	// Op is the operation to fail; empty matches every operation.
	Op Op
	// Prefix matches keys that start with it; empty matches every key.
	Prefix string
	// Match, if set, must also accept the key.
	Match func(key string) bool
	// Times is how many matching calls fail before the rule is used up;
	// 0 fails every matching call.
	Times int
	// After performs the operation and then returns the error anyway, as
	// when a write lands but its response is lost. Only for writes
	// (Put, PutIfAbsent, PutStream, Delete); reads fail before running.
	After bool
	// Err is returned (wrapped with the op and key); nil means ErrInjected.
	Err error
}

func (r *Rule) matches(op Op, keys []string) bool {
	if r.Op != "" && r.Op != op {
		return false
	}
	for _, k := range keys {
		if strings.HasPrefix(k, r.Prefix) && (r.Match == nil || r.Match(k)) {
			return true
		}
	}
	return false
}

// Faulty wraps a Store and fails the calls its rules match; other calls go
// straight through. It is safe for concurrent use.
type Faulty struct {
	Store
	mu        sync.Mutex
	rules     []*Rule
	before    func(op Op, key string) error
	nonAtomic bool
}

// NewFaulty wraps s with no rules.
func NewFaulty(s Store) *Faulty { return &Faulty{Store: s} }

// Fail adds a rule. Rules are tried in the order added; the first that
// matches decides (and uses up one of its Times).
func (f *Faulty) Fail(r Rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &r)
}

// Reset removes all rules, the Before hook and IgnorePutIfAbsent.
func (f *Faulty) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules, f.before, f.nonAtomic = nil, nil, false
}

// IgnorePutIfAbsent makes PutIfAbsent overwrite like Put, as an
// S3-compatible server does that ignores If-None-Match: the store then
// breaks the one guarantee Delta commits rest on. false restores it.
func (f *Faulty) IgnorePutIfAbsent(ignore bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nonAtomic = ignore
}

// Before sets a hook called at the start of every call (Delete: once per key;
// List: with the prefix), before rules are checked. A non-nil error from it
// fails the call without performing it. Tests use it to count calls or to
// block an operation at a chosen moment. nil removes the hook.
func (f *Faulty) Before(hook func(op Op, key string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.before = hook
}

// check runs the hook and the rules. It returns the error to give before the
// call, or the error to give after performing it.
func (f *Faulty) check(op Op, keys ...string) (before, after error) {
	f.mu.Lock()
	hook := f.before
	f.mu.Unlock()
	if hook != nil {
		for _, k := range keys {
			if err := hook(op, k); err != nil {
				return fmt.Errorf("%s %s: %w", op, k, err), nil
			}
		}
	}
	f.mu.Lock()
	var hit *Rule
	for i, r := range f.rules {
		if r.matches(op, keys) {
			hit = r
			if r.Times > 0 {
				if r.Times--; r.Times == 0 {
					f.rules = append(f.rules[:i:i], f.rules[i+1:]...)
				}
			}
			break
		}
	}
	f.mu.Unlock()
	if hit == nil {
		return nil, nil
	}
	err := hit.Err
	if err == nil {
		err = ErrInjected
	}
	err = fmt.Errorf("%s %s: %w", op, strings.Join(keys, ","), err)
	if hit.After {
		return nil, err
	}
	return err, nil
}

// Get implements Store.
func (f *Faulty) Get(ctx context.Context, key string) ([]byte, error) {
	if err, _ := f.check(OpGet, key); err != nil {
		return nil, err
	}
	return f.Store.Get(ctx, key)
}

// Open implements Store.
func (f *Faulty) Open(ctx context.Context, key string) (Reader, error) {
	if err, _ := f.check(OpOpen, key); err != nil {
		return nil, err
	}
	return f.Store.Open(ctx, key)
}

// Stat implements Store.
func (f *Faulty) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err, _ := f.check(OpStat, key); err != nil {
		return ObjectInfo{}, err
	}
	return f.Store.Stat(ctx, key)
}

// List implements Store.
func (f *Faulty) List(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	if err, _ := f.check(OpList, prefix); err != nil {
		return nil, err
	}
	return f.Store.List(ctx, prefix, startAfter)
}

// write runs a write under the rules: fail before, or perform then fail.
func (f *Faulty) write(op Op, do func() error, keys ...string) error {
	before, after := f.check(op, keys...)
	if before != nil {
		return before
	}
	if err := do(); err != nil {
		return err
	}
	return after
}

// Put implements Store.
func (f *Faulty) Put(ctx context.Context, key string, data []byte) error {
	return f.write(OpPut, func() error { return f.Store.Put(ctx, key, data) }, key)
}

// PutIfAbsent implements Store.
func (f *Faulty) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	f.mu.Lock()
	nonAtomic := f.nonAtomic
	f.mu.Unlock()
	if nonAtomic {
		return f.write(OpPutIfAbsent, func() error { return f.Store.Put(ctx, key, data) }, key)
	}
	return f.write(OpPutIfAbsent, func() error { return f.Store.PutIfAbsent(ctx, key, data) }, key)
}

// PutStream implements Store.
func (f *Faulty) PutStream(ctx context.Context, key string, r io.Reader, size int64) error {
	return f.write(OpPutStream, func() error { return f.Store.PutStream(ctx, key, r, size) }, key)
}

// Delete implements Store.
func (f *Faulty) Delete(ctx context.Context, keys ...string) error {
	return f.write(OpDelete, func() error { return f.Store.Delete(ctx, keys...) }, keys...)
}
