package delta

import (
	"reflect"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"
)

// Parquet schema nodes shared by data files and checkpoints.
//
// parquet.Group sorts its fields by name; Delta files keep the schema's
// declared order (Spark's checkpoint schema is compared field by field, and
// people read data files with other tools), so groups are built here.

// orderedGroup is a group node that keeps its fields in declared order, with
// an optional logical type (MAP or LIST).
type orderedGroup struct {
	fields []parquet.Field
	typ    parquet.Type
}

type namedField struct {
	parquet.Node
	name string
}

func (f namedField) Name() string { return f.name }

// Value is only used to write Go values; checkpoints are written as rows.
func (f namedField) Value(reflect.Value) reflect.Value { return reflect.Value{} }

func field(name string, n parquet.Node) parquet.Field { return namedField{n, name} }

func group(fields ...parquet.Field) parquet.Node {
	return &orderedGroup{fields: fields, typ: parquet.Group{}.Type()}
}

func mapOf(key, value parquet.Node) parquet.Node {
	kv := parquet.Repeated(group(field("key", parquet.Required(key)), field("value", value)))
	return &orderedGroup{fields: []parquet.Field{field("key_value", kv)}, typ: parquet.Map(key, value).Type()}
}

func listOf(elem parquet.Node) parquet.Node {
	l := parquet.Repeated(group(field("element", elem)))
	return &orderedGroup{fields: []parquet.Field{field("list", l)}, typ: parquet.List(elem).Type()}
}

func (g *orderedGroup) ID() int                     { return 0 }
func (g *orderedGroup) String() string              { return "group" }
func (g *orderedGroup) Type() parquet.Type          { return g.typ }
func (g *orderedGroup) Optional() bool              { return false }
func (g *orderedGroup) Repeated() bool              { return false }
func (g *orderedGroup) Required() bool              { return true }
func (g *orderedGroup) Leaf() bool                  { return false }
func (g *orderedGroup) Fields() []parquet.Field     { return g.fields }
func (g *orderedGroup) Encoding() encoding.Encoding { return nil }
func (g *orderedGroup) Compression() compress.Codec { return nil }

// GoType is the struct type of a group with the same fields.
func (g *orderedGroup) GoType() reflect.Type {
	m := make(parquet.Group, len(g.fields))
	for _, f := range g.fields {
		m[f.Name()] = f
	}
	return m.GoType()
}
