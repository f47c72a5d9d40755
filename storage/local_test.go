package storage_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/deltaflow/deltaflow/storage"
)

func newLocal(t *testing.T) (*storage.Local, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "new", "table") // NewLocal creates it
	s, err := storage.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	return s, root
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestLocalReadCreatesNothing: opening and reading a store at a path that
// does not exist (a mistyped --table) leaves no directory behind.
func TestLocalReadCreatesNothing(t *testing.T) {
	root := filepath.Join(t.TempDir(), "no", "such", "table")
	s, err := storage.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	if infos, err := s.List(t.Context(), "_delta_log/", ""); err != nil || len(infos) != 0 {
		t.Fatalf("List = %v, %v; want nothing", infos, err)
	}
	if _, err := s.Get(t.Context(), "_delta_log/_last_checkpoint"); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("Get: %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(filepath.Dir(root)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("reading created %s (%v)", filepath.Dir(root), err)
	}
	if err := s.PutIfAbsent(t.Context(), "_delta_log/00000000000000000000.json", []byte("{}")); err != nil {
		t.Fatalf("the first write must create the directories: %v", err)
	}
}

func TestLocalLayout(t *testing.T) {
	s, root := newLocal(t)
	ctx := t.Context()
	if s.URI() != "file://"+root || s.Root() != root {
		t.Errorf("URI() = %q, Root() = %q; want file://%s", s.URI(), s.Root(), root)
	}
	if err := s.Put(ctx, "p=1/q=2/f.parquet", []byte("x")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "p=1", "q=2", "f.parquet"))
	if err != nil || string(b) != "x" {
		t.Fatalf("object file = %q, %v", b, err)
	}
}

// Temp files (e.g. left by a crash mid-write) never show, and no write
// leaves one behind, whether it succeeded or lost a race.
func TestLocalTempFiles(t *testing.T) {
	s, root := newLocal(t)
	ctx := t.Context()
	tmp := filepath.Join(root, ".deltaflow-tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "obj-crashed"), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "a", []byte("2")); !errors.Is(err, storage.ErrExist) {
		t.Fatalf("err = %v, want ErrExist", err)
	}
	if err := s.Put(ctx, "b", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, tmp); !slices.Equal(got, []string{"obj-crashed"}) {
		t.Errorf("temp dir holds %q, want only the crashed file", got)
	}
	infos, err := s.List(ctx, "", "")
	if err != nil || len(infos) != 2 {
		t.Errorf("List = %v, %v; want a and b only", infos, err)
	}
	for _, key := range []string{".deltaflow-tmp/obj-crashed", ".deltaflow-tmp"} {
		if _, err := s.Get(ctx, key); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("Get(%q): err = %v, want ErrInvalidKey", key, err)
		}
	}
	// A removed temp dir is recreated.
	if err := os.RemoveAll(tmp); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "c", []byte("1")); err != nil {
		t.Fatalf("Put after temp dir removal: %v", err)
	}
}

// PutIfAbsent links a new inode into place: an existing object, even one
// open for reading, is never touched.
func TestLocalPutIfAbsentKeepsInode(t *testing.T) {
	s, root := newLocal(t)
	ctx := t.Context()
	if err := s.PutIfAbsent(ctx, "v/0.json", []byte("first")); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(filepath.Join(root, "v", "0.json"))
	_ = s.PutIfAbsent(ctx, "v/0.json", []byte("second"))
	after, _ := os.Stat(filepath.Join(root, "v", "0.json"))
	if !os.SameFile(before, after) {
		t.Error("PutIfAbsent replaced the existing file")
	}
}

// VACUUM deletes data files and relies on Delete to remove the partition
// directories that become empty, but never the root or non-empty ones.
func TestLocalDeleteRemovesEmptyDirs(t *testing.T) {
	s, root := newLocal(t)
	ctx := t.Context()
	for _, k := range []string{"d=a/e=1/f1", "d=a/e=1/f2", "d=a/e=2/f3", "d=b/e=1/f4"} {
		if err := s.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "d=a/e=1/f1", "d=a/e=1/f2", "d=b/e=1/f4"); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, root); !slices.Equal(got, []string{".deltaflow-tmp", "d=a"}) {
		t.Errorf("root holds %q, want [.deltaflow-tmp d=a]", got)
	}
	if got := entries(t, filepath.Join(root, "d=a")); !slices.Equal(got, []string{"e=2"}) {
		t.Errorf("d=a holds %q, want [e=2]", got)
	}
	if err := s.Delete(ctx, "d=a/e=2/f3"); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, root); !slices.Equal(got, []string{".deltaflow-tmp"}) {
		t.Errorf("root holds %q, want only the temp dir", got)
	}
	// Delete of a directory's name is a no-op: directories are not objects.
	if err := s.Put(ctx, "dir/f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "dir"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "dir/f"); err != nil {
		t.Errorf("Delete(dir) removed dir/f: %v", err)
	}
}

// Concurrent writers and deleters in one partition directory: a Put must not
// fail because a Delete removed the directory it just created.
func TestLocalPutDeleteRace(t *testing.T) {
	s, _ := newLocal(t)
	ctx := t.Context()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 500 {
			_ = s.Delete(ctx, "p=1/other")
			_ = s.Put(ctx, "p=1/other", []byte("x"))
		}
	}()
	for i := range 500 {
		if err := s.Put(ctx, "p=1/mine", []byte("x")); err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
		if err := s.Delete(ctx, "p=1/mine"); err != nil {
			t.Fatalf("Delete %d: %v", i, err)
		}
	}
	<-done
}

// Open keeps reading the object it opened even if it is replaced.
func TestLocalOpenSnapshot(t *testing.T) {
	s, _ := newLocal(t)
	ctx := t.Context()
	if err := s.Put(ctx, "f", []byte("old!")); err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := s.Put(ctx, "f", []byte("new content")); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 4)
	if _, err := r.ReadAt(p, 0); err != nil || string(p) != "old!" || r.Size() != 4 {
		t.Errorf("ReadAt = %q, %v, size %d; want old!", p, err, r.Size())
	}
}
