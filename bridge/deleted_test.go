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
// has no sequence; a table made again under its name starts with none; a
// bucket deleted by hand is created again.
func TestDeletedKeys(t *testing.T) {
	b, _ := externalBridge(t)
	ctx := t.Context()
	d, err := b.DeletedKeys(ctx, "9f0e1d2c-aaaa-bbbb", 48*time.Hour, func(dst []byte, key string) []byte { return append(dst, key...) })
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
	kv, err := b.js.KeyValue(ctx, "deltaflow_deleted_SENSOR_EVENTS_9f0e1d2c")
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

	// The table made again (a new Delta id) remembers none of these.
	again, err := b.DeletedKeys(ctx, "77aa0000-cccc", time.Hour, func(dst []byte, key string) []byte { return append(dst, key...) })
	if err != nil {
		t.Fatal(err)
	}
	if got, err := again.Sequences(ctx, keys); err != nil || len(got) != 0 {
		t.Errorf("a new table's deleted keys: %v, %v; want none", got, err)
	}

	if err := b.js.DeleteKeyValue(ctx, "deltaflow_deleted_SENSOR_EVENTS_9f0e1d2c"); err != nil {
		t.Fatal(err)
	}
	if err := d.Remember(ctx, map[string]int64{"5": 99}); err != nil {
		t.Fatalf("Remember after the bucket was deleted: %v", err)
	}
	if got, err := d.Sequences(ctx, []string{"5", "6"}); err != nil || !maps.Equal(got, map[string]int64{"5": 99}) {
		t.Errorf("after the bucket came back: %v, %v", got, err)
	}
}
