package delta

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"iter"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/deltaflow/deltaflow/delta/internal/jsonenc"
	"github.com/deltaflow/deltaflow/delta/internal/roaring"
	"github.com/deltaflow/deltaflow/storage"
)

// Writing deletion vectors, the reverse of dv.go: a set of row indexes is
// written as a DV file of its own in the portable RoaringBitmapArray format
// Spark writes, and a file gets it through a remove and an add.

// NewRowIndexSet is the set of the row indexes in rows, which may be in
// any order and repeat.
func NewRowIndexSet(rows []uint64) *RowIndexSet {
	rows = slices.Compact(slices.Sorted(slices.Values(rows)))
	set := &RowIndexSet{}
	lows := make([]uint32, 0, len(rows))
	for len(rows) > 0 {
		high := uint32(rows[0] >> 32)
		lows = lows[:0]
		for len(rows) > 0 && uint32(rows[0]>>32) == high {
			lows = append(lows, uint32(rows[0]))
			rows = rows[1:]
		}
		set.add(high, roaring.FromSorted(lows))
	}
	return set
}

// Union is the set of the row indexes in s or o, such as a file's old
// deletion vector and its new deletions; either may be nil (no DV, as
// LoadDeletionVector returns it). A set is never modified, so the result
// shares the buckets only one of them has.
func (s *RowIndexSet) Union(o *RowIndexSet) *RowIndexSet {
	var a, b []dvBucket
	if s != nil {
		a = s.buckets
	}
	if o != nil {
		b = o.buckets
	}
	out := &RowIndexSet{}
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || len(a) > 0 && a[0].high < b[0].high:
			out.add(a[0].high, a[0].bm)
			a = a[1:]
		case len(a) == 0 || b[0].high < a[0].high:
			out.add(b[0].high, b[0].bm)
			b = b[1:]
		default:
			out.add(a[0].high, roaring.Union(&a[0].bm, &b[0].bm))
			a, b = a[1:], b[1:]
		}
	}
	return out
}

// Values yields the set's row indexes in ascending order.
func (s *RowIndexSet) Values() iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		if s == nil {
			return
		}
		for i := range s.buckets {
			high := uint64(s.buckets[i].high) << 32
			for lo := range s.buckets[i].bm.Values() {
				if !yield(high | uint64(lo)) {
					return
				}
			}
		}
	}
}

// appendPortable appends the set in the portable RoaringBitmapArray format
// decodeRoaringArray reads: the magic number, the bucket count, then each
// bucket's key and 32-bit bitmap, all little-endian.
func (s *RowIndexSet) appendPortable(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, dvMagic)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(s.buckets)))
	for i := range s.buckets {
		dst = binary.LittleEndian.AppendUint32(dst, s.buckets[i].high)
		dst = s.buckets[i].bm.AppendEncoded(dst)
	}
	return dst
}

// WriteDeletionVector writes set as a new DV file of the table in store
// and returns its descriptor, for the deletionVector of the file's add
// (see Add.WithDeletionVector). The file is named by a random UUID at the
// table root, with no random prefix: Spark adds one only under
// delta.randomizeFilePrefixes, which deltaflow's data files do not honour
// either. It holds the format version (1), then the data's big-endian
// size, the data and its big-endian CRC-32; the descriptor points at the
// data (offset 1). An empty set is refused: a file without deleted rows
// has no deletion vector.
func WriteDeletionVector(ctx context.Context, store storage.Store, set *RowIndexSet) (*DeletionVector, error) {
	if set.Cardinality() == 0 {
		return nil, errors.New("write deletion vector: no row to delete")
	}
	if last := set.buckets[len(set.buckets)-1]; last.high&0x80000000 != 0 {
		return nil, fmt.Errorf("write deletion vector: a row index of %d or more: past the largest a deletion vector holds, 2^63-1", uint64(last.high)<<32)
	}
	id := uuid.New()
	one := int32(1)
	dv := &DeletionVector{StorageType: "u", PathOrInlineDv: z85Encode(id[:]), Offset: &one, Cardinality: set.Cardinality()}
	key, _, err := dv.RelativePath()
	if err != nil {
		return nil, fmt.Errorf("write deletion vector: %w", err)
	}
	file := []byte{1, 0, 0, 0, 0} // the version, then room for the size
	file = set.appendPortable(file)
	size := len(file) - 5
	binary.BigEndian.PutUint32(file[1:], uint32(size))
	file = binary.BigEndian.AppendUint32(file, crc32.ChecksumIEEE(file[5:]))
	if err := store.Put(ctx, key, file); err != nil {
		return nil, fmt.Errorf("write deletion vector %s: %w", key, err)
	}
	dv.SizeInBytes = int32(size)
	return dv, nil
}

// WithDeletionVector is the remove and the add that give the file a new
// deletion vector dv, deleting its rows, as Spark's DELETE writes them: the
// remove (at now) carries the file's metadata and old deletion vector, the
// add is the file with dv, dataChange true and stats with tightBounds
// false, since their minimums and maximums may be of deleted rows. dv must
// hold the old vector's rows too (see RowIndexSet.Union).
func (a *Add) WithDeletionVector(dv *DeletionVector, now time.Time) (*Remove, *Add, error) {
	add := *a
	add.DeletionVector, add.DataChange = dv, true
	if a.Stats != "" {
		var st map[string]json.RawMessage
		err := json.Unmarshal([]byte(a.Stats), &st)
		if err == nil && st == nil {
			err = errors.New("null, not an object")
		}
		if err != nil {
			return nil, nil, fmt.Errorf("stats of %s: %w", a.Path, err)
		}
		st["tightBounds"] = json.RawMessage("false")
		stats, err := jsonenc.Marshal(st)
		if err != nil {
			return nil, nil, fmt.Errorf("stats of %s: %w", a.Path, err)
		}
		add.Stats = string(stats)
	}
	return a.Remove(now), &add, nil
}

// Remove is the remove action of the live file a (dataChange true, at
// now), as a DELETE of all its rows writes it.
func (a *Add) Remove(now time.Time) *Remove { return a.removeAt(now.UnixMilli(), true) }

// z85Encode is the Z85 text of b (a multiple of 4 bytes), as z85Decode
// reads it.
func z85Encode(b []byte) string {
	out := make([]byte, 0, len(b)/4*5)
	for i := 0; i+4 <= len(b); i += 4 {
		v := binary.BigEndian.Uint32(b[i:])
		var group [5]byte
		for j := 4; j >= 0; j-- {
			group[j] = z85Alphabet[v%85]
			v /= 85
		}
		out = append(out, group[:]...)
	}
	return string(out)
}
