package bridge

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deltaflow/deltaflow/internal/bytesize"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/messages/letter"
)

// fillDLQ publishes letters of 4 KiB, one call each, until the DLQ refuses
// one; it returns how many were stored and the refusal.
func fillDLQ(t *testing.T, b *Bridge, limit int) (int, error) {
	t.Helper()
	for i := range limit {
		l := testLetters(1)[0]
		l.Offset = int64(i)
		l.Value = bytes.Repeat([]byte("x"), 4<<10)
		if err := b.PublishDLQ(t.Context(), []letter.DeadLetter{l}); err != nil {
			return i, err
		}
	}
	t.Fatalf("the DLQ took %d letters of 4 KiB and refused none", limit)
	return 0, nil
}

// A full DLQ stream (nats.dlq_max_bytes) refuses new letters, keeps every
// letter it acknowledged, and says so with an error the engine keeps
// retrying (IsFull: neither transient nor permanent); once room is made,
// the same letters are stored.
func TestDLQFullRefusesNewLetters(t *testing.T) {
	b := newTestBridge(t, Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir(), DLQMaxBytes: 64 << 10})
	stored, err := fillDLQ(t, b, 100)
	if stored == 0 || stored > 16 {
		t.Fatalf("%d letters of 4 KiB stored under a 64 KiB bound", stored)
	}
	if !IsFull(err) || IsTransient(err) || IsPermanent(err) {
		t.Fatalf("refusal %v: IsFull %t, IsTransient %t, IsPermanent %t; want full only", err, IsFull(err), IsTransient(err), IsPermanent(err))
	}
	u, err := b.DLQUsage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Nothing acknowledged was dropped to make room (discard new, not old).
	if u.Letters != uint64(stored) || u.MaxBytes != 64<<10 || u.Bytes > 64<<10 || u.Bytes < 60<<10 {
		t.Errorf("usage %+v after %d letters stored; want all of them, near the 64 KiB bound", u, stored)
	}
	s, err := b.js.Stream(t.Context(), b.dlq)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := s.GetMsg(t.Context(), 1); err != nil || m.Header.Get(HeaderOffset) != "0" {
		t.Errorf("the first letter is gone: %v", err)
	}
	// Room made (a human purged the letters they had read): the refused
	// letter is stored.
	if err := s.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := testLetters(1)[0]
	l.Offset = int64(stored)
	if err := b.PublishDLQ(t.Context(), []letter.DeadLetter{l}); err != nil {
		t.Fatalf("after a purge: %v", err)
	}
}

// The JetStream store itself full (insufficient resources) is no
// transient failure either: no retry within seconds cures it.
func TestStoreFullIsNotTransient(t *testing.T) {
	opts := testServerOpts(t)
	opts.JetStreamMaxStore = 256 << 10
	ns := runServer(t, opts)
	js, err := jetstream.New(connect(t, ns.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "UNBOUNDED", Subjects: []string{"u"}}); err != nil {
		t.Fatal(err)
	}
	var full error
	for i := 0; i < 1000 && full == nil; i++ {
		_, full = js.Publish(t.Context(), "u", make([]byte, 4<<10))
	}
	if full == nil {
		t.Fatal("a 256 KiB store took 4 MiB")
	}
	if !IsFull(full) || IsTransient(full) || IsPermanent(full) {
		t.Errorf("store full %v: IsFull %t, IsTransient %t, IsPermanent %t; want full only", full, IsFull(full), IsTransient(full), IsPermanent(full))
	}
}

// The embedded server's JetStream store is bounded by the DLQ's bound plus
// a little for the KV bucket, not by the free disk (nats-server's default
// takes 75% of it); a DLQ bound the store cannot hold fails New, naming
// the key.
func TestEmbeddedStoreIsBounded(t *testing.T) {
	b := newTestBridge(t, Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir(), DLQMaxBytes: 1 << 20})
	js, err := jetstream.New(connect(t, b.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "BIG", Subjects: []string{"big"}, MaxBytes: 1 << 30})
	if !IsFull(err) {
		t.Errorf("a 1 GiB stream on the embedded server: %v, want no room", err)
	}

	opts := testServerOpts(t)
	opts.JetStreamMaxStore = 1 << 20
	ns := runServer(t, opts)
	_, err = New(t.Context(), Config{URL: ns.ClientURL(), DLQMaxBytes: 2 << 20}, nil, WithTable(testTable))
	if err == nil || !IsFull(err) || !strings.Contains(err.Error(), "nats.dlq_max_bytes ("+bytesize.Size(2<<20).String()+")") {
		t.Errorf("a 2 MiB DLQ on a 1 MiB store: %v, want an error naming nats.dlq_max_bytes", err)
	}
}

// storedOffsets returns the offset of every letter the DLQ stream holds,
// with how often each is there.
func storedOffsets(t *testing.T, b *Bridge) map[string]int {
	t.Helper()
	s, err := b.js.Stream(t.Context(), b.dlq)
	if err != nil {
		t.Fatal(err)
	}
	st := s.CachedInfo().State
	seen := map[string]int{}
	for seq := st.FirstSeq; st.Msgs > 0 && seq <= st.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatalf("letter %d: %v", seq, err)
		}
		seen[m.Header.Get(HeaderOffset)]++
	}
	return seen
}

// checkStoreFailed fails t unless err is a failed store's: full (neither
// transient nor permanent), ErrStoreFailed, saying where and what to do.
func checkStoreFailed(t *testing.T, err error, says ...string) {
	t.Helper()
	if !IsFull(err) || !errors.Is(err, ErrStoreFailed) || IsTransient(err) || IsPermanent(err) {
		t.Fatalf("refusal %v: IsFull %t, ErrStoreFailed %t, IsTransient %t, IsPermanent %t; want a failed store, full only",
			err, IsFull(err), errors.Is(err, ErrStoreFailed), IsTransient(err), IsPermanent(err))
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("refusal %q does not say %q", err, s)
		}
	}
}

// afterFill returns the letter following the n stored by fillDLQ.
func afterFill(n int) []letter.DeadLetter {
	l := testLetters(1)[0]
	l.Offset = int64(n)
	l.Value = bytes.Repeat([]byte("x"), 4<<10)
	return []letter.DeadLetter{l}
}

// The embedded server's disk full (nats.store_dir on a 3 MiB tmpfs): a
// write of the DLQ stream's store fails, and nats-server then drops every
// write to the stream without an answer, even once the disk has room,
// until the store is opened again. PublishDLQ says so (IsFull, naming
// nats.store_dir) rather than timing out, reopens the store each time, and
// once the disk has room stores the letters: no restart, every letter
// once.
func TestEmbeddedStoreFailureHeals(t *testing.T) {
	disk := testenv.NewTmpfs(t, 3<<20)
	b := newTestBridge(t, Config{Listen: "127.0.0.1:-1", StoreDir: disk.Dir, PublishTimeout: time.Second}, fastReconnect)
	stored, err := fillDLQ(t, b, 2000)
	checkStoreFailed(t, err, "nats.store_dir", disk.Dir)
	// Still no room: refused the same way (the reopened store failed
	// again), nothing stored.
	checkStoreFailed(t, b.PublishDLQ(t.Context(), afterFill(stored)), "nats.store_dir")

	disk.Resize(64 << 20)
	if err := b.PublishDLQ(t.Context(), afterFill(stored)); err != nil {
		t.Fatalf("once the disk has room: %v", err)
	}
	seen := storedOffsets(t, b)
	if len(seen) != stored+1 {
		t.Errorf("the stream holds %d distinct letters, want the %d stored before the disk filled and the one after", len(seen), stored+1)
	}
	for off, n := range seen {
		if n != 1 {
			t.Errorf("letter at offset %s stored %d times", off, n)
		}
	}
}

// An external server's disk full: the same failure, which deltaflow can
// tell but not cure (it cannot reopen another process's store): PublishDLQ
// says it is full and that nats-server needs a restart; once room is made
// and the server restarted, the same bridge, reconnected, stores the
// letters.
func TestExternalStoreFailureHealsAfterServerRestart(t *testing.T) {
	disk := testenv.NewTmpfs(t, 3<<20)
	// The server's store bound is larger than its disk, as when others
	// share the disk.
	srv := testenv.NewNATSServer(t, disk.Dir, 1<<30)
	b := newTestBridge(t, Config{URL: srv.URL, PublishTimeout: time.Second}, fastReconnect)
	stored, err := fillDLQ(t, b, 2000)
	checkStoreFailed(t, err, "restart nats-server", srv.URL)

	disk.Resize(64 << 20)
	srv.Restart()
	var last error
	for range 30 { // reconnecting (fastReconnect)
		if last = b.PublishDLQ(t.Context(), afterFill(stored)); last == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last != nil {
		t.Fatalf("after room was made and the server restarted: %v", last)
	}
	seen := storedOffsets(t, b)
	if len(seen) != stored+1 {
		t.Errorf("the stream holds %d distinct letters, want %d", len(seen), stored+1)
	}
	for off, n := range seen {
		if n != 1 {
			t.Errorf("letter at offset %s stored %d times", off, n)
		}
	}
}

// nats-server turns JetStream off after some store failures (a store it
// may not write): the embedded server's is turned on again, and the
// letters stored, without a restart.
func TestEmbeddedJetStreamOffIsRestarted(t *testing.T) {
	b := newTestBridge(t, Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir(), PublishTimeout: time.Second}, fastReconnect)
	if err := b.ns.(*embedded).server().ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	letters := testLetters(3)
	checkStoreFailed(t, b.PublishDLQ(t.Context(), letters), "JetStream was off", "nats.store_dir")
	if err := b.PublishDLQ(t.Context(), letters); err != nil {
		t.Fatalf("after JetStream was turned on again: %v", err)
	}
	if seen := storedOffsets(t, b); len(seen) != len(letters) {
		t.Errorf("the stream holds %v, want the %d letters once each", seen, len(letters))
	}
}
