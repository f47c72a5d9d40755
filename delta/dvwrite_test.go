package delta

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// sortedRows is rows ascending without repeats, as a set holds them.
func sortedRows(rows ...[]uint64) []uint64 {
	return slices.Compact(slices.Sorted(slices.Values(slices.Concat(rows...))))
}

func seq(from, n uint64) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = from + uint64(i)
	}
	return out
}

// TestWriteDeletionVectorRoundTrip: a written deletion vector reads back
// (LoadDeletionVector, from a DV file at the table root named by the
// descriptor's UUID) as the same set: sparse and dense row indexes (array
// and bitmap containers), several 32-bit buckets up to the largest key,
// rows in any order with repeats.
func TestWriteDeletionVectorRoundTrip(t *testing.T) {
	dir := t.TempDir()
	store := localStore(t, dir)
	for name, rows := range map[string][]uint64{
		"one":    {0},
		"sparse": {9, 3, 3, 1 << 20, 7},
		"dense":  seq(100, 70000),
		"buckets": slices.Concat([]uint64{5<<32 | 65536, 1<<32 + 7, 1<<32 + 7, 3}, seq(2<<32, 5000),
			[]uint64{1<<63 - 1, 0x7FFFFFFF << 32}),
	} {
		t.Run(name, func(t *testing.T) {
			dv, err := WriteDeletionVector(t.Context(), store, NewRowIndexSet(rows))
			if err != nil {
				t.Fatal(err)
			}
			want := sortedRows(rows)
			if dv.StorageType != "u" || dv.Offset == nil || *dv.Offset != 1 || dv.Cardinality != int64(len(want)) || dv.MaxRowIndex != nil {
				t.Errorf("descriptor %+v", dv)
			}
			key, _, err := dv.RelativePath()
			if err != nil || !regexp.MustCompile(`^deletion_vector_[0-9a-f-]{36}\.bin$`).MatchString(key) {
				t.Fatalf("DV file %q, %v: want deletion_vector_<uuid>.bin at the root", key, err)
			}
			if info, err := os.Stat(filepath.Join(dir, key)); err != nil || info.Size() != 1+4+int64(dv.SizeInBytes)+4 {
				t.Errorf("DV file: %v; want 9 bytes around the %d of the data", err, dv.SizeInBytes)
			}
			got, err := LoadDeletionVector(t.Context(), store, dv)
			if err != nil {
				t.Fatal(err)
			}
			if have := slices.Collect(got.Values()); !slices.Equal(have, want) {
				t.Errorf("read back %d rows, want %d", len(have), len(want))
			}
		})
	}
}

// TestWriteDeletionVectorRefuses: no DV file is written for an empty set
// (a file without deleted rows has no deletion vector) or for a row index
// past 2^63-1, which the format cannot hold.
func TestWriteDeletionVectorRefuses(t *testing.T) {
	dir := t.TempDir()
	store := localStore(t, dir)
	for name, set := range map[string]*RowIndexSet{
		"nil":       nil,
		"empty":     NewRowIndexSet(nil),
		"too large": NewRowIndexSet([]uint64{1, 1 << 63}),
	} {
		if dv, err := WriteDeletionVector(t.Context(), store, set); err == nil {
			t.Errorf("%s: written as %+v", name, dv)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("%d files written", len(entries))
	}
}

// TestRowIndexSetUnion: a union holds the rows of both sets, whether
// either is nil, their buckets are disjoint or shared, containers merge
// into bitmaps, or one came from a Spark DV file with run containers; the
// operands are left as they were.
func TestRowIndexSetUnion(t *testing.T) {
	tmp := t.TempDir()
	if err := os.CopyFS(tmp, os.DirFS(filepath.Join("testdata", "spark-features", "dv-vectors"))); err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	spark, err := LoadDeletionVector(t.Context(), localStore(t, tmp), &DeletionVector{StorageType: "u",
		PathOrInlineDv: "3:VO}U7xzHLBDAR7WqBM", Offset: &one, SizeInBytes: 8227, Cardinality: 35769}) // runs
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		a, b *RowIndexSet
	}{
		{"both empty", NewRowIndexSet(nil), NewRowIndexSet(nil)},
		{"disjoint buckets", NewRowIndexSet([]uint64{1, 2}), NewRowIndexSet([]uint64{3 << 32, 4 << 32})},
		{"shared bucket", NewRowIndexSet([]uint64{1, 5, 1<<32 + 1}), NewRowIndexSet([]uint64{5, 6, 1 << 32})},
		{"arrays into a bitmap", NewRowIndexSet(seq(0, 3000)), NewRowIndexSet(seq(2000, 3000))},
		{"with runs", NewRowIndexSet([]uint64{3, 65999, 69001, 70000}), spark},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rowsA, rowsB := slices.Collect(c.a.Values()), slices.Collect(c.b.Values())
			want := sortedRows(rowsA, rowsB)
			for _, u := range []*RowIndexSet{c.a.Union(c.b), c.b.Union(c.a)} {
				if got := slices.Collect(u.Values()); !slices.Equal(got, want) || u.Cardinality() != int64(len(want)) {
					t.Errorf("union of %d rows (cardinality %d), want %d", len(got), u.Cardinality(), len(want))
				}
			}
			if !slices.Equal(slices.Collect(c.a.Values()), rowsA) || !slices.Equal(slices.Collect(c.b.Values()), rowsB) {
				t.Error("an operand changed")
			}
		})
	}
	// No deletion vector yet: LoadDeletionVector's nil set.
	var none *RowIndexSet
	if got := slices.Collect(none.Union(NewRowIndexSet([]uint64{4, 2})).Values()); !slices.Equal(got, []uint64{2, 4}) {
		t.Errorf("nil ∪ {2, 4} = %v", got)
	}
	if got := NewRowIndexSet([]uint64{4}).Union(nil); got.Cardinality() != 1 || !got.Contains(4) {
		t.Errorf("{4} ∪ nil holds %d rows", got.Cardinality())
	}
}

// TestEncodeMatchesSpark: the sets of delta-spark's DV files that have no
// run containers encode to exactly the bytes Spark wrote; those with runs
// encode (without them) to the same rows.
func TestEncodeMatchesSpark(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "spark-features", "dv*", "deletion_vector_*.bin"))
	same := 0
	for _, f := range files {
		file, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for off := 1; off < len(file); {
			size := int(binary.BigEndian.Uint32(file[off:]))
			data := file[off+4 : off+4+size]
			off += 8 + size
			set, err := decodeRoaringArray(data)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			ours := set.appendPortable(nil)
			if bytes.Equal(ours, data) {
				same++
				continue
			}
			back, err := decodeRoaringArray(ours)
			if err != nil || !slices.Equal(slices.Collect(back.Values()), slices.Collect(set.Values())) {
				t.Errorf("%s: our encoding reads back differently: %v", f, err)
			}
		}
	}
	if same != 4 { // three DVs of arrays, one of a bitmap; two have runs
		t.Errorf("%d of Spark's DVs encoded byte for byte, want 4", same)
	}
}

// TestAddWithDeletionVector: the remove and add that give a file a DV are
// as Spark's DELETE writes them: the remove carries the file's metadata
// and its old DV, the add the new DV, dataChange and stats that are no
// longer tight bounds.
func TestAddWithDeletionVector(t *testing.T) {
	one, base, ver := int32(1), int64(10), int64(3)
	old := &DeletionVector{StorageType: "u", PathOrInlineDv: "ab^-aqEH.-t@S}K{vb[*k^", Offset: &one, SizeInBytes: 34, Cardinality: 1}
	next := &DeletionVector{StorageType: "u", PathOrInlineDv: "^-aqEH.-t@S}K{vb[*k^", Offset: &one, SizeInBytes: 36, Cardinality: 2}
	a := &Add{Path: "part=a/f%20.parquet", PartitionValues: map[string]*string{"part": str("a")}, Size: 847,
		ModificationTime: 1700, DataChange: false, Tags: map[string]string{"k": "v"}, DeletionVector: old,
		Stats:     `{"numRecords":12,"minValues":{"id":0,"s":"<&>"},"maxValues":{"id":11,"s":"z"},"nullCount":{"id":0},"tightBounds":true}`,
		BaseRowID: &base, DefaultRowCommitVersion: &ver}
	now := time.UnixMilli(1796283589763)
	rm, add, err := a.WithDeletionVector(next, now)
	if err != nil {
		t.Fatal(err)
	}
	if rm.Path != a.Path || rm.DeletionTime() != now.UnixMilli() || !rm.DataChange || rm.ExtendedFileMetadata == nil || !*rm.ExtendedFileMetadata ||
		rm.Size == nil || *rm.Size != a.Size || rm.DeletionVector != old || *rm.PartitionValues["part"] != "a" ||
		*rm.BaseRowID != base || *rm.DefaultRowCommitVersion != ver || rm.Tags["k"] != "v" {
		t.Errorf("remove %+v", rm)
	}
	if add.Path != a.Path || add.DeletionVector != next || !add.DataChange || add.ModificationTime != a.ModificationTime ||
		add.Size != a.Size || *add.BaseRowID != base || *add.DefaultRowCommitVersion != ver || a.DeletionVector != old {
		t.Errorf("add %+v (from %+v)", add, a)
	}
	st, err := ParseStats(add.Stats)
	if err != nil || st.TightBounds == nil || *st.TightBounds || st.NumRecords != 12 || st.MinValues["s"] != "<&>" || st.NullCount["id"] != 0 {
		t.Errorf("add stats %s (%v)", add.Stats, err)
	}
	line, err := EncodeActions([]Action{{Add: add}})
	if err != nil || !strings.Contains(string(line), `\"tightBounds\":false`) || !strings.Contains(string(line), `<&>`) {
		t.Errorf("add written as %s (%v)", line, err)
	}

	a.Stats = ""
	if _, add, err := a.WithDeletionVector(next, now); err != nil || add.Stats != "" {
		t.Errorf("no stats: %q, %v", add.Stats, err)
	}
	for _, bad := range []string{"{", "null", "[1]"} {
		a.Stats = bad
		if _, _, err := a.WithDeletionVector(next, now); err == nil || !strings.Contains(err.Error(), a.Path) {
			t.Errorf("stats %q: %v", bad, err)
		}
	}
}

// TestZ85Encode: Z85 encodes what z85Decode reads; the spec's examples
// (ZeroMQ's HelloWorld, the UUID of PROTOCOL.md's relative-path DV).
func TestZ85Encode(t *testing.T) {
	if s := z85Encode([]byte{0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B}); s != "HelloWorld" {
		t.Errorf("z85 of the RFC's bytes: %q, want HelloWorld", s)
	}
	id := uuid.MustParse("d2c639aa-8816-431a-aaf6-d3fe2512ff61")
	if s := z85Encode(id[:]); s != "^-aqEH.-t@S}K{vb[*k^" {
		t.Errorf("z85 of the spec's UUID: %q", s)
	}
	b := []byte{0, 0, 0, 0, 255, 255, 255, 255, 1, 2, 3, 4}
	if got, err := z85Decode(z85Encode(b)); err != nil || !slices.Equal(got, b) {
		t.Errorf("round trip: %x, %v", got, err)
	}
}
