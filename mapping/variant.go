package mapping

import (
	"bytes"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/parquet-go/parquet-go/variant"
	"github.com/valyala/fastjson"
)

// variantEncoder encodes JSON values as variants (the Parquet Variant
// binary encoding) the way Spark's parse_json does, so that a variant
// column reads in Spark as if Spark had parsed the JSON: integers in the
// smallest of int8..int64, other numbers without an exponent as a decimal
// of their own precision and scale (up to 38 digits), the rest as doubles;
// duplicate keys are an error. It reuses its buffers: encoding a record
// does not allocate in steady state.
type variantEncoder struct {
	meta    variant.MetadataBuilder
	b       *variant.Builder
	parser  fastjson.Parser
	scratch []byte // a number's text; the metadata
	digits  []byte
	visitFn func(k []byte, v *fastjson.Value)
	bad     bool // a string that is not UTF-8 was met
}

func newVariantEncoder() *variantEncoder {
	e := &variantEncoder{}
	e.b = variant.NewBuilderWithMetadata(&e.meta)
	e.visitFn = e.member
	return e
}

// encode encodes v into out (metadata in out.m, value in out.b, both in
// a). A string is JSON text and is parsed first (the sensor bridge's
// payload is such a string, as Spark's parse_json takes one); any other
// JSON value is encoded as it is.
func (e *variantEncoder) encode(v *fastjson.Value, a *Arena, out *cell) (failure, []byte) {
	e.meta.Reset()
	e.b.Reset()
	e.bad = false
	if v.Type() == fastjson.TypeString {
		s, _ := v.StringBytes()
		inner, err := e.parser.ParseBytes(s)
		if err != nil {
			return failVariant, s
		}
		v = inner
	}
	e.value(v)
	if e.bad {
		return failUTF8, nil
	}
	value, err := e.b.Bytes()
	if err != nil { // a duplicate key: Spark's parse_json refuses it too
		return failVariantValue, []byte(strings.TrimPrefix(err.Error(), "variant builder: "))
	}
	out.b = a.Copy(value)
	e.scratch = e.meta.AppendTo(e.scratch[:0])
	out.m = a.Copy(e.scratch)
	return ok, nil
}

func (e *variantEncoder) value(v *fastjson.Value) {
	switch v.Type() {
	case fastjson.TypeNull:
		e.b.Null()
	case fastjson.TypeTrue:
		e.b.Bool(true)
	case fastjson.TypeFalse:
		e.b.Bool(false)
	case fastjson.TypeString:
		s, _ := v.StringBytes()
		e.bad = e.bad || !utf8.Valid(s)
		e.b.String(unsafe.String(unsafe.SliceData(s), len(s))) // copied by the builder
	case fastjson.TypeNumber:
		e.scratch = v.MarshalTo(e.scratch[:0])
		e.number(e.scratch)
	case fastjson.TypeArray:
		e.b.BeginArray()
		a, _ := v.Array()
		for _, x := range a {
			e.value(x)
		}
		e.b.EndArray()
	case fastjson.TypeObject:
		e.b.BeginObject()
		o, _ := v.Object()
		o.Visit(e.visitFn)
		e.b.EndObject()
	}
}

// member encodes one member of an object; duplicate keys are reported by
// the builder.
func (e *variantEncoder) member(k []byte, v *fastjson.Value) {
	e.bad = e.bad || !utf8.Valid(k)
	e.b.Field(unsafe.String(unsafe.SliceData(k), len(k))) // interned as a copy
	e.value(v)
}

// number encodes a JSON number's text as Spark's parse_json does.
func (e *variantEncoder) number(text []byte) {
	s := unsafe.String(unsafe.SliceData(text), len(text))
	if !bytes.ContainsAny(text, ".eE") {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			switch {
			case n == int64(int8(n)):
				e.b.Int8(int8(n))
			case n == int64(int16(n)):
				e.b.Int16(int16(n))
			case n == int64(int32(n)):
				e.b.Int32(int32(n))
			default:
				e.b.Int64(n)
			}
			return
		}
	}
	if !bytes.ContainsAny(text, "eE") && e.decimal(text) {
		return
	}
	f, _ := strconv.ParseFloat(s, 64) // JSON syntax was checked by the parser
	e.b.Double(f)
}

// decimal encodes a plain number ("-12.30") as a decimal of its precision
// and scale (as Java's BigDecimal counts them), in the smallest of the
// 4, 8 and 16 byte forms; false if it has more than 38 digits.
func (e *variantEncoder) decimal(text []byte) bool {
	neg := text[0] == '-'
	if neg {
		text = text[1:]
	}
	intPart, frac, _ := bytes.Cut(text, []byte{'.'})
	scale := len(frac)
	e.digits = append(append(e.digits[:0], intPart...), frac...)
	digits := bytes.TrimLeft(e.digits, "0")
	precision := max(len(digits), 1)
	if precision > 38 || scale > 38 {
		return false
	}
	if precision <= 18 {
		var u int64
		for _, d := range digits {
			u = u*10 + int64(d-'0')
		}
		if neg {
			u = -u
		}
		if precision <= 9 && scale <= 9 {
			e.b.Decimal4(int32(u), byte(scale))
		} else {
			e.b.Decimal8(u, byte(scale))
		}
		return true
	}
	u, _ := new(big.Int).SetString(string(digits), 10)
	if neg {
		u.Neg(u)
	}
	var le [16]byte // two's complement, little-endian
	if u.Sign() < 0 {
		u.Add(u, new(big.Int).Lsh(big.NewInt(1), 128))
	}
	be := u.FillBytes(make([]byte, 16))
	for i := range le {
		le[i] = be[15-i]
	}
	e.b.Decimal16(le, byte(scale))
	return true
}
