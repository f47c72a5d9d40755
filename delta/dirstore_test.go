package delta

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/deltaflow/deltaflow/storage"
)

// dirStore is a minimal local-directory storage.Store for tests (the real
// implementations live in package storage). Not atomic; tests only.
type dirStore struct{ root string }

var _ storage.Store = dirStore{}

func (s dirStore) path(key string) string { return filepath.Join(s.root, filepath.FromSlash(key)) }

func mapErr(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return errors.Join(storage.ErrNotExist, err)
	}
	return err
}

func (s dirStore) Get(_ context.Context, key string) ([]byte, error) {
	b, err := os.ReadFile(s.path(key))
	return b, mapErr(err)
}

type fileReader struct {
	*os.File
	size int64
}

func (f fileReader) Size() int64 { return f.size }

func (s dirStore) Open(_ context.Context, key string) (storage.Reader, error) {
	f, err := os.Open(s.path(key))
	if err != nil {
		return nil, mapErr(err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return fileReader{f, st.Size()}, nil
}

func (s dirStore) Put(_ context.Context, key string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(s.path(key)), 0o755); err != nil {
		return err
	}
	return os.WriteFile(s.path(key), data, 0o644)
}

func (s dirStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if _, err := os.Stat(s.path(key)); err == nil {
		return storage.ErrExist
	}
	return s.Put(ctx, key, data)
}

func (s dirStore) PutStream(_ context.Context, key string, r io.Reader, _ int64) error {
	p := s.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

func (s dirStore) List(_ context.Context, prefix, startAfter string) ([]storage.ObjectInfo, error) {
	var out []storage.ObjectInfo
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(s.root, p)
		key := filepath.ToSlash(rel)
		if strings.HasPrefix(key, prefix) && key > startAfter {
			info, err := d.Info()
			if err != nil {
				return err
			}
			out = append(out, storage.ObjectInfo{Key: key, Size: info.Size(), ModTime: info.ModTime()})
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, err
}

func (s dirStore) Stat(_ context.Context, key string) (storage.ObjectInfo, error) {
	info, err := os.Stat(s.path(key))
	if err != nil {
		return storage.ObjectInfo{}, mapErr(err)
	}
	return storage.ObjectInfo{Key: key, Size: info.Size(), ModTime: info.ModTime()}, nil
}

func (s dirStore) Delete(_ context.Context, keys ...string) error {
	for _, k := range keys {
		if err := os.Remove(s.path(k)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (s dirStore) URI() string { return "file://" + filepath.ToSlash(s.root) }
