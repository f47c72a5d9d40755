package upsert

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta"
)

// A key encodes the same from a mapped row and from a data file's values
// (an integer column's and a long's alike);
// different values encode differently, even where their bytes could run
// together; a null key column is ErrNullKey.
func TestKeysEncodeAlike(t *testing.T) {
	data := &delta.StructType{Fields: []delta.StructField{
		{Name: "raw", Type: delta.Variant}, {Name: "a", Type: delta.String}, {Name: "n", Type: delta.Integer}, {Name: "m", Type: delta.Long}}}
	k, err := NewKeys(data, []string{"a", "n", "m"})
	if err != nil {
		t.Fatal(err)
	}
	row := parquet.Row{parquet.NullValue(), parquet.NullValue(), parquet.ByteArrayValue([]byte("ab")), parquet.Int32Value(-7), parquet.Int64Value(1 << 40)}
	fromRow, err := k.AppendRow(nil, row)
	if err != nil {
		t.Fatal(err)
	}
	fromValues, err := k.AppendColumns(nil, []parquet.Value{parquet.ByteArrayValue([]byte("ab")), parquet.Int32Value(-7), parquet.Int64Value(1 << 40)})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fromRow, fromValues) {
		t.Errorf("a mapped row's key %q, the file's %q", fromRow, fromValues)
	}
	other, _ := k.AppendColumns(nil, []parquet.Value{parquet.ByteArrayValue([]byte("a")), parquet.Int64Value(-7), parquet.Int64Value(1 << 40)})
	if bytes.Equal(other, fromValues) {
		t.Error("keys of different values encode alike")
	}
	row[3] = parquet.NullValue()
	if _, err := k.AppendRow(nil, row); !errors.Is(err, ErrNullKey) || !strings.Contains(err.Error(), "n") {
		t.Errorf("a null key column: %v, want ErrNullKey naming n", err)
	}
}

// Key columns are data columns of a type whose values encode alike.
func TestNewKeysRefuses(t *testing.T) {
	data := &delta.StructType{Fields: []delta.StructField{{Name: "x", Type: delta.Double}, {Name: "id", Type: delta.Long}}}
	for names, want := range map[string]string{"x": "a key column is a string, integer, long or decimal", "day": "not a data column", "": "no key columns"} {
		var cols []string
		if names != "" {
			cols = []string{names}
		}
		if _, err := NewKeys(data, cols); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("key %q: %v, want %q", names, err, want)
		}
	}
}

// A key's token is a valid NATS KV key that reads as its values, and
// differs for different keys.
func TestToken(t *testing.T) {
	data := &delta.StructType{Fields: []delta.StructField{{Name: "a", Type: delta.String}, {Name: "n", Type: delta.Long}}}
	k, err := NewKeys(data, []string{"a", "n"})
	if err != nil {
		t.Fatal(err)
	}
	token := func(a string, n int64) string {
		key, err := k.AppendColumns(nil, []parquet.Value{parquet.ByteArrayValue([]byte(a)), parquet.Int64Value(n)})
		if err != nil {
			t.Fatal(err)
		}
		return string(AppendToken(nil, string(key)))
	}
	for _, tc := range []struct {
		a    string
		n    int64
		want string
	}{{"ab", 42, "sYWI.42"}, {"", -7, "s.-7"}, {"a.b/ü", 0, "sYS5iL8O8.0"}} {
		if got := token(tc.a, tc.n); got != tc.want {
			t.Errorf("(%q, %d): token %q, want %q", tc.a, tc.n, got, tc.want)
		}
	}
	if token("a", 1) == token("a", 10) || token("ab", 1) == token("a", 1) {
		t.Error("different keys, one token")
	}
}

// A decimal key encodes its unscaled value alike whatever its Parquet type
// (INT32, INT64 and FIXED_LEN_BYTE_ARRAY: a column widened to more
// digits), so 12.50 from a mapped row finds 12.50 in a file; different
// values, and a decimal and a long of the same digits, differ; its token
// is a NATS KV key.
func TestDecimalKeys(t *testing.T) {
	data := &delta.StructType{Fields: []delta.StructField{{Name: "d", Type: delta.DecimalType{Precision: 12, Scale: 2}}, {Name: "n", Type: delta.Long}}}
	k, err := NewKeys(data, []string{"d"})
	if err != nil {
		t.Fatal(err)
	}
	key := func(v parquet.Value) string {
		b, err := k.AppendRow(nil, parquet.Row{v, parquet.Int64Value(1)})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	fixed := func(b ...byte) parquet.Value { return parquet.FixedLenByteArrayValue(b) }
	for _, same := range [][]parquet.Value{
		{parquet.Int32Value(1250), parquet.Int64Value(1250), fixed(0x04, 0xe2), fixed(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x04, 0xe2)},
		{parquet.Int32Value(-1), parquet.Int64Value(-1), fixed(0xff), fixed(0xff, 0xff, 0xff)},
		{parquet.Int32Value(0), parquet.Int64Value(0), fixed(0)},
	} {
		for _, v := range same[1:] {
			if key(v) != key(same[0]) {
				t.Errorf("%v encodes as %q, %v as %q", v, key(v), same[0], key(same[0]))
			}
		}
	}
	if key(parquet.Int32Value(1250)) == key(parquet.Int32Value(-1250)) || key(parquet.Int32Value(1)) == key(parquet.Int32Value(256)) {
		t.Error("decimal keys of different values encode alike")
	}
	longs, _ := NewKeys(data, []string{"n"})
	if long, _ := longs.AppendRow(nil, parquet.Row{parquet.Int32Value(0), parquet.Int64Value(1250)}); string(long) == key(parquet.Int64Value(1250)) {
		t.Error("a decimal key and a long key of the same digits encode alike")
	}
	if got := string(AppendToken(nil, key(parquet.Int32Value(-1)))); got != "d_____________________w" {
		t.Errorf("token of -0.01: %q", got)
	}
	if _, err := k.AppendRow(nil, parquet.Row{fixed(make([]byte, 17)...), parquet.Int64Value(1)}); err == nil || !strings.Contains(err.Error(), "key column d: a decimal of 17 bytes") {
		t.Errorf("a 17-byte decimal: %v", err)
	}
}
