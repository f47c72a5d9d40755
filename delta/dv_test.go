package delta

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/deltaflow/deltaflow/delta/internal/roaring"
	"github.com/deltaflow/deltaflow/storage"
)

func members(t *testing.T, s *RowIndexSet, upTo uint64) []uint64 {
	t.Helper()
	var out []uint64
	for i := range upTo {
		if s.Contains(i) {
			out = append(out, i)
		}
	}
	return out
}

// TestDeletionVectorProtocolExamples: the descriptors of PROTOCOL.md
// "Deletion Vector Descriptor Schema" decode as the spec says (its inline
// example is in the native format, magic 1681511376).
func TestDeletionVectorProtocolExamples(t *testing.T) {
	ctx := t.Context()
	store := storage.NewMem()
	inline := &DeletionVector{StorageType: "i", PathOrInlineDv: "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", SizeInBytes: 40, Cardinality: 6}
	set, err := LoadDeletionVector(ctx, store, inline)
	if err != nil {
		t.Fatal(err)
	}
	if got := members(t, set, 100); !slices.Equal(got, []uint64{3, 4, 7, 11, 18, 29}) || set.Cardinality() != 6 {
		t.Errorf("inline example: rows %v (cardinality %d), want 3, 4, 7, 11, 18, 29", got, set.Cardinality())
	}
	if p, ok, err := inline.RelativePath(); ok || err != nil || p != "" {
		t.Errorf("inline RelativePath = %q, %v, %v", p, ok, err)
	}

	four := int32(4)
	rel := &DeletionVector{StorageType: "u", PathOrInlineDv: "ab^-aqEH.-t@S}K{vb[*k^", Offset: &four, SizeInBytes: 40, Cardinality: 6}
	if p, ok, err := rel.RelativePath(); !ok || err != nil || p != "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin" {
		t.Errorf("relative example: RelativePath = %q, %v, %v", p, ok, err)
	}
	abs := &DeletionVector{StorageType: "p", PathOrInlineDv: "s3://mytable/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin", Offset: &four, SizeInBytes: 40, Cardinality: 6}
	if p, ok, err := abs.RelativePath(); !ok || err != nil || p != abs.PathOrInlineDv {
		t.Errorf("absolute example: RelativePath = %q, %v, %v", p, ok, err)
	}

	// The inline example's bytes stored in a DV file (after 3 bytes of
	// padding, at offset 4) under both names read back the same.
	data, _ := z85Decode(inline.PathOrInlineDv)
	file := []byte{1, 0, 0, 0}
	file = binary.BigEndian.AppendUint32(file, 40)
	file = append(file, data...)
	file = binary.BigEndian.AppendUint32(file, crc32.ChecksumIEEE(data))
	store.Put(ctx, "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin", file)
	for _, dv := range []*DeletionVector{rel, {StorageType: "p", PathOrInlineDv: store.URI() + "/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin", Offset: &four, SizeInBytes: 40, Cardinality: 6}} {
		set, err := LoadDeletionVector(ctx, store, dv)
		if err != nil {
			t.Fatalf("%s: %v", dv.StorageType, err)
		}
		if got := members(t, set, 100); !slices.Equal(got, []uint64{3, 4, 7, 11, 18, 29}) {
			t.Errorf("%s: rows %v", dv.StorageType, got)
		}
	}
	// A flipped byte fails the checksum; a file outside the table is refused.
	file[10] ^= 1
	store.Put(ctx, "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin", file)
	if _, err := LoadDeletionVector(ctx, store, rel); !errors.Is(err, ErrCorruptDeletionVector) {
		t.Errorf("corrupt file: got %v", err)
	}
	if _, err := LoadDeletionVector(ctx, store, abs); err == nil {
		t.Error("a DV file outside the table root was read")
	}
}

// roaringBytes hand-assembles a RoaringBitmapArray from the spec's layout:
// one bucket (key high) holding the given 32-bit portable bitmap.
func roaringArray(high uint32, bitmap []byte) []byte {
	out := binary.LittleEndian.AppendUint32(nil, dvMagic)
	out = binary.LittleEndian.AppendUint64(out, 1)
	out = binary.LittleEndian.AppendUint32(out, high)
	return append(out, bitmap...)
}

func le16(v ...uint16) []byte {
	var out []byte
	for _, x := range v {
		out = binary.LittleEndian.AppendUint16(out, x)
	}
	return out
}

// TestRoaringContainers: array, bitmap and run containers, with and without
// the offset header, and 64-bit keys.
func TestRoaringContainers(t *testing.T) {
	// No-run cookie, two containers: an array (key 0: 5, 9) and a bitmap
	// (key 1: every even low value, 32768 of them).
	var noRuns []byte
	noRuns = binary.LittleEndian.AppendUint32(noRuns, roaring.CookieNoRuns)
	noRuns = binary.LittleEndian.AppendUint32(noRuns, 2)
	noRuns = append(noRuns, le16(0, 1, 1, 32767)...)
	noRuns = append(noRuns, make([]byte, 8)...) // offsets
	noRuns = append(noRuns, le16(5, 9)...)
	for range 1024 {
		noRuns = binary.LittleEndian.AppendUint64(noRuns, 0x5555555555555555)
	}
	set, err := decodeRoaringArray(roaringArray(0, noRuns))
	if err != nil {
		t.Fatal(err)
	}
	if set.Cardinality() != 2+32768 || !set.Contains(5) || !set.Contains(9) || set.Contains(6) ||
		!set.Contains(1<<16) || set.Contains(1<<16+1) || !set.Contains(1<<16+65534) || set.Contains(2<<16) {
		t.Errorf("no-run bitmap decoded wrong (cardinality %d)", set.Cardinality())
	}

	// Run cookie, one run container (key 3: 10..19 and 100..100), no offsets.
	var runs []byte
	runs = binary.LittleEndian.AppendUint32(runs, roaring.CookieRuns|0<<16)
	runs = append(runs, 0x01) // container 0 is a run container
	runs = append(runs, le16(3, 10)...)
	runs = append(runs, le16(2, 10, 9, 100, 0)...)
	set, err = decodeRoaringArray(roaringArray(7, runs))
	if err != nil {
		t.Fatal(err)
	}
	base := uint64(7)<<32 | 3<<16
	if set.Cardinality() != 11 || !set.Contains(base+10) || !set.Contains(base+19) || set.Contains(base+20) ||
		!set.Contains(base+100) || set.Contains(base+9) || set.Contains(3<<16+10) {
		t.Errorf("run bitmap decoded wrong (cardinality %d)", set.Cardinality())
	}

	for name, bad := range map[string][]byte{
		"bad magic":      append([]byte{1, 2, 3, 4}, roaringArray(0, noRuns)[4:]...),
		"truncated":      roaringArray(0, noRuns[:len(noRuns)-1]),
		"trailing bytes": append(roaringArray(0, runs), 0),
		"negative key":   roaringArray(1<<31, runs),
	} {
		if _, err := decodeRoaringArray(bad); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// TestSparkDeletionVectorFiles: DV files delta-spark wrote for a 70000-row
// file (a bitmap container, then run containers) decode to exactly the
// rows its DELETEs removed. Each DELETE's DV holds all rows deleted so far.
func TestSparkDeletionVectorFiles(t *testing.T) {
	dir := filepath.Join("testdata", "spark-features", "dv-vectors")
	data, err := os.ReadFile(filepath.Join(dir, "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vv struct {
		Rows    uint64 `json:"rows"`
		Vectors []struct {
			Deleted        string          `json:"deleted"`
			DeletionVector *DeletionVector `json:"deletionVector"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(data, &vv); err != nil {
		t.Fatal(err)
	}
	predicates := map[string]func(id uint64) bool{
		"id % 2 = 0 AND id < 65536":  func(id uint64) bool { return id%2 == 0 && id < 65536 },
		"id BETWEEN 66000 AND 69000": func(id uint64) bool { return id >= 66000 && id <= 69000 },
		"id IN (3, 65537)":           func(id uint64) bool { return id == 3 || id == 65537 },
	}
	tmp := t.TempDir() // a Local store writes below its root
	if err := os.CopyFS(tmp, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	store := localStore(t, tmp)
	var deleted []func(uint64) bool
	for _, v := range vv.Vectors {
		p, ok := predicates[v.Deleted]
		if !ok {
			t.Fatalf("unknown predicate %q", v.Deleted)
		}
		deleted = append(deleted, p)
		set, err := LoadDeletionVector(t.Context(), store, v.DeletionVector)
		if err != nil {
			t.Fatalf("%s: %v", v.Deleted, err)
		}
		bad := 0
		for id := range vv.Rows + 10 {
			want := false
			for _, p := range deleted {
				want = want || p(id) && id < vv.Rows
			}
			if set.Contains(id) != want {
				bad++
			}
		}
		if bad > 0 || set.Cardinality() != v.DeletionVector.Cardinality {
			t.Errorf("after DELETE %s: %d rows wrong, cardinality %d", v.Deleted, bad, set.Cardinality())
		}
	}
}
