package storage

import (
	"context"
	"strings"
	"testing"
)

// TestKeyLimits: a local store's limits count its root, so a key within
// them is stored and one past the segment limit is refused with an error
// IsKeyRejected (and IsPermanent) recognises.
func TestKeyLimits(t *testing.T) {
	l, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lim := Limits(l)
	if lim.Segment != 255 || lim.Key != min(1024, 4095-len(l.Root())-1) {
		t.Fatalf("local limits %+v", lim)
	}
	if got := Limits(NewFaulty(l)); got != lim {
		t.Errorf("faulty store limits %+v, want the wrapped store's %+v", got, lim)
	}
	if got := Limits(NewMem()); got != PortableLimits {
		t.Errorf("memory store limits %+v, want %+v", got, PortableLimits)
	}
	s3 := &S3{prefix: "warehouse/sensor_events/"}
	if got := Limits(s3); got.Key != 1024-len("warehouse/sensor_events/") || got.Segment != 255 {
		t.Errorf("s3 limits %+v", got)
	}
	ctx := context.Background()
	if err := l.Put(ctx, "d="+strings.Repeat("x", 253)+"/f", []byte("ok")); err != nil {
		t.Errorf("a 255-byte segment: %v", err)
	}
	err = l.Put(ctx, "d="+strings.Repeat("x", 254)+"/f", []byte("no"))
	if !IsKeyRejected(err) || !IsPermanent(err) {
		t.Errorf("a 256-byte segment: %v; want a rejected key", err)
	}
	if IsKeyRejected(ErrInjected) || IsKeyRejected(nil) {
		t.Error("IsKeyRejected accepts an unrelated error")
	}
}
