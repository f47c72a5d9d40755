package storage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Mem is an in-memory Store for unit tests. It honours the whole Store
// contract (the conformance suite runs against it); data is copied in and
// out, so callers may reuse their slices.
type Mem struct {
	name string
	mu   sync.Mutex
	objs map[string]memObject
}

type memObject struct {
	data []byte
	mod  time.Time
}

var _ Store = (*Mem)(nil)

var memSeq atomic.Int64

// NewMem returns an empty in-memory store with a unique mem:// URI.
func NewMem() *Mem {
	return &Mem{name: fmt.Sprintf("mem://%d", memSeq.Add(1)), objs: map[string]memObject{}}
}

// URI implements Store.
func (m *Mem) URI() string { return m.name }

func (m *Mem) String() string { return m.name }

func (m *Mem) get(op, key string) (memObject, error) {
	if err := CheckKey(key); err != nil {
		return memObject{}, fmt.Errorf("%s: %w", op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key]
	if !ok {
		return memObject{}, fmt.Errorf("%s %s: %w", op, key, ErrNotExist)
	}
	return o, nil
}

// Get implements Store.
func (m *Mem) Get(ctx context.Context, key string) ([]byte, error) {
	o, err := m.get("get", key)
	return bytes.Clone(o.data), err
}

type memReader struct{ *bytes.Reader }

func (memReader) Close() error { return nil }

// Open implements Store. Stored slices are never modified in place, so the
// reader needs no copy.
func (m *Mem) Open(ctx context.Context, key string) (Reader, error) {
	o, err := m.get("open", key)
	if err != nil {
		return nil, err
	}
	return memReader{bytes.NewReader(o.data)}, nil
}

// Stat implements Store.
func (m *Mem) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	o, err := m.get("stat", key)
	if err != nil {
		return ObjectInfo{}, err
	}
	return ObjectInfo{Key: key, Size: int64(len(o.data)), ModTime: o.mod}, nil
}

func (m *Mem) put(op, key string, data []byte, ifAbsent bool) error {
	if err := CheckKey(key); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objs[key]; ok && ifAbsent {
		return fmt.Errorf("%s %s: %w", op, key, ErrExist)
	}
	m.objs[key] = memObject{data: data, mod: time.Now()}
	return nil
}

// Put implements Store.
func (m *Mem) Put(ctx context.Context, key string, data []byte) error {
	return m.put("put", key, bytes.Clone(data), false)
}

// PutIfAbsent implements Store.
func (m *Mem) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return m.put("put if absent", key, bytes.Clone(data), true)
}

// PutStream implements Store; the object appears once r is fully read.
func (m *Mem) PutStream(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := CheckKey(key); err != nil {
		return fmt.Errorf("put stream: %w", err)
	}
	data, err := io.ReadAll(ctxReader{ctx, r})
	if err != nil {
		return fmt.Errorf("put stream %s: %w", key, err)
	}
	if size >= 0 && int64(len(data)) != size {
		return fmt.Errorf("put stream %s: stream had %d bytes, want %d", key, len(data), size)
	}
	return m.put("put stream", key, data, false)
}

// List implements Store.
func (m *Mem) List(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	if err := CheckPrefix(prefix); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ObjectInfo
	for k, o := range m.objs {
		if strings.HasPrefix(k, prefix) && k > startAfter {
			out = append(out, ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.mod})
		}
	}
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Delete implements Store. Invalid keys are reported; the valid ones are
// still deleted.
func (m *Mem) Delete(ctx context.Context, keys ...string) error {
	var first error
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		if err := CheckKey(k); err != nil {
			if first == nil {
				first = fmt.Errorf("delete: %w", err)
			}
			continue
		}
		delete(m.objs, k)
	}
	return first
}
