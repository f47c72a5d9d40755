package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// localTmp is the directory under the root that holds files being written.
// It is on the same filesystem as the objects, so link and rename are atomic,
// and List never shows it. Keys under it are rejected.
const localTmp = ".deltaflow-tmp"

// Local is a Store in a directory of a local filesystem. Writes are durable
// when they return: file and directory entries are fsynced.
type Local struct {
	root string // absolute, cleaned
	tmp  string
}

var _ Store = (*Local)(nil)

// NewLocal returns a Store rooted at the directory root. A relative root is
// made absolute. Nothing is created until the first write (the root and its
// temp directory), so reading a mistyped path leaves no directory behind.
func NewLocal(root string) (*Local, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("local store %s: %w", root, err)
	}
	return &Local{root: abs, tmp: filepath.Join(abs, localTmp)}, nil
}

// Root is the absolute directory of the store.
func (l *Local) Root() string { return l.root }

// URI implements Store: file:///abs/path.
func (l *Local) URI() string { return "file://" + filepath.ToSlash(l.root) }

func (l *Local) String() string { return l.URI() }

// path maps a checked key to its file name.
func (l *Local) path(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	if key == localTmp || strings.HasPrefix(key, localTmp+"/") {
		return "", fmt.Errorf("%w %q: %s is reserved for temporary files", ErrInvalidKey, key, localTmp)
	}
	return filepath.Join(l.root, filepath.FromSlash(key)), nil
}

// notExist turns the filesystem's "missing" errors into ErrNotExist. ENOTDIR
// counts: a key below an object ("a/b" when "a" is a file) does not exist.
func notExist(op, key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%s %s: %w", op, key, ErrNotExist)
	}
	return fmt.Errorf("%s %s: %w", op, key, err)
}

// Get implements Store.
func (l *Local) Get(ctx context.Context, key string) ([]byte, error) {
	r, err := l.open("get", key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data := make([]byte, r.size)
	if _, err := io.ReadFull(r.File, data); err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return data, nil
}

// localReader is an open object file; os.File gives ReadAt and Close.
type localReader struct {
	*os.File
	size int64
}

func (r *localReader) Size() int64 { return r.size }

// Open implements Store. The Reader is an *os.File; it stays valid if the
// object is replaced or deleted meanwhile (it keeps the old inode).
func (l *Local) Open(ctx context.Context, key string) (Reader, error) {
	return l.open("open", key)
}

func (l *Local) open(op, key string) (*localReader, error) {
	p, err := l.path(key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, notExist(op, key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s %s: %w", op, key, err)
	}
	if !fi.Mode().IsRegular() { // directories are not objects
		f.Close()
		return nil, fmt.Errorf("%s %s: %w", op, key, ErrNotExist)
	}
	return &localReader{File: f, size: fi.Size()}, nil
}

// Stat implements Store.
func (l *Local) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	p, err := l.path(key)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("stat: %w", err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return ObjectInfo{}, notExist("stat", key, err)
	}
	if !fi.Mode().IsRegular() {
		return ObjectInfo{}, fmt.Errorf("stat %s: %w", key, ErrNotExist)
	}
	return ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Put implements Store: temp file, fsync, rename over the target, fsync dir.
func (l *Local) Put(ctx context.Context, key string, data []byte) error {
	return l.replace("put", key, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// PutStream implements Store like Put, copying r to the temp file first. A
// known size that r does not deliver is an error and writes nothing.
func (l *Local) PutStream(ctx context.Context, key string, r io.Reader, size int64) error {
	return l.replace("put stream", key, func(w io.Writer) error {
		n, err := io.Copy(w, ctxReader{ctx, r})
		if err == nil && size >= 0 && n != size {
			err = fmt.Errorf("stream had %d bytes, want %d", n, size)
		}
		return err
	})
}

func (l *Local) replace(op, key string, write func(io.Writer) error) error {
	p, err := l.path(key)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	tmp, err := l.writeTemp(write)
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, key, err)
	}
	defer os.Remove(tmp) // no-op once renamed
	// rename(2) may overwrite: that is what Put means, and readers see either
	// file. PutIfAbsent must not use it.
	if err := l.install(p, func() error { return os.Rename(tmp, p) }); err != nil {
		return fmt.Errorf("%s %s: %w", op, key, err)
	}
	return nil
}

// PutIfAbsent implements Store with link(2), which fails with EEXIST instead
// of replacing, atomically, on every local filesystem (rename would replace,
// and O_EXCL would expose a half-written file).
func (l *Local) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	p, err := l.path(key)
	if err != nil {
		return fmt.Errorf("put if absent: %w", err)
	}
	// Cheap early answer for the common conflict; link below is the real test.
	if _, err := os.Lstat(p); err == nil {
		return fmt.Errorf("put if absent %s: %w", key, ErrExist)
	}
	tmp, err := l.writeTemp(func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("put if absent %s: %w", key, err)
	}
	defer os.Remove(tmp) // the object is the link; the temp name goes
	err = l.install(p, func() error { return os.Link(tmp, p) })
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("put if absent %s: %w", key, ErrExist)
	}
	if err != nil {
		return fmt.Errorf("put if absent %s: %w", key, err)
	}
	return nil
}

// writeTemp writes a fresh, fsynced temp file and returns its name.
func (l *Local) writeTemp(write func(io.Writer) error) (name string, err error) {
	f, err := os.CreateTemp(l.tmp, "obj-*")
	if err != nil {
		// Someone removed the temp dir (e.g. rm -rf of a table): recreate once.
		if mkErr := os.MkdirAll(l.tmp, 0o755); mkErr != nil {
			return "", err
		}
		if f, err = os.CreateTemp(l.tmp, "obj-*"); err != nil {
			return "", err
		}
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	return f.Name(), f.Close()
}

// install creates the parent directories of p, runs link or rename into
// place and fsyncs the directory so the new entry survives a crash. A
// concurrent Delete may remove a parent that just became empty between the
// mkdir and the link, so ENOENT is retried.
func (l *Local) install(p string, place func() error) error {
	dir := filepath.Dir(p)
	var err error
	for range 20 {
		if err = l.mkdirs(dir); err != nil {
			return err
		}
		if err = place(); !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

// mkdirs is os.MkdirAll that also fsyncs each parent that gained an entry.
func (l *Local) mkdirs(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	parent := filepath.Dir(dir)
	if dir == l.root || parent == dir {
		return os.MkdirAll(dir, 0o755)
	}
	if err := l.mkdirs(parent); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// List implements Store. It walks only the deepest directory the prefix
// names ("_delta_log/0000" walks _delta_log/), so listing the log of a table
// with thousands of data files stays cheap.
func (l *Local) List(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	if err := CheckPrefix(prefix); err != nil {
		return nil, err
	}
	dir, _ := splitPrefix(prefix)
	start := filepath.Join(l.root, filepath.FromSlash(dir))
	var out []ObjectInfo
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil // no such directory, or deleted while walking
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(l.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if key == localTmp {
				return filepath.SkipDir
			}
			// Prune directories that cannot hold a matching key.
			if key != "." && !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) || key <= startAfter {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		out = append(out, ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	// WalkDir sorts names per directory, which is not key order across
	// levels ("a.txt" < "a/b" but directory "a" is walked first).
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Delete implements Store. It then removes parent directories that became
// empty (never the root), so VACUUM leaves no empty partition directories.
// Deletes are not fsynced: a delete lost in a crash is redone by the next
// VACUUM. It goes on after an error and returns the first one.
func (l *Local) Delete(ctx context.Context, keys ...string) error {
	var first error
	for _, key := range keys {
		if err := l.delete(key); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (l *Local) delete(key string) error {
	p, err := l.path(key)
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if fi.IsDir() { // directories are not objects
		return nil
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	for dir := filepath.Dir(p); dir != l.root && strings.HasPrefix(dir, l.root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break // not empty (or already gone): the parents are not empty either
		}
	}
	return nil
}

// ctxReader stops a long copy when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
