package roaring

import (
	"encoding/binary"
	"iter"
	"math/bits"
)

// FromSorted builds the bitmap of vals, which must be ascending without
// repeats: per key an array container of up to 4096 values, or a bitmap
// container above, the two kinds the serialization tells apart by their
// cardinality alone.
func FromSorted(vals []uint32) Bitmap {
	var b Bitmap
	for len(vals) > 0 {
		key := uint16(vals[0] >> 16)
		n := 1
		for n < len(vals) && uint16(vals[n]>>16) == key {
			n++
		}
		var c roaringContainer
		if n <= arrayMax {
			c.array = make([]uint16, n)
			for i, v := range vals[:n] {
				c.array[i] = uint16(v)
			}
		} else {
			c.bitmap = make([]uint64, 1024)
			for _, v := range vals[:n] {
				c.bitmap[uint16(v)/64] |= 1 << (v % 64)
			}
		}
		b.append(key, c, n)
		vals = vals[n:]
	}
	return b
}

// Union is the bitmap of the values in a or b.
func Union(a, b *Bitmap) Bitmap {
	var out Bitmap
	i, j := 0, 0
	for i < len(a.keys) || j < len(b.keys) {
		switch {
		case j == len(b.keys) || i < len(a.keys) && a.keys[i] < b.keys[j]:
			out.append(a.keys[i], a.containers[i], a.containers[i].cardinality())
			i++
		case i == len(a.keys) || b.keys[j] < a.keys[i]:
			out.append(b.keys[j], b.containers[j], b.containers[j].cardinality())
			j++
		default:
			words := make([]uint64, 1024)
			a.containers[i].orInto(words)
			b.containers[j].orInto(words)
			c, n := fromWords(words)
			out.append(a.keys[i], c, n)
			i++
			j++
		}
	}
	return out
}

// append adds container c of n values under key (above the last key),
// leaving out an empty one: a decoded run container may have no runs.
func (b *Bitmap) append(key uint16, c roaringContainer, n int) {
	if n > 0 {
		b.keys = append(b.keys, key)
		b.containers = append(b.containers, c)
		b.card += int64(n)
	}
}

// fromWords is the container of the values set in words (1024 of them),
// and how many there are: an array container for up to 4096 values.
func fromWords(words []uint64) (roaringContainer, int) {
	n := 0
	for _, w := range words {
		n += bits.OnesCount64(w)
	}
	if n > arrayMax {
		return roaringContainer{bitmap: words}, n
	}
	c := roaringContainer{array: make([]uint16, 0, n)}
	for lo := range bitmapValues(words) {
		c.array = append(c.array, lo)
	}
	return c, n
}

// Values yields the bitmap's values in ascending order.
func (b *Bitmap) Values() iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		for i := range b.containers {
			high := uint32(b.keys[i]) << 16
			for lo := range b.containers[i].values() {
				if !yield(high | uint32(lo)) {
					return
				}
			}
		}
	}
}

func (c *roaringContainer) values() iter.Seq[uint16] {
	switch {
	case c.bitmap != nil:
		return bitmapValues(c.bitmap)
	case c.runs != nil:
		return func(yield func(uint16) bool) {
			for _, r := range c.runs {
				for v := uint32(r[0]); v <= uint32(r[0])+uint32(r[1]); v++ {
					if !yield(uint16(v)) {
						return
					}
				}
			}
		}
	}
	return func(yield func(uint16) bool) {
		for _, v := range c.array {
			if !yield(v) {
				return
			}
		}
	}
}

func bitmapValues(words []uint64) iter.Seq[uint16] {
	return func(yield func(uint16) bool) {
		for i, w := range words {
			for ; w != 0; w &= w - 1 {
				if !yield(uint16(i*64 + bits.TrailingZeros64(w))) {
					return
				}
			}
		}
	}
}

func (c *roaringContainer) cardinality() int {
	switch {
	case c.bitmap != nil:
		n := 0
		for _, w := range c.bitmap {
			n += bits.OnesCount64(w)
		}
		return n
	case c.runs != nil:
		n := 0
		for _, r := range c.runs {
			n += int(r[1]) + 1
		}
		return n
	}
	return len(c.array)
}

// orInto sets the container's values in words (1024 of them).
func (c *roaringContainer) orInto(words []uint64) {
	if c.bitmap != nil {
		for i, w := range c.bitmap {
			words[i] |= w
		}
		return
	}
	for lo := range c.values() {
		words[lo/64] |= 1 << (lo % 64)
	}
}

// AppendEncoded appends the bitmap's portable serialization to dst, as
// Decode reads it and Spark writes it when it has no runs: cookie 12346,
// the container count, each container's key and cardinality-1, each
// container's offset from the start, then the containers. A container is
// written as an array (up to 4096 values) or a bitmap by its cardinality
// alone, which is all a reader goes by, whatever kind it was built as
// (run containers come only from Decode).
func (b *Bitmap) AppendEncoded(dst []byte) []byte {
	var keep []int // the containers with values: a decoded one may have none
	cards := make([]int, len(b.containers))
	for i := range b.containers {
		if cards[i] = b.containers[i].cardinality(); cards[i] > 0 {
			keep = append(keep, i)
		}
	}
	dst = binary.LittleEndian.AppendUint32(dst, CookieNoRuns)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(keep)))
	for _, i := range keep {
		dst = binary.LittleEndian.AppendUint16(dst, b.keys[i])
		dst = binary.LittleEndian.AppendUint16(dst, uint16(cards[i]-1))
	}
	offset := 8 + 8*len(keep) // the cookie, the count, the headers and the offsets
	for _, i := range keep {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(offset))
		if cards[i] <= arrayMax {
			offset += 2 * cards[i]
		} else {
			offset += 8 * 1024
		}
	}
	for _, i := range keep {
		c := &b.containers[i]
		if cards[i] <= arrayMax {
			for lo := range c.values() {
				dst = binary.LittleEndian.AppendUint16(dst, lo)
			}
			continue
		}
		words := c.bitmap
		if words == nil {
			words = make([]uint64, 1024)
			c.orInto(words)
		}
		for _, w := range words {
			dst = binary.LittleEndian.AppendUint64(dst, w)
		}
	}
	return dst
}
