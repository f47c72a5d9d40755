// Package storagetest is the conformance suite for storage.Store: every
// implementation runs it, so they all mean the same thing by "atomic",
// "sorted" and "not found".
package storagetest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/storage"
)

// Run runs the suite. newStore must return an empty store for each call;
// subtests run in parallel.
func Run(t *testing.T, newStore func(t *testing.T) storage.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s storage.Store)
	}{
		{"GetPut", testGetPut},
		{"PutIfAbsent", testPutIfAbsent},
		{"PutIfAbsentRace", testPutIfAbsentRace},
		{"List", testList},
		{"Stat", testStat},
		{"OpenReadAt", testOpenReadAt},
		{"PutStreamLarge", testPutStreamLarge},
		{"PutStreamShort", testPutStreamShort},
		{"PutStreamInvisibleUntilDone", testPutStreamInvisible},
		{"Delete", testDelete},
		{"NotExist", testNotExist},
		{"InvalidKeys", testInvalidKeys},
		{"URI", testURI},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newStore(t))
		})
	}
}

func put(t *testing.T, s storage.Store, key, data string) {
	t.Helper()
	if err := s.Put(t.Context(), key, []byte(data)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func wantContent(t *testing.T, s storage.Store, key, want string) {
	t.Helper()
	got, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if string(got) != want {
		t.Fatalf("Get(%q) = %q, want %q", key, got, want)
	}
}

func wantNotExist(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("%s: err = %v, want ErrNotExist", what, err)
	}
}

func testGetPut(t *testing.T, s storage.Store) {
	ctx := t.Context()
	_, err := s.Get(ctx, "a/b.json")
	wantNotExist(t, "Get before Put", err)

	buf := []byte("first version")
	if err := s.Put(ctx, "a/b.json", buf); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'X' // the store must have copied it
	wantContent(t, s, "a/b.json", "first version")

	got, _ := s.Get(ctx, "a/b.json")
	got[0] = 'Y' // and hand out copies
	wantContent(t, s, "a/b.json", "first version")

	put(t, s, "a/b.json", "v2") // overwrite with shorter content
	wantContent(t, s, "a/b.json", "v2")

	put(t, s, "empty", "")
	wantContent(t, s, "empty", "")

	deep := "device_type=smart plug/event_date=2026-06-22/part-00000-é.snappy.parquet"
	put(t, s, deep, "parquet")
	wantContent(t, s, deep, "parquet")
}

func testPutIfAbsent(t *testing.T, s storage.Store) {
	ctx := t.Context()
	key := "_delta_log/00000000000000000000.json"
	if err := s.PutIfAbsent(ctx, key, []byte("winner")); err != nil {
		t.Fatalf("first PutIfAbsent: %v", err)
	}
	err := s.PutIfAbsent(ctx, key, []byte("loser"))
	if !errors.Is(err, storage.ErrExist) {
		t.Fatalf("second PutIfAbsent: err = %v, want ErrExist", err)
	}
	wantContent(t, s, key, "winner")

	put(t, s, "by-put", "x")
	if err := s.PutIfAbsent(ctx, "by-put", []byte("y")); !errors.Is(err, storage.ErrExist) {
		t.Fatalf("PutIfAbsent over Put: err = %v, want ErrExist", err)
	}
	wantContent(t, s, "by-put", "x")

	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, key, []byte("again")); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
	wantContent(t, s, key, "again")
}

// testPutIfAbsentRace is the Delta commit protocol in miniature: writers race
// for one version; exactly one wins, and its content is what is stored.
func testPutIfAbsentRace(t *testing.T, s storage.Store) {
	const writers = 16
	ctx := t.Context()
	for round := range 3 {
		key := fmt.Sprintf("_delta_log/%020d.json", round)
		errs := make([]error, writers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range writers {
			wg.Go(func() {
				<-start
				errs[i] = s.PutIfAbsent(ctx, key, fmt.Appendf(nil, "writer %d", i))
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both won", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, storage.ErrExist):
				t.Fatalf("round %d: writer %d: err = %v, want nil or ErrExist", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won", round)
		}
		wantContent(t, s, key, fmt.Sprintf("writer %d", winner))
	}
}

func keys(infos []storage.ObjectInfo) []string {
	out := []string{}
	for _, i := range infos {
		out = append(out, i.Key)
	}
	return out
}

func testList(t *testing.T, s storage.Store) {
	ctx := t.Context()
	all := []string{
		"_delta_log/00000000000000000000.json",
		"_delta_log/00000000000000000001.json",
		"_delta_log/00000000000000000010.checkpoint.parquet",
		"_delta_log/00000000000000000010.json",
		"_delta_log/_last_checkpoint",
		"a.txt", // '.' sorts before '/': byte order, not walk order
		"a/b",
		"a/c/d",
		"ab",
		"device_type=door/event_date=2026-06-22/part-1.parquet",
		"device_type=smart_plug/event_date=2026-06-22/part-0.parquet",
	}
	for i, k := range slices.Backward(all) { // insertion order must not matter; size = index
		put(t, s, k, strings.Repeat("x", i))
	}
	list := func(prefix, startAfter string) []string {
		t.Helper()
		infos, err := s.List(ctx, prefix, startAfter)
		if err != nil {
			t.Fatalf("List(%q, %q): %v", prefix, startAfter, err)
		}
		return keys(infos)
	}
	filter := func(pred func(string) bool) []string {
		out := []string{}
		for _, k := range all {
			if pred(k) {
				out = append(out, k)
			}
		}
		return out
	}
	for _, tc := range []struct{ prefix, startAfter string }{
		{"", ""},
		{"_delta_log/", ""},
		{"_delta_log/0000", ""}, // partial last segment
		{"_delta_log/", "_delta_log/00000000000000000001.json"}, // the log tail
		{"_delta_log/", "_delta_log/00000000000000000005"},      // startAfter need not exist
		{"_delta_log/", "_delta_log/00000000000000000010.json"}, // only _last_checkpoint
		{"a", ""},                       // a.txt, a/..., ab
		{"a/", ""},                      // recursive
		{"a/c", ""},                     // a directory without '/'
		{"device_type=smart_plug/", ""}, // partition directory
		{"nothing/", ""},                // missing directory: empty
		{"a.txt/x/", ""},                // below an object: empty
		{"", "zzz"},                     // past the end
		{"_delta_log/", "_"},            // startAfter before prefix
	} {
		want := filter(func(k string) bool { return strings.HasPrefix(k, tc.prefix) && k > tc.startAfter })
		if got := list(tc.prefix, tc.startAfter); !slices.Equal(got, want) {
			t.Errorf("List(%q, %q) =\n  %q\nwant\n  %q", tc.prefix, tc.startAfter, got, want)
		}
	}
	infos, err := s.List(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if want := int64(slices.Index(all, info.Key)); info.Size != want {
			t.Errorf("List: %s size %d, want %d", info.Key, info.Size, want)
		}
		if info.ModTime.IsZero() || time.Since(info.ModTime) > time.Hour {
			t.Errorf("List: %s ModTime %v, want about now", info.Key, info.ModTime)
		}
	}
}

func testStat(t *testing.T, s storage.Store) {
	ctx := t.Context()
	put(t, s, "dir/file", "12345")
	put(t, s, "dir/empty", "")
	for key, size := range map[string]int64{"dir/file": 5, "dir/empty": 0} {
		info, err := s.Stat(ctx, key)
		if err != nil {
			t.Fatalf("Stat(%q): %v", key, err)
		}
		if info.Key != key || info.Size != size || info.ModTime.IsZero() {
			t.Errorf("Stat(%q) = %+v, want size %d", key, info, size)
		}
	}
}

func testOpenReadAt(t *testing.T, s storage.Store) {
	ctx := t.Context()
	data := make([]byte, 100_000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := s.Put(ctx, "f.parquet", data); err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(ctx, "f.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Size() != int64(len(data)) {
		t.Fatalf("Size() = %d, want %d", r.Size(), len(data))
	}
	// Parquet readers read the footer, then column chunks, concurrently.
	var wg sync.WaitGroup
	for _, off := range []int64{int64(len(data)) - 8, 0, 4096, 50_000, 99_000} {
		wg.Go(func() {
			p := make([]byte, 8)
			n, err := r.ReadAt(p, off)
			if n != len(p) || (err != nil && err != io.EOF) {
				t.Errorf("ReadAt(8, %d) = %d, %v", off, n, err)
				return
			}
			if !bytes.Equal(p, data[off:off+8]) {
				t.Errorf("ReadAt(8, %d) = %x, want %x", off, p, data[off:off+8])
			}
		})
	}
	wg.Wait()
	// Reading across the end returns what is there and io.EOF.
	p := make([]byte, 20)
	n, err := r.ReadAt(p, int64(len(data))-10)
	if n != 10 || err != io.EOF || !bytes.Equal(p[:n], data[len(data)-10:]) {
		t.Errorf("ReadAt across end = %d, %v; want 10, io.EOF", n, err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// onlyReader hides any ReaderAt/Seeker so implementations must stream.
type onlyReader struct{ io.Reader }

func testPutStreamLarge(t *testing.T, s storage.Store) {
	if testing.Short() {
		t.Skip("large object: skipped in -short mode")
	}
	ctx := t.Context()
	const size = 21<<20 + 12345 // > one 16 MiB part, not part-aligned
	src := rand.NewChaCha8([32]byte{1})
	h := sha256.New()
	r := io.TeeReader(io.LimitReader(src, size), h)
	if err := s.PutStream(ctx, "big/part-0.parquet", onlyReader{r}, -1); err != nil {
		t.Fatalf("PutStream: %v", err)
	}
	want := h.Sum(nil)
	info, err := s.Stat(ctx, "big/part-0.parquet")
	if err != nil || info.Size != size {
		t.Fatalf("Stat = %+v, %v; want size %d", info, err, size)
	}
	got, err := s.Get(ctx, "big/part-0.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(got); !bytes.Equal(sum[:], want) {
		t.Fatalf("content differs after PutStream (len %d)", len(got))
	}
	// Known size, small: replaces the big one.
	if err := s.PutStream(ctx, "big/part-0.parquet", onlyReader{strings.NewReader("small")}, 5); err != nil {
		t.Fatal(err)
	}
	wantContent(t, s, "big/part-0.parquet", "small")
}

func testPutStreamShort(t *testing.T, s storage.Store) {
	ctx := t.Context()
	err := s.PutStream(ctx, "short", onlyReader{strings.NewReader("abc")}, 10)
	if err == nil {
		t.Fatal("PutStream with a stream shorter than size: no error")
	}
	_, err = s.Stat(ctx, "short")
	wantNotExist(t, "Stat after failed PutStream", err)
}

// blockingReader delivers head, then waits for release before EOF.
type blockingReader struct {
	head    []byte
	sent    chan struct{}
	release chan struct{}
}

func (b *blockingReader) Read(p []byte) (int, error) {
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		if len(b.head) == 0 {
			close(b.sent)
		}
		return n, nil
	}
	<-b.release
	return 0, io.EOF
}

func testPutStreamInvisible(t *testing.T, s storage.Store) {
	ctx := t.Context()
	r := &blockingReader{head: []byte("partial"), sent: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- s.PutStream(ctx, "p/obj", r, -1) }()
	<-r.sent
	if _, err := s.Stat(ctx, "p/obj"); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("Stat during PutStream: err = %v, want ErrNotExist", err)
	}
	if infos, err := s.List(ctx, "", ""); err != nil || len(infos) != 0 {
		t.Errorf("List during PutStream = %v, %v; want nothing", keys(infos), err)
	}
	close(r.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantContent(t, s, "p/obj", "partial")
}

func testDelete(t *testing.T, s storage.Store) {
	ctx := t.Context()
	var batch []string
	for i := range 25 {
		k := fmt.Sprintf("part=%d/f%02d", i%3, i)
		put(t, s, k, "x")
		batch = append(batch, k)
	}
	put(t, s, "keep/me", "y")
	if err := s.Delete(ctx); err != nil {
		t.Fatalf("Delete(): %v", err)
	}
	if err := s.Delete(ctx, append(batch, "missing", "part=9/missing")...); err != nil {
		t.Fatalf("Delete(batch with missing keys): %v", err)
	}
	infos, err := s.List(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(infos); !slices.Equal(got, []string{"keep/me"}) {
		t.Fatalf("after Delete, List = %q, want [keep/me]", got)
	}
	_, err = s.Get(ctx, batch[0])
	wantNotExist(t, "Get after Delete", err)
	if err := s.Delete(ctx, batch[0]); err != nil {
		t.Fatalf("Delete twice: %v", err)
	}
	put(t, s, batch[0], "back") // the directory may be gone; Put recreates it
	wantContent(t, s, batch[0], "back")
}

func testNotExist(t *testing.T, s storage.Store) {
	ctx := t.Context()
	put(t, s, "dir/sub/file", "x")
	put(t, s, "file", "x")
	// Directories are not objects, and nothing lives below an object.
	for _, key := range []string{"missing", "dir", "dir/sub", "dir/sub/missing", "file/below"} {
		_, err := s.Get(ctx, key)
		wantNotExist(t, "Get("+key+")", err)
		_, err = s.Stat(ctx, key)
		wantNotExist(t, "Stat("+key+")", err)
		r, err := s.Open(ctx, key)
		if err == nil {
			r.Close()
		}
		wantNotExist(t, "Open("+key+")", err)
	}
}

func testInvalidKeys(t *testing.T, s storage.Store) {
	ctx := t.Context()
	put(t, s, "ok", "x")
	for _, key := range []string{"", "/abs", "a//b", "a/", "./a", "a/./b", "..", "../escape", "a/../../escape", "a/.."} {
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, storage.ErrInvalidKey) {
				t.Errorf("%s(%q): err = %v, want ErrInvalidKey", op, key, err)
			}
		}
		_, err := s.Get(ctx, key)
		check("Get", err)
		_, err = s.Open(ctx, key)
		check("Open", err)
		_, err = s.Stat(ctx, key)
		check("Stat", err)
		check("Put", s.Put(ctx, key, []byte("x")))
		check("PutIfAbsent", s.PutIfAbsent(ctx, key, []byte("x")))
		check("PutStream", s.PutStream(ctx, key, strings.NewReader("x"), 1))
		check("Delete", s.Delete(ctx, key))
	}
	for _, prefix := range []string{"/", "/abs", "../", "a/../", "a//"} {
		if _, err := s.List(ctx, prefix, ""); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("List(%q): err = %v, want ErrInvalidKey", prefix, err)
		}
	}
	// Nothing was written by the rejected calls.
	infos, err := s.List(ctx, "", "")
	if err != nil || !slices.Equal(keys(infos), []string{"ok"}) {
		t.Errorf("List after invalid writes = %q, %v; want [ok]", keys(infos), err)
	}
}

func testURI(t *testing.T, s storage.Store) {
	uri := s.URI()
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok || scheme == "" || rest == "" {
		t.Fatalf("URI() = %q, want scheme://root", uri)
	}
	if strings.Contains(rest, "@") {
		t.Errorf("URI() = %q must not hold credentials", uri)
	}
}
