package mapping

import (
	"math"
	"strconv"
)

// avroNest pairs a writer schema's type with a nested column's type at
// the same place: the program that walks the value's Avro bytes into the
// column's leaves. Compiled once per writer schema, so the walk matches
// no names.
type avroNest struct {
	t  *nestedType // nil: the value is skipped (no field of the column holds it)
	at *avroType
	// mismatch: the shapes differ (a record where an array belongs…): a
	// value here is a type error.
	mismatch bool
	// A union: each branch's pairing (nil: the null branch). members, for
	// a union of several types in a struct column (Spark's member0,
	// member1, … of the non-null branches), is each branch's member: the
	// struct's field it sets (-1: none, the others are null); nil: each
	// branch pairs with t itself.
	branches []*avroNest
	members  []int
	fields   []*avroNest // a record: each field's pairing
	absent   []int       // a record: the struct's fields it lacks (null)
	items    *avroNest   // an array's items, a map's values
}

// pair compiles the walk of writer type n into nested type t.
func (c *avroCompiler) pair(n *avroNode, t *nestedType) (*avroNest, error) {
	at, err := c.unbound(n)
	if err != nil {
		return nil, err
	}
	p := &avroNest{t: t, at: at}
	if t == nil {
		return p, nil
	}
	switch n.typ {
	case "union":
		nonNull := 0
		for _, b := range n.branches {
			if b.typ != "null" {
				nonNull++
			}
		}
		if nonNull > 1 && t.shape == nsStruct {
			p.members = make([]int, len(n.branches))
		}
		k := 0
		for i, b := range n.branches {
			if b.typ == "null" {
				p.branches = append(p.branches, nil)
				if p.members != nil {
					p.members[i] = -1
				}
				continue
			}
			bt := t
			if p.members != nil {
				p.members[i] = t.field("member" + strconv.Itoa(k))
				k++
				bt = nil
				if p.members[i] >= 0 {
					bt = t.fields[p.members[i]].t
				}
			}
			bp, err := c.pair(b, bt)
			if err != nil {
				return nil, err
			}
			p.branches = append(p.branches, bp)
		}
	case "record", "error":
		if at.kind != avRecord { // a Debezium semantic type: a scalar
			p.mismatch = t.shape != nsLeaf
			break
		}
		if t.shape != nsStruct {
			p.mismatch = true
			break
		}
		found := make([]bool, len(t.fields))
		for _, f := range n.fields {
			var ft *nestedType
			if i := t.field(f.name); i >= 0 {
				ft, found[i] = t.fields[i].t, true
			}
			fp, err := c.pair(f.typ, ft)
			if err != nil {
				return nil, err
			}
			p.fields = append(p.fields, fp)
		}
		for i, f := range found {
			if !f {
				p.absent = append(p.absent, i)
			}
		}
	case "array", "map":
		if n.typ == "array" && t.shape != nsArray || n.typ == "map" && t.shape != nsMap {
			p.mismatch = true
			break
		}
		if p.items, err = c.pair(n.items, t.elem); err != nil {
			return nil, err
		}
	default:
		p.mismatch = t.shape != nsLeaf
	}
	return p, nil
}

// castNested walks the bytes read for nested column c's node into the
// encoding of its leaves.
func (v *avroValues) castNested(c *planColumn, a *Arena, out *cell) (failure, []byte) {
	span, n := v.spans[c.node], v.nests[c.nested.idx]
	// The span was read already: walking it again costs what it did.
	v.steps = avroBudget*len(span) + 64
	b := &v.nest
	b.begin()
	// A null at the top, in a union's null branch, is the column's.
	for n != nil && span != nil && n.at.kind == avUnion {
		i, rest, err := readIndex(span, len(n.branches), errAvroBranch)
		if err != nil {
			return b.malformed(err), b.reason
		}
		if n.members != nil && n.branches[i] != nil { // the struct of the union's members
			break
		}
		span, n = rest, n.branches[i]
	}
	if span == nil || n == nil || n.at.kind == avNull {
		out.null = true
		return ok, nil
	}
	if _, f := v.walk(n, span, 0, 0); f != ok {
		return f, b.reason
	}
	out.b = b.finish(a)
	return ok, nil
}

// walk writes the value of n at the start of data, at repetition level
// rep, into v.nest, and returns the bytes after it.
func (v *avroValues) walk(n *avroNest, data []byte, rep, depth int) ([]byte, failure) {
	b := &v.nest
	if n.t == nil {
		rest, err := v.read(n.at, data, -1, depth)
		if err != nil {
			return nil, b.malformed(err)
		}
		return rest, ok
	}
	t, at := n.t, n.at
	switch {
	case at.kind == avUnion:
		i, rest, err := readIndex(data, len(at.branches), errAvroBranch)
		if err != nil {
			return nil, b.malformed(err)
		}
		br := n.branches[i]
		switch {
		case br == nil:
			return rest, b.null(t, rep)
		case n.members == nil:
			return v.walk(br, rest, rep, depth+1)
		}
		for j := range t.fields { // one member set, the others null
			if j != n.members[i] {
				b.nulls(t.fields[j].t, rep, t.fields[j].t.nullDef)
			}
		}
		m := n.members[i]
		if m < 0 { // a member the struct does not declare: skipped
			return v.walk(br, rest, rep, depth+1)
		}
		b.push(nestedStep{field: t.fields[m].name})
		after, f := v.walk(br, rest, rep, depth+1)
		if f != ok {
			return nil, f
		}
		b.pop()
		return after, ok
	case at.kind == avNull:
		return data, b.null(t, rep)
	case n.mismatch && t.shape == nsLeaf:
		return nil, b.fail(t, failType, nil, Avro, avroKindNames[at.kind])
	case n.mismatch:
		return nil, b.shape(t, avroKindNames[at.kind])
	case at.kind == avRecord:
		for i := range n.fields {
			f := n.fields[i]
			if f.t != nil {
				b.push(nestedStep{field: at.fields[i].name})
			}
			var fl failure
			if data, fl = v.walk(f, data, rep, depth+1); fl != ok {
				return nil, fl
			}
			if f.t != nil {
				b.pop()
			}
		}
		for _, j := range n.absent {
			b.nulls(t.fields[j].t, rep, t.fields[j].t.nullDef)
		}
		return data, ok
	case at.kind == avArray || at.kind == avMap:
		return v.walkBlocks(n, data, rep, depth)
	}
	s := &v.leaf
	*s = avroSlot{set: true, kind: at.kind}
	rest, err := readScalar(at, data, s)
	if err != nil {
		return nil, b.malformed(err)
	}
	b.cast = cell{}
	if f, detail := castSlot(&t.leaf, s, &b.scratch, &b.cast); f != ok {
		return nil, b.fail(t, f, detail, Avro, avroKindNames[s.kind])
	}
	b.value(t, b.cast, rep)
	return rest, ok
}

// walkBlocks writes the items of an array or the entries of a map (as
// readBlocks reads them): the first at repetition level rep, the others
// at their list's; none is an empty list.
func (v *avroValues) walkBlocks(n *avroNest, data []byte, rep, depth int) ([]byte, failure) {
	b, t := &v.nest, n.t
	items := 0
	for {
		count, rest, err := readVarlong(data)
		if err != nil {
			return nil, b.malformed(err)
		}
		data = rest
		if count == 0 {
			break
		}
		if count < 0 {
			if count == math.MinInt64 {
				return nil, b.malformed(errAvroItems)
			}
			count = -count
			if _, data, err = readVarlong(data); err != nil {
				return nil, b.malformed(err)
			}
		}
		if count > int64(v.steps) {
			return nil, b.malformed(errAvroItems)
		}
		for range count {
			r := rep
			if items > 0 {
				r = t.elem.rep
			}
			step := nestedStep{index: items}
			if n.at.kind == avMap {
				var key []byte
				if key, data, err = readBytes(data); err != nil {
					return nil, b.malformed(err)
				}
				if f := b.key(t, key, r); f != ok {
					return nil, f
				}
				step = nestedStep{key: key}
			}
			items++
			b.push(step)
			var f failure
			if data, f = v.walk(n.items, data, r, depth+1); f != ok {
				return nil, f
			}
			b.pop()
		}
	}
	if items == 0 {
		b.nulls(t, rep, t.def)
	}
	return data, ok
}
