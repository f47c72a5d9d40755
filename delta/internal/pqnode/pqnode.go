// Package pqnode builds Parquet schema nodes whose groups keep their
// fields in declared order, for data files and checkpoints alike.
//
// parquet.Group sorts its fields by name; Delta files keep the schema's
// declared order (Spark's checkpoint schema is compared field by field, and
// people read data files with other tools).
package pqnode

import (
	"reflect"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"
)

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

// Field names n.
func Field(name string, n parquet.Node) parquet.Field { return namedField{n, name} }

// Group is a group of fields, in order.
func Group(fields ...parquet.Field) parquet.Node { return Typed(parquet.Group{}.Type(), fields...) }

// Typed is a group of fields, in order, with the logical type of typ.
func Typed(typ parquet.Type, fields ...parquet.Field) parquet.Node {
	return &orderedGroup{fields: fields, typ: typ}
}

// MapOf is a MAP of key to value, as Spark lays it out.
func MapOf(key, value parquet.Node) parquet.Node {
	kv := parquet.Repeated(Group(Field("key", parquet.Required(key)), Field("value", value)))
	return &orderedGroup{fields: []parquet.Field{Field("key_value", kv)}, typ: parquet.Map(key, value).Type()}
}

// ListOf is a LIST of elem, as Spark lays it out.
func ListOf(elem parquet.Node) parquet.Node {
	l := parquet.Repeated(Group(Field("element", elem)))
	return &orderedGroup{fields: []parquet.Field{Field("list", l)}, typ: parquet.List(elem).Type()}
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
