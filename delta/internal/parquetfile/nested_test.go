package parquetfile

import (
	"slices"
	"testing"

	"github.com/deltaflow/deltaflow/delta/schema"
	"github.com/parquet-go/parquet-go"
)

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
