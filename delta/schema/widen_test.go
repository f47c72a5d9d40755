package schema

import "testing"

// TestCanWiden: the type changes of PROTOCOL.md "Type Widening", and
// nothing else (date → timestamp_ntz, which the reader does not convert,
// is left out).
func TestCanWiden(t *testing.T) {
	dec := func(p, s int) DataType { return DecimalType{Precision: p, Scale: s} }
	for _, c := range []struct {
		from, to DataType
		want     bool
	}{
		{Byte, Short, true}, {Byte, Long, true}, {Short, Integer, true}, {Integer, Long, true},
		{Long, Integer, false}, {Integer, Integer, false},
		{Float, Double, true}, {Double, Float, false},
		{Byte, Double, true}, {Integer, Double, true}, {Long, Double, false}, {Integer, Float, false},
		{dec(5, 2), dec(8, 3), true}, {dec(5, 2), dec(6, 2), true}, {dec(5, 2), dec(7, 4), true},
		{dec(5, 2), dec(5, 3), false}, {dec(5, 2), dec(6, 4), false}, {dec(5, 2), dec(5, 2), false}, {dec(5, 2), dec(4, 1), false},
		{Integer, dec(10, 0), true}, {Short, dec(12, 2), true}, {Integer, dec(9, 0), false}, {Integer, dec(11, 2), false},
		{Long, dec(20, 0), true}, {Long, dec(19, 0), false}, {Long, dec(22, 2), true},
		{Date, TimestampNTZ, false}, {Date, Timestamp, false}, {String, Binary, false}, {Float, dec(10, 2), false},
	} {
		if got := CanWiden(c.from, c.to); got != c.want {
			t.Errorf("CanWiden(%s, %s) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}
