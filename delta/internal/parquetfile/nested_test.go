package parquetfile

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta/schema"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

func isType[T any](v any) bool {
	_, ok := v.(T)
	return ok
}

func TestNestedLeaves(t *testing.T) {
	// struct<id: long not null, tags: array<string>, attrs: map<string, double>>, nullable
	f := schema.StructField{Name: "c", Nullable: true, Type: &schema.StructType{Fields: []schema.StructField{
		{Name: "id", Type: schema.Long},
		{Name: "tags", Nullable: true, Type: &schema.ArrayType{ElementType: schema.String, ContainsNull: true}},
		{Name: "attrs", Nullable: true, Type: &schema.MapType{KeyType: schema.String, ValueType: schema.Double, ValueContainsNull: true}},
	}}}
	leaves, err := NestedLeaves(&f)
	if err != nil {
		t.Fatal(err)
	}
	want := []NestedLeaf{
		{Path: []string{"id"}, Type: schema.Long, MaxDef: 1, MaxRep: 0},
		{Path: []string{"tags", "list", "element"}, Type: schema.String, MaxDef: 4, MaxRep: 1},
		{Path: []string{"attrs", "key_value", "key"}, Type: schema.String, MaxDef: 3, MaxRep: 1},
		{Path: []string{"attrs", "key_value", "value"}, Type: schema.Double, MaxDef: 4, MaxRep: 1},
	}
	if len(leaves) != len(want) {
		t.Fatalf("leaves = %+v", leaves)
	}
	for i := range want {
		if !slices.Equal(leaves[i].Path, want[i].Path) || leaves[i].Type != want[i].Type ||
			leaves[i].MaxDef != want[i].MaxDef || leaves[i].MaxRep != want[i].MaxRep {
			t.Errorf("leaf %d = %+v, want %+v", i, leaves[i], want[i])
		}
	}
}

func TestNestedEncodingRoundTrip(t *testing.T) {
	in := []parquet.Value{
		parquet.ByteArrayValue([]byte("a")).Level(0, 4, 1),
		parquet.Int64Value(7).Level(0, 1, 0),
		parquet.ByteArrayValue([]byte("b")).Level(1, 4, 1),
		parquet.Value{}.Level(0, 1, 2),
		parquet.DoubleValue(1.5).Level(0, 1, 3),
		parquet.BooleanValue(true).Level(0, 1, 4),
		parquet.FloatValue(2.5).Level(0, 1, 5),
		parquet.Int32Value(-3).Level(0, 1, 6),
		parquet.FixedLenByteArrayValue([]byte{1, 2}).Level(0, 1, 7),
	}
	b := AppendNested(nil, slices.Clone(in))
	got, err := appendDecodedNested(nil, b, 10)
	if err != nil {
		t.Fatal(err)
	}
	order := []int{1, 0, 2, 3, 4, 5, 6, 7, 8} // sorted by leaf, stable
	if len(got) != len(in) {
		t.Fatalf("got %d values", len(got))
	}
	for i, j := range order {
		w := in[j]
		g := got[i]
		if g.Column() != w.Column()+10 || g.RepetitionLevel() != w.RepetitionLevel() || g.DefinitionLevel() != w.DefinitionLevel() ||
			g.IsNull() != w.IsNull() || (!w.IsNull() && !parquet.Equal(g, w)) {
			t.Errorf("value %d = %v (col %d r%d d%d), want %v", i, g, g.Column(), g.RepetitionLevel(), g.DefinitionLevel(), w)
		}
	}
	if _, err := appendDecodedNested(nil, b[:len(b)-1], 0); err == nil {
		t.Error("a truncated encoding decoded")
	}
}

// nestedTestSchema: a flat column, a variant and nested columns behind it,
// under column mapping (ids and physical names on nested fields).
func nestedTestSchema(t *testing.T) *schema.StructType {
	t.Helper()
	s, err := schema.ParseSchema(`{"type":"struct","fields":[` +
		`{"name":"id","type":"long","nullable":false,"metadata":{}},` +
		`{"name":"v","type":"variant","nullable":true,"metadata":{}},` +
		`{"name":"c","type":{"type":"struct","fields":[` +
		`{"name":"x","type":"long","nullable":false,"metadata":{"delta.columnMapping.id":7,"delta.columnMapping.physicalName":"col-x"}},` +
		`{"name":"tags","type":{"type":"array","elementType":"string","containsNull":true},"nullable":true,"metadata":{"delta.columnMapping.id":8,"delta.columnMapping.physicalName":"col-tags"}},` +
		`{"name":"m","type":{"type":"map","keyType":"string","valueType":{"type":"struct","fields":[` +
		`{"name":"d","type":"decimal(12,2)","nullable":true,"metadata":{}}]},"valueContainsNull":false},"nullable":false,"metadata":{}}]},` +
		`"nullable":true,"metadata":{"delta.columnMapping.id":6}},` +
		`{"name":"n","type":{"type":"array","elementType":{"type":"array","elementType":"date","containsNull":false},"containsNull":true},"nullable":false,"metadata":{}},` +
		`{"name":"last","type":"string","nullable":true,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestParquetSchemaMatchesNestedLeaves: the file schema has the leaves
// NestedLeaves describes, path and levels, with LIST and MAP groups and
// column mapping ids as field ids.
func TestParquetSchemaMatchesNestedLeaves(t *testing.T) {
	s := nestedTestSchema(t)
	ps, err := NewParquetSchema(s)
	if err != nil {
		t.Fatal(err)
	}
	cols := ps.Schema().Columns()
	leaf := 0
	for i := range s.Fields {
		f := &s.Fields[i]
		if !IsNested(f.Type) {
			leaf += typeLeaves(f.Type)
			continue
		}
		leaves, err := NestedLeaves(f)
		if err != nil {
			t.Fatal(err)
		}
		if ps.leaf[i] != leaf || ps.leaf[i+1] != leaf+len(leaves) {
			t.Fatalf("column %s: leaves [%d,%d), want [%d,%d)", f.Name, ps.leaf[i], ps.leaf[i+1], leaf, leaf+len(leaves))
		}
		for _, l := range leaves {
			path := append([]string{f.Name}, l.Path...)
			lc, ok := ps.Schema().Lookup(path...)
			if !ok || !slices.Equal(cols[leaf], path) {
				t.Fatalf("leaf %v: not the file's leaf %d (%v)", path, leaf, cols[leaf])
			}
			if lc.ColumnIndex != leaf || lc.MaxDefinitionLevel != l.MaxDef || lc.MaxRepetitionLevel != l.MaxRep ||
				ps.def[leaf] != l.MaxDef || ps.rep[leaf] != l.MaxRep {
				t.Errorf("leaf %v: file index %d d%d r%d, schema d%d r%d; NestedLeaves index %d d%d r%d",
					path, lc.ColumnIndex, lc.MaxDefinitionLevel, lc.MaxRepetitionLevel, ps.def[leaf], ps.rep[leaf], leaf, l.MaxDef, l.MaxRep)
			}
			leaf++
		}
	}
	if leaf != len(cols) {
		t.Errorf("%d leaves, the file %d", leaf, len(cols))
	}
	byName := map[string]parquet.Field{}
	for _, f := range ps.Schema().Fields() {
		byName[f.Name()] = f
	}
	cf := byName["c"]
	if cf.ID() != 6 || cf.Fields()[0].Name() != "col-x" || cf.Fields()[0].ID() != 7 || cf.Fields()[1].ID() != 8 {
		t.Errorf("struct field names and ids: %v", cf)
	}
	if lt := cf.Fields()[1].Type().LogicalType(); lt == nil || !isType[*format.ListType](lt.Value) {
		t.Errorf("array field: logical type %v, want LIST", lt)
	}
	if lt := cf.Fields()[2].Type().LogicalType(); lt == nil || !isType[*format.MapType](lt.Value) {
		t.Errorf("map field: logical type %v, want MAP", lt)
	}
	for _, bad := range []string{
		`{"type":"struct","fields":[{"name":"c","type":{"type":"array","elementType":"variant","containsNull":true},"nullable":true,"metadata":{}}]}`,
		`{"type":"struct","fields":[{"name":"c","type":{"type":"struct","fields":[]},"nullable":true,"metadata":{}}]}`,
	} {
		bs, err := schema.ParseSchema(bad)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewParquetSchema(bs); !errors.Is(err, ErrNestedType) {
			t.Errorf("%s: %v, want ErrNestedType", bad, err)
		}
	}
}

// TestWriteSlotRows: rows in slot form (a nested column's one value its
// AppendNested encoding, as the mapping makes them) are written as their
// leaves, read back, and refused with the column named when a nested
// value is null in a non-nullable column or its encoding is bad.
func TestWriteSlotRows(t *testing.T) {
	s := nestedTestSchema(t)
	var buf bytes.Buffer
	w, err := NewFileWriter(&buf, s, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps := w.Schema()
	// c = {x: 5, tags: ["a", null], m: {"k": {d: 1.50}}}, n = [[date 1], null, []]
	cEnc := AppendNested(nil, []parquet.Value{
		parquet.Int64Value(5).Level(0, 1, 0),
		parquet.ByteArrayValue([]byte("a")).Level(0, 4, 1),
		parquet.Value{}.Level(1, 3, 1),
		parquet.ByteArrayValue([]byte("k")).Level(0, 2, 2),
		parquet.Int64Value(150).Level(0, 3, 3),
	})
	nEnc := AppendNested(nil, []parquet.Value{
		parquet.Int32Value(1).Level(0, 3, 0),
		parquet.Value{}.Level(1, 1, 0),
		parquet.Value{}.Level(1, 2, 0),
	})
	rows := []parquet.Row{
		{ps.Int64(0, 1), ps.Null(1), parquet.Value{}, ps.Nested(2, cEnc), ps.Nested(3, nEnc), ps.Text(4, "z")},
		{ps.Int64(0, 2), ps.Null(1), parquet.Value{}, ps.Null(2), ps.Nested(3, AppendNested(nil, []parquet.Value{parquet.Value{}.Level(0, 0, 0)})), ps.Null(4)},
	}
	rows[0][2] = parquet.Value{}.Level(0, 0, 1)
	rows[1][2] = parquet.Value{}.Level(0, 0, 1)
	if _, err := w.WriteRows(rows); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		row  parquet.Row
		want string
	}{
		{parquet.Row{ps.Int64(0, 3), ps.Null(1), rows[0][2], ps.Null(2), ps.Null(3), ps.Null(4)}, `column "n": null in a non-nullable column`},
		{parquet.Row{ps.Int64(0, 3), ps.Null(1), rows[0][2], ps.Nested(2, cEnc[:len(cEnc)-1]), ps.Nested(3, nEnc), ps.Null(4)}, `column "c"`},
		{parquet.Row{ps.Int64(0, 3), ps.Null(1), rows[0][2], ps.Nested(2, nEnc), ps.Nested(3, nEnc), ps.Null(4)}, `column "c"`},
	}
	for _, b := range bad {
		if _, err := w.WriteRows([]parquet.Row{b.row}); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("bad row: %v, want an error naming %s", err, b.want)
		}
	}
	st, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	const wantStats = `{"numRecords":2,"minValues":{"id":1,"c":{"col-x":5},"last":"z"},"maxValues":{"id":2,"c":{"col-x":5},"last":"z"},` +
		`"nullCount":{"id":0,"v":2,"c":{"col-x":1,"col-tags":1,"m":1},"n":0,"last":1}}`
	if st.Stats != wantStats {
		t.Errorf("stats\n%s\nwant\n%s", st.Stats, wantStats)
	}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	rr, err := NewRowReader(f, s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pr := make([]parquet.Row, 2)
	r := parquet.NewReader(f)
	n, _ := r.ReadRows(pr)
	if n != 2 {
		t.Fatalf("%d rows read", n)
	}
	want := []schema.Row{
		{int64(1), nil, map[string]any{"x": int64(5), "tags": []any{"a", nil}, "m": map[string]any{"k": map[string]any{"d": "1.50"}}},
			[]any{[]any{time.Unix(86400, 0).UTC()}, nil, []any{}}, "z"},
		{int64(2), nil, nil, []any{}, nil},
	}
	for i := range want {
		got, err := rr.Convert(pr[i])
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("row %d: %#v, want %#v", i, got, want[i])
		}
	}
}

// TestNestedWriteAllocs: expanding slot rows into leaves reuses the
// writer's buffers: no allocation per row in steady state.
func TestNestedWriteAllocs(t *testing.T) {
	s := nestedTestSchema(t)
	w, err := NewFileWriter(io.Discard, s, WriterOptions{RowGroupRows: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ps := w.Schema()
	cEnc := AppendNested(nil, []parquet.Value{
		parquet.Int64Value(5).Level(0, 1, 0),
		parquet.ByteArrayValue([]byte("a")).Level(0, 4, 1),
		parquet.Value{}.Level(1, 3, 1),
		parquet.ByteArrayValue([]byte("k")).Level(0, 2, 2),
		parquet.Int64Value(150).Level(0, 3, 3),
	})
	nEnc := AppendNested(nil, []parquet.Value{parquet.Int32Value(1).Level(0, 3, 0), parquet.Value{}.Level(1, 1, 0)})
	rows := make([]parquet.Row, 64)
	for i := range rows {
		rows[i] = parquet.Row{ps.Int64(0, int64(i)), ps.Null(1), parquet.Value{}.Level(0, 0, 1), ps.Nested(2, cEnc), ps.Nested(3, nEnc), ps.Text(4, "z")}
	}
	for range 100 { // warm up: buffers and pages grow
		if _, err := w.WriteRows(rows); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := w.WriteRows(rows); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.3f allocations per row", allocs/float64(len(rows)))
	if perRow := allocs / float64(len(rows)); perRow > 0.1 {
		t.Errorf("%.2f allocations per row", perRow)
	}
}
