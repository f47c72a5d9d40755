package parquetfile

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/deltaflow/deltaflow/delta/schema"
	"github.com/parquet-go/parquet-go"
)

// NestedLeaf is one Parquet leaf column of a struct, array or map column.
// The leaves of a column are in the order Parquet stores them, depth first,
// in Spark's layout: an array is a LIST group holding a repeated group
// "list" of one field "element"; a map is a MAP group holding a repeated
// group "key_value" of a required "key" and a "value".
type NestedLeaf struct {
	// Path is the leaf's field names below the column, e.g. [loc lat] or
	// [tags list element].
	Path []string
	// Type is a primitive or decimal type.
	Type schema.DataType
	// MaxDef is the definition level of a present value, counting every
	// optional or repeated level from the column down (the column's own
	// level, when it is nullable, included); MaxRep the repetition level
	// of the innermost repeated level (0: none).
	MaxDef, MaxRep int
}

// IsNested says whether t is a struct, array or map type.
func IsNested(t schema.DataType) bool {
	switch t.(type) {
	case *schema.StructType, *schema.ArrayType, *schema.MapType:
		return true
	}
	return false
}

// ErrNestedType is wrapped by NestedLeaves' error for a nested type no
// data file holds yet (a variant below the column, an empty struct).
var ErrNestedType = errors.New("nested type cannot be written")

// NestedLeaves are the leaves of the nested column f, in Parquet order.
func NestedLeaves(f *schema.StructField) ([]NestedLeaf, error) {
	def := 0
	if f.Nullable {
		def = 1
	}
	return appendLeaves(nil, nil, f.Type, def, 0)
}

func appendLeaves(dst []NestedLeaf, path []string, t schema.DataType, def, rep int) ([]NestedLeaf, error) {
	switch t := t.(type) {
	case *schema.StructType:
		if len(t.Fields) == 0 {
			return nil, fmt.Errorf("%w: an empty struct at %v", ErrNestedType, path)
		}
		for i := range t.Fields {
			f := &t.Fields[i]
			d := def
			if f.Nullable {
				d++
			}
			var err error
			if dst, err = appendLeaves(dst, append(slices.Clip(path), schema.PhysicalName(f)), f.Type, d, rep); err != nil {
				return nil, err
			}
		}
		return dst, nil
	case *schema.ArrayType:
		d := def + 1 // the repeated group "list"
		if t.ContainsNull {
			d++
		}
		return appendLeaves(dst, append(slices.Clip(path), "list", "element"), t.ElementType, d, rep+1)
	case *schema.MapType:
		var err error
		if dst, err = appendLeaves(dst, append(slices.Clip(path), "key_value", "key"), t.KeyType, def+1, rep+1); err != nil {
			return nil, err
		}
		d := def + 1
		if t.ValueContainsNull {
			d++
		}
		return appendLeaves(dst, append(slices.Clip(path), "key_value", "value"), t.ValueType, d, rep+1)
	}
	if t == schema.Variant {
		return nil, fmt.Errorf("%w: a variant at %v", ErrNestedType, path)
	}
	return append(dst, NestedLeaf{Path: path, Type: t, MaxDef: def, MaxRep: rep}), nil
}

// AppendNested appends to dst the encoding of one value of a nested
// column: the values of all its leaves, each with Column() set to the
// leaf's index in NestedLeaves and its repetition and definition levels
// set. leaves may interleave the leaves (as a walk of the value meets
// them), but each leaf's values must be in Parquet order, and each leaf
// must have at least one value (a null at the level where the value
// ends). AppendNested sorts leaves by leaf, keeping that order. The
// encoding is what a mapped row carries in the column's one value, a byte
// array, which the FileWriter expands into the leaves' values.
func AppendNested(dst []byte, leaves []parquet.Value) []byte {
	slices.SortStableFunc(leaves, func(a, b parquet.Value) int { return cmp.Compare(a.Column(), b.Column()) })
	for _, v := range leaves {
		dst = binary.AppendUvarint(dst, uint64(v.Column()))
		dst = append(dst, byte(v.RepetitionLevel()), byte(v.DefinitionLevel()))
		if v.IsNull() {
			dst = append(dst, 0)
			continue
		}
		k := v.Kind()
		dst = append(dst, byte(k)+1)
		switch k {
		case parquet.Boolean:
			dst = append(dst, byte(boolInt(v.Boolean())))
		case parquet.Int32:
			dst = binary.LittleEndian.AppendUint32(dst, uint32(v.Int32()))
		case parquet.Int64:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(v.Int64()))
		case parquet.Float:
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v.Float()))
		case parquet.Double:
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v.Double()))
		default: // byte arrays, fixed or not
			b := v.ByteArray()
			dst = binary.AppendUvarint(dst, uint64(len(b)))
			dst = append(dst, b...)
		}
	}
	return dst
}

// errNestedEncoding is the error of bytes that are not AppendNested's.
var errNestedEncoding = errors.New("malformed nested value encoding")

// appendDecodedNested appends the values AppendNested encoded in b to row,
// with column indexes first + leaf. Byte arrays refer to b.
func appendDecodedNested(row parquet.Row, b []byte, first int) (parquet.Row, error) {
	for len(b) > 0 {
		leaf, n := binary.Uvarint(b)
		if n <= 0 || len(b) < n+3 {
			return row, errNestedEncoding
		}
		rep, def, kind := int(b[n]), int(b[n+1]), b[n+2]
		b = b[n+3:]
		col := first + int(leaf)
		if kind == 0 {
			row = append(row, parquet.Value{}.Level(rep, def, col))
			continue
		}
		var v parquet.Value
		switch k := parquet.Kind(kind - 1); k {
		case parquet.Boolean:
			if len(b) < 1 {
				return row, errNestedEncoding
			}
			v, b = parquet.BooleanValue(b[0] == 1), b[1:]
		case parquet.Int32, parquet.Float:
			if len(b) < 4 {
				return row, errNestedEncoding
			}
			u := binary.LittleEndian.Uint32(b)
			if k == parquet.Int32 {
				v = parquet.Int32Value(int32(u))
			} else {
				v = parquet.FloatValue(math.Float32frombits(u))
			}
			b = b[4:]
		case parquet.Int64, parquet.Double:
			if len(b) < 8 {
				return row, errNestedEncoding
			}
			u := binary.LittleEndian.Uint64(b)
			if k == parquet.Int64 {
				v = parquet.Int64Value(int64(u))
			} else {
				v = parquet.DoubleValue(math.Float64frombits(u))
			}
			b = b[8:]
		case parquet.ByteArray, parquet.FixedLenByteArray:
			size, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < size {
				return row, errNestedEncoding
			}
			bs := b[n : n+int(size)]
			if k == parquet.ByteArray {
				v = parquet.ByteArrayValue(bs)
			} else {
				v = parquet.FixedLenByteArrayValue(bs)
			}
			b = b[n+int(size):]
		default:
			return row, errNestedEncoding
		}
		row = append(row, v.Level(rep, def, col))
	}
	return row, nil
}
