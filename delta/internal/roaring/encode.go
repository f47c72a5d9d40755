package roaring

import (
	"encoding/binary"
	"iter"
)

// FromSorted builds the bitmap of vals, which must be ascending without
// repeats: an array container per key of up to 4096 values, a bitmap
// container above (no run containers: every reader takes the two).
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
				lo := uint16(v)
				c.bitmap[lo/64] |= 1 << (lo % 64)
			}
		}
		b.keys = append(b.keys, key)
		b.containers = append(b.containers, c)
		b.card += int64(n)
		vals = vals[n:]
	}
	return b
}

// Values yields the bitmap's values in ascending order.
func (b *Bitmap) Values() iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		for i, c := range b.containers {
			high := uint32(b.keys[i]) << 16
			for lo := range c.values() {
				if !yield(high | uint32(lo)) {
					return
				}
			}
		}
	}
}

func (c *roaringContainer) values() iter.Seq[uint16] {
	return func(yield func(uint16) bool) {
		switch {
		case c.bitmap != nil:
			for w, word := range c.bitmap {
				for bit := range 64 {
					if word&(1<<bit) != 0 && !yield(uint16(w*64+bit)) {
						return
					}
				}
			}
		case c.runs != nil:
			for _, r := range c.runs {
				for v := uint32(r[0]); v <= uint32(r[0])+uint32(r[1]); v++ {
					if !yield(uint16(v)) {
						return
					}
				}
			}
		default:
			for _, v := range c.array {
				if !yield(v) {
					return
				}
			}
		}
	}
}

// AppendEncoded appends the bitmap's portable serialization without run
// containers (cookie 12346, the count, the keys and cardinalities, the
// offsets, then the containers) to dst; run containers are written as
// array or bitmap containers.
func (b *Bitmap) AppendEncoded(dst []byte) []byte {
	n := len(b.containers)
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, CookieNoRuns)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	cards := make([]int, n)
	for i := range b.containers {
		for range b.containers[i].values() {
			cards[i]++
		}
		dst = binary.LittleEndian.AppendUint16(dst, b.keys[i])
		dst = binary.LittleEndian.AppendUint16(dst, uint16(cards[i]-1))
	}
	offset := len(dst) - start + 4*n
	for i := range n {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(offset))
		if cards[i] <= arrayMax {
			offset += 2 * cards[i]
		} else {
			offset += 8192
		}
	}
	for i := range b.containers {
		c := &b.containers[i]
		if cards[i] <= arrayMax {
			for v := range c.values() {
				dst = binary.LittleEndian.AppendUint16(dst, v)
			}
			continue
		}
		words := c.bitmap
		if words == nil { // runs of more than arrayMax values
			words = make([]uint64, 1024)
			for v := range c.values() {
				words[v/64] |= 1 << (v % 64)
			}
		}
		for _, w := range words {
			dst = binary.LittleEndian.AppendUint64(dst, w)
		}
	}
	return dst
}
