package bridge

import (
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"
)

// A table's deleted keys round-trip through their own bucket, whose max
// age is the retention, readable with `nats kv get`; a key never deleted
// has no sequence; a bucket deleted by hand is created again.
func TestDeletedKeys(t *testing.T) {
	b, _ := externalBridge(t)
	ctx := t.Context()
	d, err := b.DeletedKeys(ctx, 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for i := range 100 { // more than deletedKeysInFlight
		want[strconv.Itoa(i)] = int64(i * 10)
	}
	want["sYWI.-7"] = 1 << 40
	if err := d.Remember(ctx, want); err != nil {
		t.Fatal(err)
	}
	keys := append(slices.Collect(maps.Keys(want)), "1000")
	got, err := d.Sequences(ctx, keys)
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("Sequences = %v, %v; want %v", got, err, want)
	}
	kv, err := b.js.KeyValue(ctx, "deltaflow_deleted_SENSOR_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil || st.TTL() != 48*time.Hour {
		t.Errorf("bucket status %v, %v; want a 48h max age", st, err)
	}
	if e, err := kv.Get(ctx, "42"); err != nil || string(e.Value()) != "420" {
		t.Errorf("key 42: %v; want 420", err)
	}

	if err := b.js.DeleteKeyValue(ctx, "deltaflow_deleted_SENSOR_EVENTS"); err != nil {
		t.Fatal(err)
	}
	if err := d.Remember(ctx, map[string]int64{"5": 99}); err != nil {
		t.Fatalf("Remember after the bucket was deleted: %v", err)
	}
	if got, err := d.Sequences(ctx, []string{"5", "6"}); err != nil || !maps.Equal(got, map[string]int64{"5": 99}) {
		t.Errorf("after the bucket came back: %v, %v", got, err)
	}
}
