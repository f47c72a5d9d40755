package mapping

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta"
)

// Decimal columns, decimal(p,s) with 1 ≤ p ≤ 38: a value is stored as
// its unscaled integer, value×10^s, below 10^p in magnitude, which 128
// bits hold (10^38 < 2^127). Casts into them work on such integers and do
// not allocate. As Spark's Decimal.set (BigDecimal.setScale(s, HALF_UP)),
// which from_json and from_avro cast with, a value with more fraction
// digits than s is rounded half up (away from zero at a 5: 12.345 is
// 12.35, -0.005 is -0.01), and one of more than p digits once rounded is
// an overflow.

// u128 is an unsigned 128-bit integer.
type u128 struct{ hi, lo uint64 }

// pow10s[n] is 10^n.
var pow10s = func() (t [delta.MaxDecimalPrecision + 1]u128) {
	t[0] = u128{lo: 1}
	for i := 1; i < len(t); i++ {
		t[i], _ = t[i-1].mulAdd(10, 0)
	}
	return t
}()

// mulAdd is x*m + a; over reports a result past 128 bits.
func (x u128) mulAdd(m, a uint64) (r u128, over bool) {
	h1, l1 := bits.Mul64(x.lo, m)
	h2, l2 := bits.Mul64(x.hi, m)
	var c uint64
	r.lo, c = bits.Add64(l1, a, 0)
	r.hi, c = bits.Add64(l2, h1, c)
	return r, h2 != 0 || c != 0
}

// div10 is x/10 and x%10.
func (x u128) div10() (u128, uint64) {
	q := u128{hi: x.hi / 10}
	var r uint64
	q.lo, r = bits.Div64(x.hi%10, x.lo, 10)
	return q, r
}

// neg is -x in two's complement.
func (x u128) neg() u128 {
	lo, c := bits.Add64(^x.lo, 1, 0)
	return u128{hi: ^x.hi + c, lo: lo}
}

func (x u128) less(y u128) bool { return x.hi < y.hi || (x.hi == y.hi && x.lo < y.lo) }

func (x u128) isZero() bool { return x.hi == 0 && x.lo == 0 }

// parseColumnType is a column's type: a scalar type (parseScalarType),
// or a struct, array or map of them (parseNestedType).
func parseColumnType(name string) (delta.DataType, error) {
	if strings.ContainsRune(name, '<') {
		return parseNestedType(name)
	}
	return parseScalarType(name)
}

// parseScalarType is a name in columnTypes, or decimal(p,s) with
// 1 ≤ p ≤ 38 and 0 ≤ s ≤ p (spaces allowed inside).
func parseScalarType(name string) (delta.DataType, error) {
	if t, ok := columnTypes[name]; ok {
		return t, nil
	}
	inner, ok := strings.CutPrefix(name, "decimal(")
	if inner, ok2 := strings.CutSuffix(inner, ")"); ok && ok2 {
		ps, ss, _ := strings.Cut(inner, ",")
		p, err1 := strconv.Atoi(strings.TrimSpace(ps))
		s, err2 := strconv.Atoi(strings.TrimSpace(ss))
		switch {
		case err1 != nil || err2 != nil:
		case p < 1 || p > delta.MaxDecimalPrecision:
			return nil, fmt.Errorf("%q: the precision must be 1 to %d", name, delta.MaxDecimalPrecision)
		case s < 0 || s > p:
			return nil, fmt.Errorf("%q: the scale must be 0 to the precision, %d", name, p)
		default:
			return delta.DecimalType{Precision: p, Scale: s}, nil
		}
		return nil, fmt.Errorf("malformed %q (want decimal(<precision>,<scale>), e.g. decimal(10,2))", name)
	}
	return nil, fmt.Errorf("unknown type %q", name)
}

// decimalColumn is a decimal column's precision and scale, and the length
// of its FIXED_LEN_BYTE_ARRAY leaf (0: INT32 or INT64).
type decimalColumn struct {
	prec, scale int
	fixed       int
}

func newDecimalColumn(t delta.DataType) decimalColumn {
	d, _ := t.(delta.DecimalType)
	c := decimalColumn{prec: d.Precision, scale: d.Scale}
	if d.Precision > 18 {
		c.fixed = d.FixedLen()
	}
	return c
}

// set stores -mag (neg) or mag in out, if it fits the column: its
// unscaled value as a 128-bit two's complement, out.hi:out.i.
func (d *decimalColumn) set(neg bool, mag u128, out *cell) failure {
	if !mag.less(pow10s[d.prec]) {
		return failOverflow
	}
	if neg {
		mag = mag.neg()
	}
	out.i, out.hi = int64(mag.lo), int64(mag.hi)
	return ok
}

// value is the Parquet value of unscaled value hi:lo: INT32 up to 9
// digits, INT64 up to 18, else the column's FIXED_LEN_BYTE_ARRAY (big
// endian two's complement), copied into a.
func (d *decimalColumn) value(hi, lo int64, a *Arena) parquet.Value {
	switch {
	case d.fixed == 0 && d.prec <= 9:
		return parquet.Int32Value(int32(lo))
	case d.fixed == 0:
		return parquet.Int64Value(lo)
	}
	var buf [16]byte
	binary.BigEndian.PutUint64(buf[:8], uint64(hi))
	binary.BigEndian.PutUint64(buf[8:], uint64(lo))
	return parquet.FixedLenByteArrayValue(a.Copy(buf[16-d.fixed:]))
}

// rescale casts -mag (neg) or mag, of scale from, into the column:
// multiplied by 10^(s−from), or divided by 10^(from−s) and rounded half up.
func (d *decimalColumn) rescale(neg bool, mag u128, from int, out *cell) failure {
	switch k := d.scale - from; {
	case k > 0:
		for ; k > 0 && !mag.isZero(); k-- {
			var over bool
			if mag, over = mag.mulAdd(10, 0); over || !mag.less(pow10s[d.prec]) {
				return failOverflow
			}
		}
	case k < 0:
		var r uint64 // the last digit dropped: the first below the scale
		for ; k < 0; k++ {
			if mag.isZero() {
				r = 0 // the digits above those dropped are zeros
				break
			}
			mag, r = mag.div10()
		}
		if r >= 5 {
			mag, _ = mag.mulAdd(1, 1)
		}
	}
	return d.set(neg && !mag.isZero(), mag, out)
}

// castInt casts an integer.
func (d *decimalColumn) castInt(n int64, out *cell) failure {
	mag := uint64(n)
	if n < 0 {
		mag = -mag // math.MinInt64 too: 2^63
	}
	return d.rescale(n < 0, u128{lo: mag}, 0, out)
}

// maxUnscaledBytes bounds an Avro decimal's unscaled value (after its
// sign extension) at 256 bits, 77 digits: one longer, and so of more
// digits than any column holds, is an overflow whatever its scale, so
// that a hostile record cannot make the cast divide huge numbers.
const maxUnscaledBytes = 32

// castTwosComplement casts an Avro decimal of scale from, given as its
// unscaled value in big-endian two's complement of any length. An empty
// one is no number, as for Java's BigInteger.
func (d *decimalColumn) castTwosComplement(b []byte, from int, out *cell) failure {
	if len(b) == 0 {
		return failCast
	}
	neg := b[0]&0x80 != 0
	var sign byte
	if neg {
		sign = 0xff
	}
	for len(b) > 16 && b[0] == sign && b[1]&0x80 == sign&0x80 { // sign extension
		b = b[1:]
	}
	if len(b) > 16 {
		return d.castBig(neg, b, from, out)
	}
	buf := [16]byte{sign, sign, sign, sign, sign, sign, sign, sign, sign, sign, sign, sign, sign, sign, sign, sign}
	copy(buf[16-len(b):], b)
	x := u128{hi: binary.BigEndian.Uint64(buf[:8]), lo: binary.BigEndian.Uint64(buf[8:])}
	if neg {
		x = x.neg() // -2^127 too: its magnitude is 2^127
	}
	return d.rescale(neg, x, from, out)
}

// castBig is castTwosComplement of an unscaled value past 128 bits, 38
// digits: it fits only divided by 10^(from−s). Rare (an Avro decimal of
// more than 38 digits), so it may allocate.
func (d *decimalColumn) castBig(neg bool, b []byte, from int, out *cell) failure {
	if len(b) > maxUnscaledBytes || from <= d.scale {
		return failOverflow
	}
	if from-d.scale > 3*len(b)+1 { // |value| < 2^(8·len) < 10^(3·len): it rounds to 0
		return d.set(false, u128{}, out)
	}
	n := new(big.Int).SetBytes(b)
	if neg {
		n.Sub(new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))), n) // the magnitude
	}
	div := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(from-d.scale)), nil)
	q, r := n.QuoRem(n, div, new(big.Int))
	if r.Lsh(r, 1).Cmp(div) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if q.BitLen() > 128 {
		return failOverflow
	}
	var buf [16]byte
	q.FillBytes(buf[:])
	return d.set(neg && q.Sign() != 0, u128{hi: binary.BigEndian.Uint64(buf[:8]), lo: binary.BigEndian.Uint64(buf[8:])}, out)
}

// castText casts a number's text as Spark's from_json reads a JSON number
// or string into a decimal, with Java's BigDecimal(String): an optional
// sign, digits with an optional point (".5" and "5." too), an optional
// exponent (e or E, a sign, digits: 1e2, 1.5E-3). In a string (commas),
// commas are dropped first, as Spark's en-US parser does: "1,234.5" is
// 1234.5. Anything else (spaces, "NaN", "0x1A") is failCast. Any number
// of digits, and exponents up to ±2^31−1, are read exactly.
func (d *decimalColumn) castText(b []byte, commas bool, out *cell) failure {
	t := numText{b: b, commas: commas}
	neg := false
	if c := t.peek(); c == '+' || c == '-' {
		neg = c == '-'
		t.i++
	}
	// The mantissa: how many digits, how many of them are leading zeros,
	// how many follow the point.
	first := t.i
	digits, lead, frac := 0, 0, 0
	point := false
mantissa:
	for {
		switch c := t.peek(); {
		case c >= '0' && c <= '9':
			if c == '0' && lead == digits {
				lead++
			}
			digits++
			if point {
				frac++
			}
		case c == '.' && !point:
			point = true
		default:
			break mantissa
		}
		t.i++
	}
	last := t.i
	if digits == 0 {
		return failCast
	}
	exp, good := t.exponent()
	if !good {
		return failCast
	}
	n := digits - lead // significant digits
	if n == 0 {
		return d.set(false, u128{}, out)
	}
	// The value is D×10^(exp−frac) for D the n significant digits; the
	// unscaled value keeps its first m = n + exp − frac + s of them.
	m := int64(n) + exp - int64(frac) + int64(d.scale)
	if m > int64(d.prec) {
		return failOverflow
	}
	var mag u128
	var round byte // the first digit dropped
	if m >= 0 {
		kept, seen := int64(0), 0
		for _, c := range b[first:last] {
			if c < '0' || c > '9' {
				continue
			}
			if seen++; seen <= lead {
				continue
			}
			if kept == m {
				round = c
				break
			}
			mag, _ = mag.mulAdd(10, uint64(c-'0'))
			kept++
		}
		for ; kept < m; kept++ { // the zeros the exponent adds
			mag, _ = mag.mulAdd(10, 0)
		}
	}
	if round >= '5' {
		mag, _ = mag.mulAdd(1, 1)
	}
	return d.set(neg && !mag.isZero(), mag, out)
}

// numText reads a number's text; with commas, it skips them.
type numText struct {
	b      []byte
	i      int
	commas bool
}

// end is what peek returns at the end of the text: no byte.
const end = -1

// peek is the next byte, or end.
func (t *numText) peek() int {
	for t.commas && t.i < len(t.b) && t.b[t.i] == ',' {
		t.i++
	}
	if t.i == len(t.b) {
		return end
	}
	return int(t.b[t.i])
}

// exponent reads the rest of the text: nothing, or an exponent; good is
// false for anything else, or an exponent past Java's int.
func (t *numText) exponent() (exp int64, good bool) {
	switch t.peek() {
	case end:
		return 0, true
	case 'e', 'E':
		t.i++
	default:
		return 0, false
	}
	neg := false
	if c := t.peek(); c == '+' || c == '-' {
		neg = c == '-'
		t.i++
	}
	if t.peek() == end {
		return 0, false
	}
	for c := t.peek(); c != end; c = t.peek() {
		if c < '0' || c > '9' {
			return 0, false
		}
		if exp = exp*10 + int64(c-'0'); exp > math.MaxInt32 {
			return 0, false
		}
		t.i++
	}
	if neg {
		exp = -exp
	}
	return exp, true
}

// nonFinite reports whether a JSON number's text is NaN or an infinity,
// which fastjson reads as numbers.
func nonFinite(b []byte) bool {
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		b = b[1:]
	}
	return len(b) > 0 && (b[0]|0x20 == 'n' || b[0]|0x20 == 'i')
}

func isDecimal(t delta.DataType) bool {
	_, ok := t.(delta.DecimalType)
	return ok
}

// appendPlainDecimal appends unscaled value hi:lo (two's complement) of
// scale s in plain notation with s fraction digits, as Java's
// BigDecimal.toPlainString writes it and Spark 4 writes a decimal
// partition value ("12.50", "-7", "0.0000000001"). Spark 3.5 writes
// BigDecimal.toString, the same but where the value's adjusted exponent
// is below −6 ("1E-10"); both read either.
func appendPlainDecimal(dst []byte, hi, lo int64, s int) []byte {
	mag := u128{hi: uint64(hi), lo: uint64(lo)}
	if hi < 0 {
		dst = append(dst, '-')
		mag = mag.neg()
	}
	var buf [40]byte // 10^38 < 2^127: at most 39 digits
	i := len(buf)
	for {
		var r uint64
		mag, r = mag.div10()
		i--
		buf[i] = byte('0' + r)
		if mag.isZero() {
			break
		}
	}
	for len(buf)-i <= s { // a zero before the point
		i--
		buf[i] = '0'
	}
	digits := buf[i:]
	if s == 0 {
		return append(dst, digits...)
	}
	n := len(digits) - s
	return append(append(append(dst, digits[:n]...), '.'), digits[n:]...)
}
