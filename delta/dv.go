package delta

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/deltaflow/deltaflow/delta/internal/roaring"
	"github.com/deltaflow/deltaflow/storage"
)

// Deletion vectors (PROTOCOL.md "Deletion Vectors", "Deletion Vector
// Format"): a set of row indexes of a data file that are logically deleted.
// This file decodes the descriptor (inline Z85 data, or a file named by a
// Z85-encoded UUID or an absolute path), the DV file envelope (version byte,
// big-endian size, data, CRC-32) and the RoaringBitmapArray format (magic,
// then a 64-bit portable Roaring bitmap: 32-bit keys over 32-bit Roaring
// bitmaps in the portable serialization).

// ErrCorruptDeletionVector is wrapped by every deletion vector decoding error.
var ErrCorruptDeletionVector = errors.New("delta: corrupt deletion vector")

// The magic numbers of Delta's two RoaringBitmapArray serializations:
// dvMagic (little-endian) starts the portable format the spec describes and
// Spark writes; dvMagicNative (big-endian) starts the older "native" format
// the spec's inline example uses: bitmap count (int32), then per bitmap its
// size (int32) and a 32-bit portable bitmap whose key is its index.
const (
	dvMagic       = 1681511377
	dvMagicNative = 1681511376
)

// RelativePath is where the deletion vector's file is: for storageType 'u'
// the path relative to the table root (an unescaped storage key,
// "<prefix>/deletion_vector_<uuid>.bin"), for 'p' the absolute path as
// written. ok is false for an inline DV, which has no file.
func (dv *DeletionVector) RelativePath() (path string, ok bool, err error) {
	switch dv.StorageType {
	case "i":
		return "", false, nil
	case "p":
		return dv.PathOrInlineDv, true, nil
	}
	loc, ok, err := newTableRoot("/").dvFile(dv)
	return loc.path, ok, err
}

// storeKey is the store key of the DV file (see tableRoot.dvFile); ok is
// false for an inline DV. ErrOutsideTable for an absolute path elsewhere.
func (dv *DeletionVector) storeKey(store storage.Store) (key string, ok bool, err error) {
	root := newTableRoot(store.URI())
	loc, ok, err := root.dvFile(dv)
	if err != nil || !ok {
		return "", ok, err
	}
	if loc.kind != pathInside {
		return "", true, fmt.Errorf("%w %s: deletion vector %s", ErrOutsideTable, root.uri, loc.path)
	}
	return loc.path, true, nil
}

// RowIndexSet is a decoded deletion vector: the deleted row indexes of a
// data file.
type RowIndexSet struct {
	buckets []dvBucket // ascending by high
	card    int64
}

type dvBucket struct {
	high uint32
	bm   roaring.Bitmap
}

// Contains reports whether row index i is in the set.
func (s *RowIndexSet) Contains(i uint64) bool {
	if s == nil {
		return false
	}
	high := uint32(i >> 32)
	lo, hi := 0, len(s.buckets)
	for lo < hi {
		m := (lo + hi) / 2
		switch b := s.buckets[m].high; {
		case b == high:
			return s.buckets[m].bm.Contains(uint32(i))
		case b < high:
			lo = m + 1
		default:
			hi = m
		}
	}
	return false
}

// Cardinality is the number of row indexes in the set.
func (s *RowIndexSet) Cardinality() int64 {
	if s == nil {
		return 0
	}
	return s.card
}

// LoadDeletionVector reads and decodes the deletion vector of a file
// (nil, nil when dv is nil): inline, or from its DV file in store, whose
// version byte, size and checksum are checked. The decoded cardinality must
// match the descriptor's.
func LoadDeletionVector(ctx context.Context, store storage.Store, dv *DeletionVector) (*RowIndexSet, error) {
	if dv == nil {
		return nil, nil
	}
	var data []byte
	key, isFile, err := dv.storeKey(store)
	if err != nil {
		return nil, err
	}
	if !isFile {
		raw, err := z85Decode(dv.PathOrInlineDv)
		if err != nil {
			return nil, fmt.Errorf("%w: inline: %v", ErrCorruptDeletionVector, err)
		}
		if dv.SizeInBytes < 0 || int(dv.SizeInBytes) > len(raw) {
			return nil, fmt.Errorf("%w: inline: sizeInBytes %d, data has %d bytes", ErrCorruptDeletionVector, dv.SizeInBytes, len(raw))
		}
		data = raw[:dv.SizeInBytes]
	} else if data, err = readDVFile(ctx, store, key, dv); err != nil {
		return nil, err
	}
	set, err := decodeRoaringArray(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorruptDeletionVector, dv.UniqueID(), err)
	}
	if set.card != dv.Cardinality {
		return nil, fmt.Errorf("%w: %s: holds %d rows, cardinality says %d", ErrCorruptDeletionVector, dv.UniqueID(), set.card, dv.Cardinality)
	}
	return set, nil
}

// readDVFile reads one DV from a DV file: version byte 1 at the start;
// at offset the big-endian data size, the data and its big-endian CRC-32.
func readDVFile(ctx context.Context, store storage.Store, key string, dv *DeletionVector) ([]byte, error) {
	r, err := store.Open(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read deletion vector file %s: %w", key, err)
	}
	defer r.Close()
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: file %s: %s", ErrCorruptDeletionVector, key, fmt.Sprintf(format, args...))
	}
	var off int64
	if dv.Offset != nil {
		off = int64(*dv.Offset)
	}
	if dv.SizeInBytes < 0 || off < 1 || off+8+int64(dv.SizeInBytes) > r.Size() {
		return nil, fail("offset %d and size %d do not fit in %d bytes", off, dv.SizeInBytes, r.Size())
	}
	var version [1]byte
	if _, err := r.ReadAt(version[:], 0); err != nil {
		return nil, fmt.Errorf("read deletion vector file %s: %w", key, err)
	}
	if version[0] != 1 {
		return nil, fail("format version %d, want 1", version[0])
	}
	buf := make([]byte, 4+int(dv.SizeInBytes)+4)
	if _, err := r.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("read deletion vector file %s: %w", key, err)
	}
	if size := binary.BigEndian.Uint32(buf); size != uint32(dv.SizeInBytes) {
		return nil, fail("size %d at offset %d, descriptor says %d", size, off, dv.SizeInBytes)
	}
	data := buf[4 : 4+dv.SizeInBytes]
	if sum, want := crc32.ChecksumIEEE(data), binary.BigEndian.Uint32(buf[4+dv.SizeInBytes:]); sum != want {
		return nil, fail("checksum %08x, stored %08x", sum, want)
	}
	return data, nil
}

// decodeRoaringArray decodes Delta's RoaringBitmapArray: the magic number,
// then the portable 64-bit format (bucket count, then per bucket its 32-bit
// key and a 32-bit Roaring bitmap), all little-endian; or the native format
// (see dvMagicNative).
func decodeRoaringArray(data []byte) (*RowIndexSet, error) {
	if len(data) >= 8 && binary.BigEndian.Uint32(data) == dvMagicNative {
		return decodeNativeRoaringArray(data[4:])
	}
	if len(data) < 12 {
		return nil, fmt.Errorf("%d bytes is too short", len(data))
	}
	if m := binary.LittleEndian.Uint32(data); m != dvMagic {
		return nil, fmt.Errorf("magic number %d, want %d", m, dvMagic)
	}
	n := binary.LittleEndian.Uint64(data[4:])
	data = data[12:]
	if n > uint64(len(data)/4) {
		return nil, fmt.Errorf("%d buckets do not fit in %d bytes", n, len(data))
	}
	set := &RowIndexSet{buckets: make([]dvBucket, 0, n)}
	var prev uint32
	for i := range n {
		if len(data) < 4 {
			return nil, fmt.Errorf("bucket %d: truncated", i)
		}
		high := binary.LittleEndian.Uint32(data)
		if high&0x80000000 != 0 {
			return nil, fmt.Errorf("bucket %d: key %#x has its high bit set", i, high)
		}
		if i > 0 && high <= prev {
			return nil, fmt.Errorf("bucket %d: key %d not ascending", i, high)
		}
		prev = high
		bm, used, err := roaring.Decode(data[4:])
		if err != nil {
			return nil, fmt.Errorf("bucket %d: %w", i, err)
		}
		set.add(high, bm)
		data = data[4+used:]
	}
	return set, noTrailing(data)
}

// add appends a bucket (keys ascending), leaving out empty ones.
func (s *RowIndexSet) add(high uint32, bm roaring.Bitmap) {
	if bm.Cardinality() > 0 {
		s.buckets = append(s.buckets, dvBucket{high: high, bm: bm})
		s.card += bm.Cardinality()
	}
}

// noTrailing fails when bytes are left after the last bitmap.
func noTrailing(rest []byte) error {
	if len(rest) != 0 {
		return fmt.Errorf("%d bytes after the last bitmap", len(rest))
	}
	return nil
}

// decodeNativeRoaringArray decodes the native format after its magic:
// big-endian bitmap count, then per bitmap its big-endian size and bytes.
func decodeNativeRoaringArray(data []byte) (*RowIndexSet, error) {
	n := binary.BigEndian.Uint32(data)
	data = data[4:]
	if n > 1<<31 || uint64(n) > uint64(len(data)/4) {
		return nil, fmt.Errorf("%d bitmaps do not fit in %d bytes", n, len(data))
	}
	set := &RowIndexSet{}
	for i := range n {
		if len(data) < 4 {
			return nil, fmt.Errorf("bitmap %d: truncated", i)
		}
		size := int(binary.BigEndian.Uint32(data))
		if size > len(data)-4 {
			return nil, fmt.Errorf("bitmap %d: size %d past the end", i, size)
		}
		bm, used, err := roaring.Decode(data[4 : 4+size])
		if err != nil {
			return nil, fmt.Errorf("bitmap %d: %w", i, err)
		}
		if used != size {
			return nil, fmt.Errorf("bitmap %d: %d of %d bytes used", i, used, size)
		}
		set.add(i, bm)
		data = data[4+size:]
	}
	return set, noTrailing(data)
}

// NumLogicalRecords is the number of rows the file holds for readers: its
// stats' numRecords (the physical rows) less the deletion vector's
// cardinality. ok is false when the stats do not say.
func (a *Add) NumLogicalRecords() (n int64, ok bool) {
	if a.Stats == "" {
		return 0, false
	}
	st, err := ParseStats(a.Stats)
	if err != nil || st.NumRecords < 0 {
		return 0, false
	}
	if a.DeletionVector != nil {
		return st.NumRecords - a.DeletionVector.Cardinality, true
	}
	return st.NumRecords, true
}
