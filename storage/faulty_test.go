package storage_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/deltaflow/deltaflow/storage"
)

func TestFaultyRules(t *testing.T) {
	ctx := t.Context()
	mem := storage.NewMem()
	f := storage.NewFaulty(mem)
	errBoom := errors.New("boom")

	// Times: the next two matching calls fail, then the rule is used up.
	f.Fail(storage.Rule{Op: storage.OpPut, Prefix: "_delta_log/", Times: 2})
	for i := range 2 {
		if err := f.Put(ctx, "_delta_log/0.json", []byte("x")); !errors.Is(err, storage.ErrInjected) {
			t.Fatalf("call %d: err = %v, want ErrInjected", i, err)
		}
	}
	if _, err := mem.Get(ctx, "_delta_log/0.json"); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("failed Put wrote anyway: %v", err)
	}
	if err := f.Put(ctx, "_delta_log/0.json", []byte("x")); err != nil {
		t.Fatalf("third call: %v", err)
	}
	// Non-matching op or key passes.
	f.Fail(storage.Rule{Op: storage.OpGet, Match: func(k string) bool { return strings.HasSuffix(k, ".parquet") }, Err: errBoom})
	if _, err := f.Get(ctx, "_delta_log/0.json"); err != nil {
		t.Fatalf("Get of non-matching key: %v", err)
	}
	if err := f.Put(ctx, "a.parquet", []byte("x")); err != nil {
		t.Fatalf("Put of key matched only by a Get rule: %v", err)
	}
	// Times 0: every matching call fails, with the rule's error.
	for range 3 {
		if _, err := f.Get(ctx, "a.parquet"); !errors.Is(err, errBoom) {
			t.Fatalf("err = %v, want boom", err)
		}
	}
	f.Reset()
	if _, err := f.Get(ctx, "a.parquet"); err != nil {
		t.Fatalf("after Reset: %v", err)
	}
}

// After simulates a lost response: the commit lands, the caller hears an
// error, and a retry sees ErrExist — the case the Delta committer resolves
// by re-reading the log.
func TestFaultyAfter(t *testing.T) {
	ctx := t.Context()
	f := storage.NewFaulty(storage.NewMem())
	f.Fail(storage.Rule{Op: storage.OpPutIfAbsent, Times: 1, After: true})
	if err := f.PutIfAbsent(ctx, "_delta_log/1.json", []byte("c")); !errors.Is(err, storage.ErrInjected) {
		t.Fatalf("err = %v, want ErrInjected", err)
	}
	if err := f.PutIfAbsent(ctx, "_delta_log/1.json", []byte("c")); !errors.Is(err, storage.ErrExist) {
		t.Fatalf("retry: err = %v, want ErrExist (the first write landed)", err)
	}
	f.Fail(storage.Rule{Op: storage.OpDelete, Prefix: "b", After: true})
	if err := f.Delete(ctx, "a", "b"); !errors.Is(err, storage.ErrInjected) {
		t.Fatalf("Delete: err = %v, want ErrInjected", err)
	}
	if _, err := f.Stat(ctx, "_delta_log/1.json"); err != nil {
		t.Fatal(err)
	}
}

func TestFaultyBefore(t *testing.T) {
	ctx := t.Context()
	f := storage.NewFaulty(storage.NewMem())
	var calls atomic.Int32
	f.Before(func(op storage.Op, key string) error {
		calls.Add(1)
		if op == storage.OpStat && key == "stop" {
			return errors.New("hook says no")
		}
		return nil
	})
	_ = f.Put(ctx, "x", nil)
	_, _ = f.List(ctx, "", "")
	_ = f.Delete(ctx, "x", "y")
	if _, err := f.Stat(ctx, "stop"); err == nil || !strings.Contains(err.Error(), "hook says no") {
		t.Fatalf("Stat: err = %v, want the hook's error", err)
	}
	if got := calls.Load(); got != 5 { // Put, List, Delete×2, Stat
		t.Errorf("hook called %d times, want 5", got)
	}
	f.Before(nil)
	if _, err := f.Stat(ctx, "stop"); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("without hook: err = %v", err)
	}
}
