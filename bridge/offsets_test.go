package bridge

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

func TestOffsetsRoundTrip(t *testing.T) {
	b, _ := externalBridge(t)
	ctx := t.Context()
	now := time.Date(2026, 6, 22, 9, 15, 30, 0, time.UTC)

	if got, err := b.Offsets(ctx, "sensor.events"); err != nil || len(got) != 0 {
		t.Fatalf("Offsets of an unknown topic = %v, %v; want empty, nil", got, err)
	}
	want := map[int32]OffsetRecord{
		0:  {Offset: 41, Version: 7, Time: now},
		11: {Offset: 9, Version: 7, Time: now},
	}
	for p, rec := range want {
		if err := b.PutOffset(ctx, "sensor.events", p, rec); err != nil {
			t.Fatal(err)
		}
	}
	// A topic whose escaped name shares a prefix must not leak in.
	if err := b.PutOffset(ctx, "sensor", 0, OffsetRecord{Offset: 1}); err != nil {
		t.Fatal(err)
	}
	// Latest wins.
	want[0] = OffsetRecord{Offset: 50, Version: 8, Time: now.Add(time.Minute)}
	if err := b.PutOffset(ctx, "sensor.events", 0, want[0]); err != nil {
		t.Fatal(err)
	}
	got, err := b.Offsets(ctx, "sensor.events")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("Offsets = %v, want %v", got, want)
	}
	for p, w := range want {
		if g := got[p]; g.Offset != w.Offset || g.Version != w.Version || !g.Time.Equal(w.Time) {
			t.Errorf("partition %d = %+v, want %+v", p, g, w)
		}
	}

	// The raw value is the documented JSON, under the documented key.
	e, err := b.kvHandle().Get(ctx, "sensor_events.sensor=2Eevents.11")
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Value()) != `{"offset":9,"next":10,"version":7,"time":"2026-06-22T09:15:30Z"}` {
		t.Errorf("value = %s", e.Value())
	}

	if err := b.DeleteOffset(ctx, "sensor.events", 11); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteOffset(ctx, "sensor.events", 99); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
	if got, _ := b.Offsets(ctx, "sensor.events"); len(got) != 1 {
		t.Errorf("after delete: %v", got)
	}
}

func TestOffsetsMissingBucket(t *testing.T) {
	b, _ := externalBridge(t)
	ctx := t.Context()
	if err := b.js.DeleteKeyValue(ctx, DefaultKVBucket); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Offsets(ctx, "x"); err != nil || len(got) != 0 {
		t.Fatalf("Offsets with no bucket = %v, %v; want empty, nil", got, err)
	}
	// A put recreates the bucket: the mirror heals by itself.
	if err := b.PutOffset(ctx, "x", 1, OffsetRecord{Offset: 3}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Offsets(ctx, "x"); err != nil || got[1].Offset != 3 {
		t.Fatalf("Offsets = %v, %v", got, err)
	}
}

// TestMirrorCatchesUpAfterOutage shuts the server down, records offsets
// meanwhile, restarts the server on the same port and store, and checks the
// mirror writes only the latest record per partition.
func TestMirrorCatchesUpAfterOutage(t *testing.T) {
	opts := testServerOpts(t)
	ns := runServer(t, opts)
	port := ns.Addr().(*net.TCPAddr).Port
	b := newTestBridge(t, Config{URL: ns.ClientURL(), PublishTimeout: 500 * time.Millisecond},
		fastReconnect, withRetry(10*time.Millisecond, 100*time.Millisecond))
	m := b.Mirror()
	rec := func(off int64) OffsetRecord {
		return OffsetRecord{Offset: off, Next: off + 1, Version: off / 10, Time: time.Unix(off, 0).UTC()}
	}

	m.Update("topic", 0, rec(10))
	flush(t, m, 5*time.Second)

	stopEmbedded(ns)
	waitFor(t, "disconnect", func() bool { return !b.Healthy() })
	m.Update("topic", 0, rec(20))
	m.Update("topic", 1, rec(5))
	m.Update("topic", 0, rec(30)) // replaces 20: only the latest is kept
	if n := m.Pending(); n != 2 {
		t.Fatalf("pending = %d, want 2", n)
	}
	short, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := m.Flush(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush during the outage = %v, want deadline exceeded", err)
	}

	restart := testServerOpts(t)
	restart.Port, restart.StoreDir = port, opts.StoreDir
	runServer(t, restart)
	flush(t, m, 10*time.Second)
	got, err := b.Offsets(t.Context(), "topic")
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != rec(30) || got[1] != rec(5) || len(got) != 2 {
		t.Fatalf("after catch-up: %v", got)
	}
}

func TestMirrorKeepsOnlyLatest(t *testing.T) {
	var calls []int64
	block := make(chan struct{})
	put := func(ctx context.Context, _ string, _ int32, r OffsetRecord) error {
		<-block
		calls = append(calls, r.Offset)
		return nil
	}
	m := newOffsetMirror(put, testLogger(t), time.Millisecond, time.Millisecond)
	defer m.close()
	m.Update("t", 0, OffsetRecord{Offset: 1})
	// The writer is blocked on offset 1; these coalesce into one write.
	for i := int64(2); i <= 100; i++ {
		m.Update("t", 0, OffsetRecord{Offset: i})
	}
	close(block)
	flush(t, m, 5*time.Second)
	if len(calls) > 2 || calls[len(calls)-1] != 100 {
		t.Fatalf("writes = %v, want at most [1 100]", calls)
	}
}

func flush(t *testing.T, m *OffsetMirror, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	if err := m.Flush(ctx); err != nil {
		t.Fatalf("mirror flush: %v (pending %d)", err, m.Pending())
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A clean Close writes the offsets still pending in the mirror, so the KV
// equals the log after a SIGTERM, not only after the next start.
func TestCloseFlushesPendingMirrorWrites(t *testing.T) {
	b, ns := externalBridge(t)
	for p := range int32(50) {
		b.Mirror().Update("sensor-events", p, OffsetRecord{Offset: int64(p) + 100, Version: 3})
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	after := newTestBridge(t, Config{URL: ns.ClientURL()})
	got, err := after.Offsets(t.Context(), "sensor-events")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 50 {
		t.Fatalf("after Close the KV holds %d of 50 partitions' offsets", len(got))
	}
	for p, rec := range got {
		if rec.Offset != int64(p)+100 {
			t.Errorf("partition %d = %+v, want offset %d", p, rec, p+100)
		}
	}
}
