package parquetfile

import (
	"strings"
	"testing"
)

func TestTruncateStrings(t *testing.T) {
	a32 := strings.Repeat("a", 32)
	e31 := strings.Repeat("é", 31)
	max := string(rune(0x10FFFF))
	for _, c := range []struct {
		in, min, max string
		maxOK        bool
	}{
		{"short", "short", "short", true},
		{a32, a32, a32, true},
		// Cut char ASCII (< U+007F): ASCII tie-breaker.
		{a32 + "b", a32, a32 + "\x7f", true},
		// Cut char non-ASCII: U+10FFFF.
		{a32 + "é", a32, a32 + max, true},
		{e31 + "éé", e31 + "é", e31 + "é" + max, true},
		// DEL itself is not below U+007F: U+10FFFF.
		{a32 + "\x7f", a32, a32 + max, true},
		// U+10FFFF at the cut is kept and the next char decides.
		{a32 + max + "b", a32, a32 + max + "\x7f", true},
		{a32 + max, a32, a32 + max, true},
		// A supplementary char counts 2 UTF-16 units for max (Java String)
		// and is never split; min counts code points.
		{strings.Repeat("a", 31) + "😀" + "bc", strings.Repeat("a", 31) + "😀", strings.Repeat("a", 31) + "😀" + "\x7f", true},
		{strings.Repeat("😀", 17), strings.Repeat("😀", 17), strings.Repeat("😀", 16) + max, true},
		// Only U+10FFFF past the prefix for more than 2×32 units: no max.
		{a32 + strings.Repeat(max, 17), a32, "", false},
	} {
		if got := TruncateMinString(c.in, 32); got != c.min {
			t.Errorf("min(%q) = %q, want %q", c.in, got, c.min)
		}
		got, ok := TruncateMaxString(c.in, 32)
		if got != c.max || ok != c.maxOK {
			t.Errorf("max(%q) = %q %v, want %q %v", c.in, got, ok, c.max, c.maxOK)
		}
	}
}
