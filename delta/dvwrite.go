package delta

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"iter"
	"slices"

	"github.com/google/uuid"

	"github.com/deltaflow/deltaflow/delta/internal/roaring"
	"github.com/deltaflow/deltaflow/storage"
)

// Writing deletion vectors: the reverse of dv.go. A DV is written as its
// own file at the table root, deletion_vector_<uuid>.bin (storage type
// 'u', no prefix: the table's root holds few of them between OPTIMIZEs),
// in the portable RoaringBitmapArray format Spark writes.

// NewRowIndexSet is the set of row indexes rows (any order, repeats
// allowed).
func NewRowIndexSet(rows []uint64) *RowIndexSet {
	rows = slices.Clone(rows)
	slices.Sort(rows)
	rows = slices.Compact(rows)
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

// Values yields the set's row indexes in ascending order.
func (s *RowIndexSet) Values() iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		if s == nil {
			return
		}
		for i := range s.buckets {
			b := &s.buckets[i]
			for lo := range b.bm.Values() {
				if !yield(uint64(b.high)<<32 | uint64(lo)) {
					return
				}
			}
		}
	}
}

// Union is the set of the row indexes of s and o (either may be nil).
func (s *RowIndexSet) Union(o *RowIndexSet) *RowIndexSet {
	rows := make([]uint64, 0, s.Cardinality()+o.Cardinality())
	for v := range s.Values() {
		rows = append(rows, v)
	}
	for v := range o.Values() {
		rows = append(rows, v)
	}
	return NewRowIndexSet(rows)
}

// encode is the set in the portable RoaringBitmapArray format: the magic
// number, the bucket count, then each bucket's key and 32-bit bitmap, all
// little-endian.
func (s *RowIndexSet) encode() []byte {
	out := binary.LittleEndian.AppendUint32(nil, dvMagic)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(s.buckets)))
	for i := range s.buckets {
		out = binary.LittleEndian.AppendUint32(out, s.buckets[i].high)
		out = s.buckets[i].bm.AppendEncoded(out)
	}
	return out
}

// WriteDeletionVector writes set as a new DV file of the table in store
// and returns its descriptor, for an add action's deletionVector. The
// file is the format version byte (1), then the data's big-endian size,
// the data and its big-endian CRC-32; the descriptor points at the data
// (offset 1).
func WriteDeletionVector(ctx context.Context, store storage.Store, set *RowIndexSet) (*DeletionVector, error) {
	if set.Cardinality() == 0 {
		return nil, fmt.Errorf("write deletion vector: %w: no row to delete", ErrCorruptDeletionVector)
	}
	data := set.encode()
	file := make([]byte, 0, 1+4+len(data)+4)
	file = append(file, 1)
	file = binary.BigEndian.AppendUint32(file, uint32(len(data)))
	file = append(file, data...)
	file = binary.BigEndian.AppendUint32(file, crc32.ChecksumIEEE(data))
	id := uuid.New()
	key := "deletion_vector_" + id.String() + ".bin"
	if err := store.PutStream(ctx, key, bytes.NewReader(file), int64(len(file))); err != nil {
		return nil, fmt.Errorf("write deletion vector %s: %w", key, err)
	}
	offset := int32(1)
	return &DeletionVector{StorageType: "u", PathOrInlineDv: z85Encode(id[:]), Offset: &offset,
		SizeInBytes: int32(len(data)), Cardinality: set.Cardinality()}, nil
}

// z85Encode encodes b (a multiple of 4 bytes long) in Z85, as z85Decode
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
