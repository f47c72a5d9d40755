package mapping

// slabSize is the size of an Arena's slabs: large enough that a slab holds
// hundreds of sensor rows' strings, small enough not to matter when idle.
const slabSize = 64 << 10

// emptyBytes is what Copy returns for an empty input: non-nil, so an empty
// string stays a (non-null) empty Parquet value.
var emptyBytes = []byte{}

// Arena holds copies of the string values of mapped rows in large slabs, so
// that mapping a record does not allocate and the rows do not alias the
// Kafka record or the JSON parser. Copies stay valid until Reset, which the
// owner calls once no row refers to them any more (a buffer after its rows
// are flushed). The zero Arena is ready to use; it is not safe for
// concurrent use.
type Arena struct {
	slabs [][]byte
	cur   int // index of the slab being filled
	n     int // bytes handed out since the last Reset
}

// Copy returns a copy of b inside the arena (capacity = length, so appending
// to it cannot overwrite a neighbour).
func (a *Arena) Copy(b []byte) []byte { return arenaCopy(a, b) }

// CopyString is Copy for a string.
func (a *Arena) CopyString(s string) []byte { return arenaCopy(a, s) }

func arenaCopy[T string | []byte](a *Arena, b T) []byte {
	if len(b) == 0 {
		return emptyBytes
	}
	for {
		if a.cur < len(a.slabs) {
			s := a.slabs[a.cur]
			if cap(s)-len(s) >= len(b) {
				off := len(s)
				s = append(s, b...)
				a.slabs[a.cur] = s
				a.n += len(b)
				return s[off:len(s):len(s)]
			}
			a.cur++
			continue
		}
		a.slabs = append(a.slabs, make([]byte, 0, max(slabSize, len(b))))
		a.cur = len(a.slabs) - 1
	}
}

// Len is the number of bytes copied in since the last Reset.
func (a *Arena) Len() int { return a.n }

// Reset invalidates every copy and keeps the standard-size slabs for reuse;
// oversized slabs (one huge value) are released.
func (a *Arena) Reset() {
	kept := a.slabs[:0]
	for _, s := range a.slabs {
		if cap(s) <= slabSize {
			kept = append(kept, s[:0])
		}
	}
	clear(a.slabs[len(kept):])
	a.slabs = kept
	a.cur = 0
	a.n = 0
}
