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
	for names, want := range map[string]string{"x": "a key column is a string, integer or long", "day": "not a data column", "": "no key columns"} {
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
