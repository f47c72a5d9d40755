// Package roaring decodes and encodes the 32-bit Roaring bitmap portable
// serialization (RoaringFormatSpec), as Delta deletion vectors store it:
// decoding is bounded by the bytes present; encoding writes array and
// bitmap containers only (encode.go).
package roaring

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
)

// The serialization:
//
//	cookie (uint32): 12346 then the container count (uint32), or
//	                 12347 | (count-1)<<16 then a bitset of run containers
//	per container:   key (uint16), cardinality-1 (uint16)
//	offsets:         uint32 per container, present unless the cookie is
//	                 12347 and there are fewer than 4 containers
//	containers:      run: count (uint16), then (start, length-1) pairs;
//	                 array (cardinality ≤ 4096): sorted uint16 values;
//	                 bitmap: 1024 little-endian uint64 words.
//
// Everything is little-endian.

// The cookies that open a serialized bitmap: without run containers, and
// with them (the container count in the high 16 bits).
const (
	CookieNoRuns = 12346
	CookieRuns   = 12347
)

const (
	arrayMax    = 4096 // an array container holds at most this many values
	noOffsetMax = 4    // run-cookie bitmaps below this many containers have no offsets
)

// Bitmap is a 32-bit Roaring bitmap, decoded or built (FromSorted, Union).
// It is never modified once built, so Union shares containers between its
// operands and its result instead of copying them.
type Bitmap struct {
	keys       []uint16 // ascending
	containers []roaringContainer
	card       int64
}

// Cardinality is how many values the bitmap holds.
func (b *Bitmap) Cardinality() int64 { return b.card }

// roaringContainer holds the low 16 bits of the values sharing one key;
// exactly one of its fields is set.
type roaringContainer struct {
	array  []uint16    // sorted values
	bitmap []uint64    // 1024 words
	runs   [][2]uint16 // sorted (start, length-1)
}

// Contains reports whether v is in the bitmap.
func (b *Bitmap) Contains(v uint32) bool {
	i, ok := slices.BinarySearch(b.keys, uint16(v>>16))
	if !ok {
		return false
	}
	return b.containers[i].contains(uint16(v))
}

func (c *roaringContainer) contains(lo uint16) bool {
	switch {
	case c.bitmap != nil:
		return c.bitmap[lo/64]&(1<<(lo%64)) != 0
	case c.runs != nil:
		// The last run starting at or before lo.
		i, _ := slices.BinarySearchFunc(c.runs, lo, func(r [2]uint16, v uint16) int {
			if r[0] <= v {
				return -1
			}
			return 1
		})
		return i > 0 && uint32(lo) <= uint32(c.runs[i-1][0])+uint32(c.runs[i-1][1])
	}
	_, ok := slices.BinarySearch(c.array, lo)
	return ok
}

// Decode decodes one portable bitmap at the start of data and
// returns it with the number of bytes it used.
func Decode(data []byte) (Bitmap, int, error) {
	var b Bitmap
	p := 0
	u16 := func() (uint16, error) {
		if p+2 > len(data) {
			return 0, fmt.Errorf("truncated at byte %d", p)
		}
		v := binary.LittleEndian.Uint16(data[p:])
		p += 2
		return v, nil
	}
	u32 := func() (uint32, error) {
		if p+4 > len(data) {
			return 0, fmt.Errorf("truncated at byte %d", p)
		}
		v := binary.LittleEndian.Uint32(data[p:])
		p += 4
		return v, nil
	}
	cookie, err := u32()
	if err != nil {
		return b, 0, err
	}
	var n int
	var runFlags []byte
	switch {
	case cookie == CookieNoRuns:
		c, err := u32()
		if err != nil {
			return b, 0, err
		}
		if c > 1<<16 {
			return b, 0, fmt.Errorf("%d containers", c)
		}
		n = int(c)
	case cookie&0xFFFF == CookieRuns:
		n = int(cookie>>16) + 1
		nb := (n + 7) / 8
		if p+nb > len(data) {
			return b, 0, fmt.Errorf("truncated run flags")
		}
		runFlags = data[p : p+nb]
		p += nb
	default:
		return b, 0, fmt.Errorf("unknown cookie %#x", cookie)
	}
	cards := make([]int, n)
	b.keys = make([]uint16, n)
	for i := range n {
		k, err := u16()
		if err != nil {
			return b, 0, err
		}
		c, err := u16()
		if err != nil {
			return b, 0, err
		}
		if i > 0 && k <= b.keys[i-1] {
			return b, 0, fmt.Errorf("container %d: key %d not ascending", i, k)
		}
		b.keys[i], cards[i] = k, int(c)+1
	}
	if runFlags == nil || n >= noOffsetMax {
		p += 4 * n // offsets: the containers follow in order anyway
		if p > len(data) {
			return b, 0, fmt.Errorf("truncated offsets")
		}
	}
	b.containers = make([]roaringContainer, n)
	for i := range n {
		c := &b.containers[i]
		switch {
		case runFlags != nil && runFlags[i/8]&(1<<(i%8)) != 0:
			nr, err := u16()
			if err != nil {
				return b, 0, err
			}
			if p+4*int(nr) > len(data) {
				return b, 0, fmt.Errorf("container %d: truncated runs", i)
			}
			c.runs = make([][2]uint16, nr)
			card := 0
			for r := range int(nr) {
				start := binary.LittleEndian.Uint16(data[p:])
				length := binary.LittleEndian.Uint16(data[p+2:])
				p += 4
				if uint32(start)+uint32(length) > 0xFFFF || r > 0 && uint32(start) <= uint32(c.runs[r-1][0])+uint32(c.runs[r-1][1]) {
					return b, 0, fmt.Errorf("container %d: run %d out of order or range", i, r)
				}
				c.runs[r] = [2]uint16{start, length}
				card += int(length) + 1
			}
			cards[i] = card // the header's count is not relied on for runs
		case cards[i] <= arrayMax:
			if p+2*cards[i] > len(data) {
				return b, 0, fmt.Errorf("container %d: truncated array", i)
			}
			c.array = make([]uint16, cards[i])
			for j := range c.array {
				c.array[j] = binary.LittleEndian.Uint16(data[p:])
				p += 2
				if j > 0 && c.array[j] <= c.array[j-1] {
					return b, 0, fmt.Errorf("container %d: array not ascending", i)
				}
			}
		default:
			if p+8192 > len(data) {
				return b, 0, fmt.Errorf("container %d: truncated bitmap", i)
			}
			c.bitmap = make([]uint64, 1024)
			card := 0
			for w := range c.bitmap {
				c.bitmap[w] = binary.LittleEndian.Uint64(data[p:])
				card += bits.OnesCount64(c.bitmap[w])
				p += 8
			}
			if card != cards[i] {
				return b, 0, fmt.Errorf("container %d: bitmap holds %d values, header says %d", i, card, cards[i])
			}
		}
		b.card += int64(cards[i])
	}
	return b, p, nil
}
