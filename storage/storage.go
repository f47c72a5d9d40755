package storage

import (
	"context"
	"errors"
	"io"
	"time"
)

// ErrNotExist is returned (possibly wrapped) when an object does not exist.
var ErrNotExist = errors.New("storage: object does not exist")

// ErrExist is returned (possibly wrapped) by PutIfAbsent when the key is taken.
var ErrExist = errors.New("storage: object already exists")

// ObjectInfo describes one stored object. Key is relative to the store root and
// always uses '/' as separator.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Reader is an open object: random access for Parquet footers and column chunks.
type Reader interface {
	io.ReaderAt
	io.Closer
	// Size is the object's length in bytes.
	Size() int64
}

// Store is a flat object store rooted at one table (or any prefix). Keys are
// relative, '/'-separated, never start with '/', and never contain "." or ".."
// segments (implementations reject such keys).
type Store interface {
	// Get returns the whole object. ErrNotExist if absent.
	Get(ctx context.Context, key string) ([]byte, error)
	// Open opens the object for random access. ErrNotExist if absent.
	Open(ctx context.Context, key string) (Reader, error)
	// Put writes the object, replacing any existing one. The object is never
	// observed half-written.
	Put(ctx context.Context, key string, data []byte) error
	// PutIfAbsent writes the object only if no object has the key, atomically:
	// of two concurrent callers exactly one succeeds and the other gets ErrExist.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// PutStream writes a large object from r (size -1 when unknown), replacing
	// any existing one; multipart where the backend supports it. The object is
	// never observed half-written.
	PutStream(ctx context.Context, key string, r io.Reader, size int64) error
	// List returns every object whose key starts with prefix and sorts strictly
	// after startAfter (empty: from the beginning), recursively, in ascending
	// byte order of key. Directories are not objects.
	List(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error)
	// Stat describes one object. ErrNotExist if absent.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// Delete removes the objects; keys that do not exist are not an error.
	Delete(ctx context.Context, keys ...string) error
	// URI is the store root as a URI (file:///abs/path or s3://bucket/prefix),
	// without credentials.
	URI() string
}
