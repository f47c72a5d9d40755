package parquetfile

import (
	"fmt"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/deltaflow/deltaflow/delta/schema"
)

// nestedReader assembles the values of a struct, array or map column (or
// of a part of one) from its leaves' values in a row, guided by the
// levels of the file's schema and converted to the Delta type: what
// Parquet calls record assembly. It reads any writer's standard layout
// (LIST and MAP groups, Spark's and others' names), the legacy two-level
// lists and unannotated repeated fields.
type nestedReader struct {
	kind  int // nestedStruct, nestedList, nestedMap, nestedLeaf
	def   int // the definition level at which the value is not null
	depth int // the repeated levels above it
	rep   int // a list's or map's repeated level
	first int // its first leaf column, whose levels tell nulls and ends
	leafs int // its number of leaf columns
	// A struct's fields in the Delta type's order (nil: not in the file,
	// read as null) by display name, and the leaves of the file's fields
	// the type lacks (a dropped column's), passed over; a list's element;
	// a map's key and value.
	fields []*nestedReader
	names  []string
	unread [][2]int // first leaf, number of leaves
	elem   *nestedReader
	key    *nestedReader
	conv   func(parquet.Value) (any, error)
	keyTyp schema.DataType // a map's key type, for MapKeyText
}

const (
	nestedStruct = iota
	nestedList
	nestedMap
	nestedLeaf
)

// newNestedReader is the reader of file node n (its leaves from column
// first, defined at def, repeated rep times above it) as Delta type t.
func newNestedReader(t schema.DataType, n parquet.Node, first, def, rep int) (*nestedReader, error) {
	if n.Optional() {
		def++
	}
	r := &nestedReader{def: def, depth: rep, first: first, leafs: CountLeaves(n)}
	if n.Repeated() { // an unannotated repeated field: a list of its values
		a, ok := t.(*schema.ArrayType)
		if !ok {
			return nil, fmt.Errorf("a repeated field for %s", schema.TypeName(t))
		}
		r.kind, r.rep = nestedList, rep+1
		elem, err := newNestedReader(a.ElementType, parquet.Required(n), first, def+1, rep+1)
		r.elem = elem
		return r, err
	}
	switch t := t.(type) {
	case *schema.StructType:
		if n.Leaf() {
			return nil, fmt.Errorf("a %s leaf for a struct", n.Type())
		}
		r.kind = nestedStruct
		leafStart, byID := map[string]int{}, map[int]string{}
		byName := map[string]parquet.Field{}
		c := first
		for _, ff := range n.Fields() {
			leafStart[ff.Name()], byName[ff.Name()] = c, ff
			if id := ff.ID(); id != 0 {
				byID[id] = ff.Name()
			}
			c += CountLeaves(ff)
		}
		for i := range t.Fields {
			f := &t.Fields[i]
			name := schema.PhysicalName(f)
			if _, ok := byName[name]; !ok {
				if id, ok := schema.FieldID(f); ok && byID[id] != "" {
					name = byID[id]
				}
			}
			var fr *nestedReader
			if ff, ok := byName[name]; ok {
				var err error
				if fr, err = newNestedReader(f.Type, ff, leafStart[name], def, rep); err != nil {
					return nil, fmt.Errorf("field %q: %w", f.Name, err)
				}
			}
			r.fields, r.names = append(r.fields, fr), append(r.names, f.Name)
			delete(byName, name)
		}
		for _, ff := range n.Fields() {
			if _, ok := byName[ff.Name()]; ok {
				r.unread = append(r.unread, [2]int{leafStart[ff.Name()], CountLeaves(ff)})
			}
		}
		return r, nil
	case *schema.ArrayType:
		rg, err := repeatedChild(n, "LIST")
		if err != nil {
			return nil, err
		}
		r.kind, r.rep = nestedList, rep+1
		elem := parquet.Node(rg)
		if !rg.Leaf() && len(rg.Fields()) == 1 && rg.Name() != "array" && !strings.HasSuffix(rg.Name(), "_tuple") {
			elem = rg.Fields()[0] // three levels; else the repeated field is the element
			r.elem, err = newNestedReader(t.ElementType, elem, first, def+1, rep+1)
		} else {
			r.elem, err = newNestedReader(t.ElementType, parquet.Required(elem), first, def+1, rep+1)
		}
		if err != nil {
			return nil, fmt.Errorf("array element: %w", err)
		}
		return r, nil
	case *schema.MapType:
		kv, err := repeatedChild(n, "MAP")
		if err != nil {
			return nil, err
		}
		if kv.Leaf() || len(kv.Fields()) != 2 {
			return nil, fmt.Errorf("map group %q has no key and value", kv.Name())
		}
		kf, vf := kv.Fields()[0], kv.Fields()[1]
		r.kind, r.rep, r.keyTyp = nestedMap, rep+1, t.KeyType
		if r.key, err = newNestedReader(t.KeyType, kf, first, def+1, rep+1); err != nil {
			return nil, fmt.Errorf("map key: %w", err)
		}
		if r.elem, err = newNestedReader(t.ValueType, vf, first+CountLeaves(kf), def+1, rep+1); err != nil {
			return nil, fmt.Errorf("map value: %w", err)
		}
		return r, nil
	}
	if !n.Leaf() {
		return nil, fmt.Errorf("a group for %s", schema.TypeName(t))
	}
	conv, err := leafConverter(t, n)
	if err != nil {
		return nil, err
	}
	r.kind, r.conv = nestedLeaf, conv
	return r, nil
}

// repeatedChild is the repeated group of a LIST or MAP group n.
func repeatedChild(n parquet.Node, what string) (parquet.Field, error) {
	if n.Leaf() || len(n.Fields()) != 1 || !n.Fields()[0].Repeated() {
		return nil, fmt.Errorf("not a %s group", what)
	}
	if lt := n.Type().LogicalType(); lt != nil && what == "MAP" {
		if _, isList := lt.Value.(*format.ListType); isList {
			return nil, fmt.Errorf("a LIST group for a map")
		}
	}
	return n.Fields()[0], nil
}

// nestedCursor walks a row's values leaf by leaf: pos[c] is the next value
// of leaf column c, end[c] past its last.
type nestedCursor struct {
	row parquet.Row
	pos []int
	end []int
}

// read assembles the next value of r.
func (cur *nestedCursor) read(r *nestedReader) (any, error) {
	v, ok := cur.peek(r.first)
	if !ok {
		return nil, fmt.Errorf("leaf %d has too few values", r.first)
	}
	if v.DefinitionLevel() < r.def {
		cur.skip(r)
		return nil, nil
	}
	switch r.kind {
	case nestedLeaf:
		cur.pos[r.first]++
		return r.conv(v)
	case nestedStruct:
		m := make(map[string]any, len(r.fields))
		for i, f := range r.fields {
			if f == nil {
				m[r.names[i]] = nil
				continue
			}
			x, err := cur.read(f)
			if err != nil {
				return nil, err
			}
			m[r.names[i]] = x
		}
		for _, u := range r.unread {
			cur.pass(u[0], u[1], r.depth)
		}
		return m, nil
	}
	// A list or map: empty when its repeated level is not defined.
	if v.DefinitionLevel() == r.def {
		cur.skip(r)
		if r.kind == nestedMap {
			return map[string]any{}, nil
		}
		return []any{}, nil
	}
	var list []any
	var m map[string]any
	if r.kind == nestedMap {
		m = map[string]any{}
	}
	for {
		if r.kind == nestedList {
			e, err := cur.read(r.elem)
			if err != nil {
				return nil, err
			}
			list = append(list, e)
		} else {
			k, err := cur.read(r.key)
			if err != nil {
				return nil, err
			}
			if k == nil {
				return nil, fmt.Errorf("a null map key")
			}
			e, err := cur.read(r.elem)
			if err != nil {
				return nil, err
			}
			m[MapKeyText(r.keyTyp, k)] = e
		}
		if next, ok := cur.peek(r.first); !ok || next.RepetitionLevel() < r.rep {
			break
		}
	}
	if r.kind == nestedMap {
		return m, nil
	}
	return list, nil
}

func (cur *nestedCursor) peek(c int) (parquet.Value, bool) {
	if cur.pos[c] >= cur.end[c] {
		return parquet.Value{}, false
	}
	return cur.row[cur.pos[c]], true
}

// skip passes the values of r where it is null or empty: one per leaf.
func (cur *nestedCursor) skip(r *nestedReader) { cur.pass(r.first, r.leafs, r.depth) }

// pass passes one value, of depth repeated levels above it, of the leaves
// [first, first+n): each leaf's next value and those after it that repeat
// a level below (a value at depth or less starts the next one).
func (cur *nestedCursor) pass(first, n, depth int) {
	for c := first; c < first+n; c++ {
		cur.pos[c]++
		for cur.pos[c] < cur.end[c] && cur.row[cur.pos[c]].RepetitionLevel() > depth {
			cur.pos[c]++
		}
	}
}
