package parquetfile

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/variant"
)

// VariantValue is a value of a variant column (PROTOCOL.md "Variant Data
// Type"): its metadata and value in the Parquet Variant binary encoding.
type VariantValue struct {
	Metadata []byte
	Value    []byte
}

// AppendJSON appends the variant as JSON text, rendered as Spark's to_json
// renders it (spark.sql.session.timeZone UTC): objects with their fields in
// key order, decimals in plain notation without trailing zeros (4.00 is 4),
// doubles and floats as Java prints them ("1.0E300"), dates, timestamps,
// binaries (base64) and UUIDs as strings.
func (v VariantValue) AppendJSON(dst []byte) ([]byte, error) {
	m, err := variant.DecodeMetadata(v.Metadata)
	if err != nil {
		return dst, fmt.Errorf("variant: %w", err)
	}
	val, err := variant.Decode(m, v.Value)
	if err != nil {
		return dst, fmt.Errorf("variant: %w", err)
	}
	return appendVariantJSON(dst, val)
}

// String is the variant's JSON text, or the decoding error.
func (v VariantValue) String() string {
	b, err := v.AppendJSON(nil)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func appendVariantJSON(dst []byte, v variant.Value) ([]byte, error) {
	var err error
	switch v.Basic() {
	case variant.BasicShortString:
		return appendJSONString(dst, v.Str()), nil
	case variant.BasicObject:
		dst = append(dst, '{')
		for i, f := range v.ObjectValue().Fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendJSONString(dst, f.Name), ':')
			if dst, err = appendVariantJSON(dst, f.Value); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case variant.BasicArray:
		dst = append(dst, '[')
		for i, e := range v.ArrayValue().Elements {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendVariantJSON(dst, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	}
	switch p := v.Type(); p {
	case variant.PrimitiveNull:
		return append(dst, "null"...), nil
	case variant.PrimitiveTrue, variant.PrimitiveFalse:
		return strconv.AppendBool(dst, p == variant.PrimitiveTrue), nil
	case variant.PrimitiveInt8, variant.PrimitiveInt16, variant.PrimitiveInt32, variant.PrimitiveInt64:
		return strconv.AppendInt(dst, v.Int(), 10), nil
	case variant.PrimitiveDouble:
		return appendJavaFloat(dst, v.FloatValue(), 64), nil
	case variant.PrimitiveFloat:
		return appendJavaFloat(dst, v.FloatValue(), 32), nil
	case variant.PrimitiveDecimal4, variant.PrimitiveDecimal8:
		return appendVariantDecimal(dst, big.NewInt(v.Int()), int(v.Scale())), nil
	case variant.PrimitiveDecimal16:
		le := v.Decimal16Value()
		var be [16]byte
		for i := range le {
			be[i] = le[15-i]
		}
		return appendVariantDecimal(dst, bigFromTwosComplement(be[:]), int(v.Scale())), nil
	case variant.PrimitiveString:
		return appendJSONString(dst, v.Str()), nil
	case variant.PrimitiveBinary:
		return appendJSONString(dst, base64.StdEncoding.EncodeToString(v.Bytes())), nil
	case variant.PrimitiveDate:
		return appendJavaTime(dst, time.Unix(v.Int()*86400, 0), time.DateOnly), nil
	case variant.PrimitiveTimestamp:
		return appendJavaTime(dst, time.UnixMicro(v.Int()), "2006-01-02 15:04:05.999999-07:00"), nil
	case variant.PrimitiveTimestampNTZ:
		return appendJavaTime(dst, time.UnixMicro(v.Int()), "2006-01-02 15:04:05.999999"), nil
	case variant.PrimitiveUUID:
		return appendJSONString(dst, v.UUIDValue().String()), nil
	}
	return dst, fmt.Errorf("variant: cannot render type %d as JSON", v.Type())
}

// appendVariantDecimal writes unscaled×10^-scale as Spark's to_json does
// (Java's BigDecimal stripTrailingZeros, then toPlainString): plain
// notation, no trailing fraction zeros, no point when no fraction is left.
func appendVariantDecimal(dst []byte, unscaled *big.Int, scale int) []byte {
	s := formatDecimal(unscaled, scale, scale)
	if scale > 0 {
		s = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
	}
	return append(dst, s...)
}

// appendJavaTime quotes t, in UTC, formatted with layout, as Java's
// ISO_LOCAL_DATE (and ISO_LOCAL_TIME) formats it for Spark's to_json: a
// year past 9999 is signed ("+10000-01-01"); layout drops trailing zeros
// of the fraction of a second.
func appendJavaTime(dst []byte, t time.Time, layout string) []byte {
	t = t.UTC()
	dst = append(dst, '"')
	if t.Year() > 9999 {
		dst = append(dst, '+')
	}
	return append(t.AppendFormat(dst, layout), '"')
}

// appendJSONString quotes s as Jackson does for Spark: '"', '\\' and
// control characters escaped, everything else (non-ASCII too) as it is.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// appendJavaFloat writes f as Java's Double.toString (bits 64) or
// Float.toString (32) does: the shortest digits that read back as f, in
// plain notation with at least one fraction digit between 10^-3 and 10^7,
// else as d.dddE±n with at least two digits, the two nearest f when one
// would do (Double.MIN_VALUE is 4.9E-324, not 5.0E-324); NaN and Infinity
// as Java spells them (quoted: JSON has no such numbers). Java before 19
// prints some values with more digits than needed (1e23 as
// 9.999999999999999E22): this is what Java 19 and later print.
func appendJavaFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	if abs := math.Abs(f); abs == 0 || abs >= 1e-3 && abs < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, bits)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return append(dst, s...)
	}
	s := strconv.FormatFloat(f, 'e', -1, bits) // d.ddde±nn
	// One digit would do: Java takes the two nearest f.
	if !strings.Contains(s, ".") {
		s = strconv.FormatFloat(f, 'e', 1, bits)
	}
	mant, exp, _ := strings.Cut(s, "e")
	n, _ := strconv.Atoi(exp)
	return strconv.AppendInt(append(append(dst, mant...), 'E'), int64(n), 10)
}

// check decodes v, so that no file holds a variant readers cannot decode.
func (v VariantValue) check() error {
	m, err := variant.DecodeMetadata(v.Metadata)
	if err == nil {
		_, err = variant.Decode(m, v.Value)
	}
	if err != nil {
		return fmt.Errorf("not a variant: %w", err)
	}
	return nil
}

// variantReader reads a variant column of a data file from its rows'
// leaf values: unshredded (metadata and value binaries) directly, shredded
// (PROTOCOL.md "Variant Shredding": typed_value columns) by rebuilding the
// variant from all its columns with parquet-go.
type variantReader struct {
	meta, value int // leaf columns, unshredded
	// shredded: the column alone as a schema, and its leaves' range.
	sub         *parquet.Schema
	first, last int
	subRow      parquet.Row
}

func newVariantReader(f parquet.Field, first int) (*variantReader, error) {
	if f.Leaf() || f.Repeated() {
		return nil, fmt.Errorf("file column %s is no variant group", f.Type())
	}
	r := &variantReader{meta: -1, value: -1, first: first, last: first + CountLeaves(f)}
	leaf := first
	for _, c := range f.Fields() {
		switch c.Name() {
		case "metadata":
			r.meta = leaf
		case "value":
			r.value = leaf
		case "typed_value":
			r.sub = parquet.NewSchema("variant", parquet.Group{"v": f}) // a Group: Reconstruct fills structs by its field names
		}
		leaf += CountLeaves(c)
	}
	if r.meta < 0 || r.value < 0 && r.sub == nil {
		return nil, errors.New("variant group without metadata and value")
	}
	return r, nil
}

// shreddedTarget receives a shredded variant rebuilt by parquet-go, encoded.
type shreddedTarget struct {
	V *struct{ Metadata, Value []byte } `parquet:"v"`
}

// read returns the variant of row pr (start and end locate each leaf
// column's values in it), nil when null; the bytes are copies.
func (r *variantReader) read(pr parquet.Row, start, end []int) (any, error) {
	m := start[r.meta]
	if m < 0 || pr[m].IsNull() {
		return nil, nil
	}
	if r.sub == nil {
		return VariantValue{Metadata: bytes.Clone(pr[m].ByteArray()), Value: bytes.Clone(pr[start[r.value]].ByteArray())}, nil
	}
	r.subRow = r.subRow[:0]
	for c := r.first; c < r.last; c++ {
		if start[c] < 0 {
			continue
		}
		for _, v := range pr[start[c]:end[c]] {
			r.subRow = append(r.subRow, v.Level(v.RepetitionLevel(), v.DefinitionLevel(), c-r.first))
		}
	}
	var t shreddedTarget
	if err := r.sub.Reconstruct(&t, r.subRow); err != nil {
		return nil, fmt.Errorf("shredded variant: %w", err)
	}
	if t.V == nil {
		return nil, nil
	}
	return VariantValue{Metadata: t.V.Metadata, Value: t.V.Value}, nil
}
