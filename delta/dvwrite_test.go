package delta

import (
	"slices"
	"testing"

	"github.com/deltaflow/deltaflow/storage"
)

// A deletion vector written is read back as the same set: sparse and
// dense buckets (array and bitmap containers), row indexes past 2^32,
// repeats; unions hold both sets.
func TestWriteDeletionVectorRoundTrip(t *testing.T) {
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var rows []uint64
	for i := range uint64(10000) { // dense: a bitmap container
		rows = append(rows, i*3)
	}
	rows = append(rows, 1<<32+7, 1<<32+7, 5<<32|65536, 3) // another bucket, a repeat, a second container
	set := NewRowIndexSet(rows)
	dv, err := WriteDeletionVector(t.Context(), store, set)
	if err != nil {
		t.Fatal(err)
	}
	got, err := LoadDeletionVector(t.Context(), store, dv)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Compact(slices.Sorted(slices.Values(rows)))
	if have := slices.Collect(got.Values()); !slices.Equal(have, want) {
		t.Fatalf("read back %d rows, want %d", len(have), len(want))
	}
	if dv.Cardinality != int64(len(want)) || got.Cardinality() != int64(len(want)) {
		t.Errorf("cardinality %d (descriptor) %d (read), want %d", dv.Cardinality, got.Cardinality(), len(want))
	}
	u := got.Union(NewRowIndexSet([]uint64{1, 3, 1 << 40}))
	for _, v := range []uint64{0, 1, 3, 6, 1 << 40, 1<<32 + 7} {
		if !u.Contains(v) {
			t.Errorf("union lacks %d", v)
		}
	}
	if u.Cardinality() != int64(len(want))+2 {
		t.Errorf("union of %d rows, want %d", u.Cardinality(), len(want)+2)
	}
	if _, err := WriteDeletionVector(t.Context(), store, NewRowIndexSet(nil)); err == nil {
		t.Error("an empty deletion vector was written")
	}
}

// Z85 encodes what it decodes.
func TestZ85RoundTrip(t *testing.T) {
	b := []byte{0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B, 0, 0, 0, 0, 255, 255, 255, 255}
	if s := z85Encode(b[:8]); s != "HelloWorld" { // the spec's example
		t.Errorf("z85 of the spec's bytes: %q, want HelloWorld", s)
	}
	got, err := z85Decode(z85Encode(b))
	if err != nil || !slices.Equal(got, b) {
		t.Errorf("round trip: %x, %v", got, err)
	}
}
