package roaring

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// roundTrip encodes b, decodes the bytes and fails unless they hold
// exactly want, using every byte.
func roundTrip(t *testing.T, b *Bitmap, want []uint32) Bitmap {
	t.Helper()
	data := b.AppendEncoded(nil)
	got, used, err := Decode(data)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if used != len(data) {
		t.Errorf("decode used %d of %d bytes", used, len(data))
	}
	if vals := slices.Collect(got.Values()); !slices.Equal(vals, want) {
		t.Fatalf("read back %d values, want %d", len(vals), len(want))
	}
	if got.Cardinality() != int64(len(want)) || b.Cardinality() != int64(len(want)) {
		t.Errorf("cardinality %d read back, %d built, want %d", got.Cardinality(), b.Cardinality(), len(want))
	}
	return got
}

func span(from, n uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = from + uint32(i)
	}
	return out
}

// TestEncodeRoundTrip: built bitmaps decode to their values, each
// container of the kind its cardinality says (an array up to 4096 values,
// the only rule a reader has), from the first key to the last.
func TestEncodeRoundTrip(t *testing.T) {
	for name, tc := range map[string]struct {
		vals  []uint32
		kinds string // per container: a(rray) or b(itmap)
	}{
		"empty":           {nil, ""},
		"one":             {[]uint32{42}, "a"},
		"extremes":        {[]uint32{0, 65535, 65536, 1<<32 - 1}, "aaa"},
		"array full":      {span(3<<16, 4096), "a"},
		"bitmap smallest": {span(3<<16, 4097), "b"},
		"container full":  {span(0xFFFF<<16, 65536), "b"},
		"mixed":           {slices.Concat(span(0, 5000), []uint32{1 << 16, 1<<16 + 2}, span(9<<16+60000, 5536)), "bab"},
	} {
		t.Run(name, func(t *testing.T) {
			b := FromSorted(tc.vals)
			got := roundTrip(t, &b, tc.vals)
			kinds := ""
			for _, c := range got.containers {
				kinds += map[bool]string{true: "b", false: "a"}[c.bitmap != nil]
			}
			if kinds != tc.kinds {
				t.Errorf("containers %q, want %q", kinds, tc.kinds)
			}
		})
	}
}

// runBitmap is a serialized bitmap with run containers (cookie 12347, no
// offsets below four containers): key 1 runs 10..19 and 30; key 2 no run
// at all (Decode takes it; it has no values); key 5 one run of 5000 values.
func runBitmap() []byte {
	le := binary.LittleEndian
	var b []byte
	b = le.AppendUint32(b, CookieRuns|2<<16) // three containers
	b = append(b, 0b111)                     // all run containers
	for _, h := range [][2]uint16{{1, 10}, {2, 0}, {5, 4999}} {
		b = le.AppendUint16(le.AppendUint16(b, h[0]), h[1])
	}
	b = le.AppendUint16(b, 2)
	b = le.AppendUint16(le.AppendUint16(b, 10), 9)
	b = le.AppendUint16(le.AppendUint16(b, 30), 0)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 1)
	b = le.AppendUint16(le.AppendUint16(b, 100), 4999)
	return b
}

// TestEncodeRunContainers: a decoded bitmap with run containers (as Spark
// writes them) encodes without runs to the same values, as an array and
// a bitmap container, and its empty container is left out.
func TestEncodeRunContainers(t *testing.T) {
	b, _, err := Decode(runBitmap())
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(span(1<<16+10, 10), []uint32{1<<16 + 30}, span(5<<16+100, 5000))
	got := roundTrip(t, &b, want)
	if !slices.Equal(got.keys, []uint16{1, 5}) || got.containers[0].array == nil || got.containers[1].bitmap == nil {
		t.Errorf("keys %v: want an array at 1 and a bitmap at 5", got.keys)
	}
	if cookie := binary.LittleEndian.Uint32(b.AppendEncoded(nil)); cookie != CookieNoRuns {
		t.Errorf("cookie %d, want %d", cookie, CookieNoRuns)
	}
}

// TestUnion: the union of random bitmaps (sparse and dense keys, arrays
// that together need a bitmap, runs) holds exactly the values of both,
// and leaves both as they were.
func TestUnion(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []uint32 {
		seen := map[uint32]bool{}
		for range n {
			seen[uint32(rng.IntN(4))<<16|uint32(rng.IntN(1<<16))] = true
		}
		var out []uint32
		for v := range seen {
			out = append(out, v)
		}
		slices.Sort(out)
		return out
	}
	runs, _, err := Decode(runBitmap())
	if err != nil {
		t.Fatal(err)
	}
	cases := [][2][]uint32{
		{nil, nil},
		{nil, {7}},
		{span(0, 3000), span(2000, 3000)},     // two arrays, a bitmap together
		{span(0, 100), span(9<<16, 100)},      // disjoint keys
		{span(5<<16, 40000), span(5<<16, 10)}, // bitmap and array
		{random(3000), random(20000)},
		{random(50000), random(50000)},
	}
	for i, c := range cases {
		a, b := FromSorted(c[0]), FromSorted(c[1])
		want := slices.Compact(slices.Sorted(slices.Values(slices.Concat(c[0], c[1]))))
		u := Union(&a, &b)
		roundTrip(t, &u, want)
		if !slices.Equal(slices.Collect(a.Values()), c[0]) || !slices.Equal(slices.Collect(b.Values()), c[1]) {
			t.Errorf("case %d: an operand changed", i)
		}
		// With runs, on either side.
		r := Union(&runs, &a)
		want = slices.Compact(slices.Sorted(slices.Values(slices.Concat(slices.Collect(runs.Values()), c[0]))))
		roundTrip(t, &r, want)
		r = Union(&b, &runs)
		want = slices.Compact(slices.Sorted(slices.Values(slices.Concat(slices.Collect(runs.Values()), c[1]))))
		roundTrip(t, &r, want)
	}
}

// FuzzEncode: any set of values encodes to bytes that decode to it. The
// input's bytes make values in four keys, and dense adds a run of
// consecutive ones, so arrays, bitmaps and their boundary all occur.
func FuzzEncode(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5}, uint16(0))
	f.Add([]byte{3, 255, 255}, uint16(4096))
	f.Add([]byte{1, 0, 0, 2, 0, 0}, uint16(4095))
	f.Fuzz(func(t *testing.T, data []byte, dense uint16) {
		vals := span(2<<16+uint32(dense)/3, uint32(dense))
		for i := 0; i+3 <= len(data); i += 3 {
			vals = append(vals, uint32(data[i]%4)<<16|uint32(binary.LittleEndian.Uint16(data[i+1:])))
		}
		vals = slices.Compact(slices.Sorted(slices.Values(vals)))
		b := FromSorted(vals)
		roundTrip(t, &b, vals)
	})
}

// FuzzReencode: whatever Decode accepts encodes to bytes that decode to
// the same values.
func FuzzReencode(f *testing.F) {
	f.Add(runBitmap())
	b := FromSorted(slices.Concat(span(0, 10), span(1<<16, 5000)))
	f.Add(b.AppendEncoded(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, _, err := Decode(data)
		if err != nil {
			return
		}
		roundTrip(t, &b, slices.Collect(b.Values()))
	})
}
