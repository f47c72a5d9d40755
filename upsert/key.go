package upsert

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta"
)

// ErrNullKey is the error of a row whose key column is null: it has no
// identity to upsert by, and goes to the DLQ.
var ErrNullKey = errors.New("a key column is null")

// keyTypes are the column types a key column may have, with decimals:
// their values encode the same from a mapped row and from a data file read
// back.
var keyTypes = []delta.PrimitiveType{delta.String, delta.Integer, delta.Long}

// keyKind is how a key column's values encode.
type keyKind uint8

const (
	keyString  keyKind = iota
	keyLong            // integer and long are one kind: a key may widen
	keyDecimal         // its unscaled value, whatever its Parquet type
)

// Keys encodes the key columns of a table's rows as one byte string per
// row, equal for equal keys whichever side they come from: a row the
// mapper built (parquet values) or a data file read back (Go values).
type Keys struct {
	names []string
	leaf  []int // each key column's leaf in a mapped row of data columns
	kind  []keyKind
}

// NewKeys returns the encoder of the key columns names of a table whose
// data columns (its schema without the partition columns) are data.
func NewKeys(data *delta.StructType, names []string) (*Keys, error) {
	if len(names) == 0 {
		return nil, errors.New("no key columns")
	}
	k := &Keys{names: slices.Clone(names)}
	for _, name := range names {
		leaf, typ := dataLeaf(data, name)
		if leaf < 0 {
			return nil, fmt.Errorf("key column %q is not a data column (a partition column cannot be a key yet)", name)
		}
		kind := keyLong
		switch _, decimal := data.Field(name).Type.(delta.DecimalType); {
		case decimal:
			kind = keyDecimal
		case !slices.Contains(keyTypes, typ):
			return nil, fmt.Errorf("key column %q is %v: a key column is a string, integer, long or decimal", name, data.Field(name).Type)
		case typ == delta.String:
			kind = keyString
		}
		k.leaf = append(k.leaf, leaf)
		k.kind = append(k.kind, kind)
	}
	return k, nil
}

// dataLeaf is column name's leaf in a mapped row of data columns, and its
// type if primitive: -1 when data has no such column.
func dataLeaf(data *delta.StructType, name string) (int, delta.PrimitiveType) {
	n := 0
	for _, f := range data.Fields {
		if f.Name == name {
			typ, _ := f.Type.(delta.PrimitiveType)
			return n, typ
		}
		n += leaves(f.Type)
	}
	return -1, ""
}

// leaves is the number of Parquet leaf columns a column of type t has in a
// mapped row: a variant's two (metadata, value), else one.
func leaves(t delta.DataType) int {
	if t == delta.Variant {
		return 2
	}
	return 1
}

// Names are the key columns, in key order.
func (k *Keys) Names() []string { return k.names }

// AppendRow appends the key of a mapped row (data columns) to dst.
func (k *Keys) AppendRow(dst []byte, row parquet.Row) ([]byte, error) {
	for i, leaf := range k.leaf {
		var err error
		if dst, err = k.appendValue(dst, i, row[leaf]); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// AppendColumns appends the key of a row read from a data file (its key
// columns' values, in key order: delta.DataFileColumns) to dst.
func (k *Keys) AppendColumns(dst []byte, vals []parquet.Value) ([]byte, error) {
	for i, v := range vals {
		var err error
		if dst, err = k.appendValue(dst, i, v); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// appendValue appends key column i's value v. A file's integer and long
// columns, and a mapped row's, encode alike; so do a decimal's INT32,
// INT64 and FIXED_LEN_BYTE_ARRAY (a decimal widened to more digits).
func (k *Keys) appendValue(dst []byte, i int, v parquet.Value) ([]byte, error) {
	switch {
	case v.IsNull():
		return dst, fmt.Errorf("%w: %s", ErrNullKey, k.names[i])
	case k.kind[i] == keyString:
		return appendString(dst, v.ByteArray()), nil
	case k.kind[i] == keyDecimal:
		return appendDecimal(dst, k.names[i], v)
	case v.Kind() == parquet.Int32:
		return appendLong(dst, int64(v.Int32())), nil
	case v.Kind() == parquet.Int64:
		return appendLong(dst, v.Int64()), nil
	}
	return dst, fmt.Errorf("key column %s: a %v value", k.names[i], v.Kind())
}

// Each value is tagged with its kind and strings are length-prefixed, so
// that no two keys of different values encode alike.
func appendString(dst, s []byte) []byte {
	dst = append(dst, 's')
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendLong(dst []byte, n int64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 'l'), uint64(n))
}

// decimalLen is the length of an encoded decimal: its unscaled value as a
// 128-bit big-endian two's complement (38 digits fit).
const decimalLen = 16

// appendDecimal appends decimal key column name's value v, an unscaled
// value of the column's scale, sign-extended to decimalLen bytes.
func appendDecimal(dst []byte, name string, v parquet.Value) ([]byte, error) {
	var buf [8]byte
	b := buf[:]
	switch v.Kind() {
	case parquet.Int32:
		binary.BigEndian.PutUint64(b, uint64(int64(v.Int32())))
	case parquet.Int64:
		binary.BigEndian.PutUint64(b, uint64(v.Int64()))
	case parquet.FixedLenByteArray, parquet.ByteArray:
		if b = v.ByteArray(); len(b) > decimalLen || len(b) == 0 {
			return dst, fmt.Errorf("key column %s: a decimal of %d bytes", name, len(b))
		}
	default:
		return dst, fmt.Errorf("key column %s: a %v value", name, v.Kind())
	}
	dst = append(dst, 'd')
	sign := byte(0)
	if b[0]&0x80 != 0 {
		sign = 0xff
	}
	for range decimalLen - len(b) {
		dst = append(dst, sign)
	}
	return append(dst, b...), nil
}

// AppendToken appends an encoded key rendered as a NATS KV key to dst:
// its values joined by dots, a number in decimal, a string "s" and then
// base64url, a decimal "d" and then base64url of its unscaled value, so
// that a key of numbers reads as itself (`nats kv get BUCKET 42`).
func AppendToken(dst []byte, key string) []byte {
	for i := 0; len(key) > 0; i++ {
		if i > 0 {
			dst = append(dst, '.')
		}
		switch key[0] {
		case 'l':
			dst = strconv.AppendInt(dst, int64(binary.BigEndian.Uint64([]byte(key[1:9]))), 10)
			key = key[9:]
		case 's':
			n, w := binary.Uvarint([]byte(key[1:min(len(key), 1+binary.MaxVarintLen64)]))
			dst = append(dst, 's')
			dst = base64.RawURLEncoding.AppendEncode(dst, []byte(key[1+w:1+w+int(n)]))
			key = key[1+w+int(n):]
		case 'd':
			dst = append(dst, 'd')
			dst = base64.RawURLEncoding.AppendEncode(dst, []byte(key[1:1+decimalLen]))
			key = key[1+decimalLen:]
		default:
			panic(fmt.Sprintf("upsert: not an encoded key: %q", key))
		}
	}
	return dst
}
