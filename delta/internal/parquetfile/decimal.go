package parquetfile

import (
	"bytes"
	"encoding/binary"
	"math/big"
	"strconv"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/deltaflow/deltaflow/delta/schema"
)

// decimalPhysical is the Parquet type Spark writes a decimal as: INT32 up
// to 9 digits, INT64 up to 18, else the shortest FIXED_LEN_BYTE_ARRAY.
func decimalPhysical(d schema.DecimalType) parquet.Type {
	switch {
	case d.Precision <= 9:
		return parquet.Int32Type
	case d.Precision <= 18:
		return parquet.Int64Type
	}
	return parquet.FixedLenByteArrayType(d.FixedLen())
}

// decimalNode is the Parquet leaf of a decimal column. A decimal stored as
// a FIXED_LEN_BYTE_ARRAY is a signed (two's complement) integer, and the
// Parquet spec orders its statistics as such; parquet-go orders every
// fixed-length byte array as unsigned bytes, so the page, column chunk
// and column index bounds of a chunk holding -1 and 1 would say min 1,
// max -1, and Spark's Parquet filter pushdown would skip the row group
// for `c = 1`. signedFixed gives such a leaf signed bounds.
func decimalNode(d schema.DecimalType) parquet.Node {
	n := parquet.Decimal(d.Scale, d.Precision, decimalPhysical(d))
	if d.Precision <= 18 {
		return n
	}
	return parquet.Leaf(signedFixed{n.Type()})
}

// signedFixed is a FIXED_LEN_BYTE_ARRAY type (with its logical type)
// whose values order as big-endian two's complement integers: in
// comparisons, page bounds and the column index.
type signedFixed struct{ parquet.Type }

func (t signedFixed) Compare(a, b parquet.Value) int {
	return compareTwosComplement(a.ByteArray(), b.ByteArray())
}

func (t signedFixed) NewColumnBuffer(columnIndex, numValues int) parquet.ColumnBuffer {
	return signedBuffer{t.Type.NewColumnBuffer(columnIndex, numValues)}
}

func (t signedFixed) NewColumnIndexer(sizeLimit int) parquet.ColumnIndexer {
	return unorderedIndexer{t.Type.NewColumnIndexer(sizeLimit)}
}

// signedBuffer is a column buffer whose pages have signed bounds.
type signedBuffer struct{ parquet.ColumnBuffer }

func (b signedBuffer) Page() parquet.Page { return signedPage{b.ColumnBuffer.Page()} }

func (b signedBuffer) Clone() parquet.ColumnBuffer { return signedBuffer{b.ColumnBuffer.Clone()} }

// signedPage is a page of fixed-length two's complement values.
type signedPage struct{ parquet.Page }

func (p signedPage) Slice(i, j int64) parquet.Page { return signedPage{p.Page.Slice(i, j)} }

func (p signedPage) Bounds() (min, max parquet.Value, ok bool) {
	values := p.Data()
	data, size := values.FixedLenByteArray()
	if size == 0 || len(data) < size {
		return min, max, false
	}
	lo, hi := data[:size], data[:size]
	for off := size; off+size <= len(data); off += size {
		v := data[off : off+size]
		if compareTwosComplement(v, lo) < 0 {
			lo = v
		} else if compareTwosComplement(v, hi) > 0 {
			hi = v
		}
	}
	col := p.Column()
	return parquet.FixedLenByteArrayValue(lo).Level(0, 0, col), parquet.FixedLenByteArrayValue(hi).Level(0, 0, col), true
}

// unorderedIndexer is a column indexer whose index says its pages' bounds
// are unordered: parquet-go derives the order from unsigned bytes, which
// a signed column's bounds need not follow.
type unorderedIndexer struct{ parquet.ColumnIndexer }

func (x unorderedIndexer) ColumnIndex() format.ColumnIndex {
	ci := x.ColumnIndexer.ColumnIndex()
	ci.BoundaryOrder = format.Unordered
	return ci
}

// compareTwosComplement orders two big-endian two's complement integers
// of the same length: by sign, then as unsigned bytes.
func compareTwosComplement(a, b []byte) int {
	if len(a) == 0 || len(b) == 0 {
		return len(a) - len(b)
	}
	if na, nb := a[0]&0x80 != 0, b[0]&0x80 != 0; na != nb {
		if na {
			return -1
		}
		return 1
	}
	return bytes.Compare(a, b)
}

// decimal128 is a decimal's unscaled value, sign-extended to 128 bits
// (hi:lo, two's complement): every decimal of up to 38 digits.
type decimal128 struct {
	hi int64
	lo uint64
}

// decimalValue is the unscaled value of a decimal column's non-null
// Parquet value: INT32, INT64 or a big-endian two's complement of at most
// 16 bytes.
func decimalValue(v parquet.Value) decimal128 {
	switch v.Kind() {
	case parquet.Int32:
		x := int64(v.Int32())
		return decimal128{hi: x >> 63, lo: uint64(x)}
	case parquet.Int64:
		x := v.Int64()
		return decimal128{hi: x >> 63, lo: uint64(x)}
	}
	b := v.ByteArray()
	var buf [16]byte
	if len(b) > 0 && b[0]&0x80 != 0 {
		buf = [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	copy(buf[16-min(len(b), 16):], b[max(len(b)-16, 0):])
	return decimal128{hi: int64(binary.BigEndian.Uint64(buf[:8])), lo: binary.BigEndian.Uint64(buf[8:])}
}

func (d decimal128) less(e decimal128) bool {
	return d.hi < e.hi || (d.hi == e.hi && d.lo < e.lo)
}

// big is d as a big.Int.
func (d decimal128) big() *big.Int {
	n := new(big.Int).Lsh(big.NewInt(d.hi), 64)
	return n.Add(n, new(big.Int).SetUint64(d.lo))
}

// appendDecimalStat writes unscaled×10^-scale as Spark writes a decimal
// into the stats JSON: Jackson's writeNumber(BigDecimal), which is Java's
// BigDecimal.toString: plain ("12.30", "-0.000001") unless the exponent
// of the leading digit is below -6, then scientific ("1E-8", "1.23E-10",
// "0E-8" for a zero of scale 8).
func appendDecimalStat(b []byte, unscaled *big.Int, scale int) []byte {
	if unscaled.Sign() < 0 {
		b = append(b, '-')
	}
	start := len(b)
	b = new(big.Int).Abs(unscaled).Append(b, 10)
	digits := len(b) - start
	adjusted := digits - 1 - scale
	switch {
	case scale == 0:
		return b
	case adjusted >= -6: // plain notation
		if digits > scale {
			b = append(b, 0)
			point := len(b) - 1 - scale
			copy(b[point+1:], b[point:])
			b[point] = '.'
			return b
		}
		lead := scale - digits + 2 // "0." and the zeros before the digits
		b = append(b, make([]byte, lead)...)
		copy(b[start+lead:], b[start:start+digits])
		b[start], b[start+1] = '0', '.'
		for i := start + 2; i < start+lead; i++ {
			b[i] = '0'
		}
		return b
	}
	if digits > 1 { // d.ddd
		b = append(b, 0)
		copy(b[start+2:], b[start+1:])
		b[start+1] = '.'
	}
	b = append(b, 'E')
	return strconv.AppendInt(b, int64(adjusted), 10) // adjusted < -6: it has its sign
}
