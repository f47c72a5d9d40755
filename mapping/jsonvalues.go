package mapping

import (
	"encoding/base64"
	"math"
	"slices"
	"unicode/utf8"
	"unsafe"

	"github.com/valyala/fastjson"
	"github.com/valyala/fastjson/fastfloat"
)

// jsonValues finds the values of a plan's source paths in JSON records,
// with fastjson: one parser per container node, so that a payload string
// holding JSON is decoded once per record and every value found stays
// valid until the next record.
type jsonValues struct {
	p        *plan
	vals     []*fastjson.Value  // value found at each node, nil if absent
	objs     []*fastjson.Object // each container's object, nil if absent/null
	parsers  []fastjson.Parser  // one per container: values stay valid together
	num      []byte             // scratch for number text
	visitAt  int                // container being visited
	missing  int                // children of visitAt not found yet
	visitFn  func(k []byte, v *fastjson.Value)
	deleted  bool            // the change event resolved is a delete
	variant  *variantEncoder // for variant columns
	schema   *fastjson.Value // the record's schemas.enable schema, nil without
	image    string          // the change event's row image: after or before
	unscaled []byte          // scratch for a Debezium decimal's unscaled value
	nest     nestedBuilder   // for struct, array and map columns
	// nestParsers decode the JSON text of a nested column's string value,
	// one per column: what one parses stays valid until the next record.
	nestParsers []fastjson.Parser
	// entries is the walk of the map being visited (visitEntry).
	entries entryWalk
	entryFn func(k []byte, v *fastjson.Value)
}

// entryWalk is where a walk of a map column's object is: its type, the
// repetition level of its first entry, the entries seen, its failure.
type entryWalk struct {
	t    *nestedType
	rep  int
	n    int
	fail failure
}

func newJSONValues(p *plan) values {
	j := &jsonValues{p: p, vals: make([]*fastjson.Value, len(p.nodes)), objs: make([]*fastjson.Object, len(p.nodes)),
		parsers: make([]fastjson.Parser, len(p.nodes)), nestParsers: make([]fastjson.Parser, p.nestedCols)}
	// Bound once: a closure built per record would be allocated per record.
	j.visitFn = j.visit
	j.entryFn = j.visitEntry
	if p.variants {
		j.variant = newVariantEncoder()
	}
	return j
}

// kindOf names the JSON type of the value found at node.
func (j *jsonValues) kindOf(node int) string {
	if v := j.vals[node]; v != nil && int(v.Type()) < len(typeNames) {
		return typeNames[v.Type()]
	}
	return "value"
}

// resolve parses the record and finds the value of every path node.
func (j *jsonValues) resolve(value []byte) error {
	p := j.p
	clear(j.vals)
	clear(j.objs)
	root, err := j.parsers[0].ParseBytes(value)
	if err != nil {
		return &MapError{Reason: parseFailure(value, "not JSON")}
	}
	if root.Type() != fastjson.TypeObject {
		return &MapError{Reason: "not a JSON object"}
	}
	if p.unwrap {
		if root, j.schema, err = unwrapPayload(root); err != nil {
			return err
		}
	}
	j.objs[0], _ = root.Object()
	if p.cdc {
		if err := j.changeEvent(root); err != nil {
			return err
		}
	}
	for i := range p.nodes {
		n := &p.nodes[i]
		if len(n.children) == 0 {
			continue
		}
		if i > 0 {
			if err := j.container(i); err != nil {
				if p.strict {
					return err
				}
				j.objs[i] = nil // permissive: everything below is null
			}
		}
		if j.objs[i] != nil {
			j.visitAt, j.missing = i, len(n.children)
			j.objs[i].Visit(j.visitFn)
		}
	}
	return nil
}

// unwrapPayload is the payload of a value Kafka Connect's JSON converter
// wrapped with its schema (schemas.enable), and that schema; else the
// value itself and nil.
func unwrapPayload(root *fastjson.Value) (payload, schema *fastjson.Value, err error) {
	o, _ := root.Object()
	if schema = o.Get("schema"); o.Len() != 2 || schema == nil {
		return root, nil, nil
	}
	payload = o.Get("payload")
	if payload == nil || payload.Type() != fastjson.TypeObject {
		return nil, nil, &MapError{Reason: "payload: not a JSON object"}
	}
	return payload, schema, nil
}

// changeEvent reads a Debezium change event's operation and points the
// row image node at its image: after for a create, update or snapshot
// read, before for a delete.
func (j *jsonValues) changeEvent(root *fastjson.Value) error {
	image, err := debeziumImage(root.GetStringBytes("op"))
	if err != nil {
		return err
	}
	j.deleted, j.image = image == "before", image
	j.vals[j.p.rowNode] = root.Get(image)
	if v := j.vals[j.p.rowNode]; v == nil || v.Type() != fastjson.TypeObject {
		return noImage(image)
	}
	return nil
}

// deletes reports whether the change event just resolved deletes its row.
func (j *jsonValues) deletes() bool { return j.deleted }

// visit records the values of the children of container j.visitAt. Walking
// the object's members ourselves makes duplicate keys explicit: the first
// occurrence wins (fastjson's Get also returns the first, but only compares
// unescaped keys in its slow path).
func (j *jsonValues) visit(k []byte, v *fastjson.Value) {
	if j.missing == 0 {
		return // the rest are members no column uses, or duplicates
	}
	for _, c := range j.p.nodes[j.visitAt].children {
		if j.vals[c] == nil && string(k) == j.p.nodes[c].key {
			j.vals[c] = v
			j.missing--
			return
		}
	}
}

// container finds the object of container node i: an object, or a string
// holding one (decoded with the node's own parser, so earlier values stay
// valid). Missing or null leaves it nil: everything below is null.
func (j *jsonValues) container(i int) *MapError {
	v := j.vals[i]
	if v == nil {
		return nil
	}
	path := j.p.nodes[i].path
	switch v.Type() {
	case fastjson.TypeNull:
		return nil
	case fastjson.TypeObject:
		j.objs[i], _ = v.Object()
		return nil
	case fastjson.TypeString:
		s, _ := v.StringBytes()
		inner, err := j.parsers[i].ParseBytes(s)
		if err != nil {
			return &MapError{Reason: path + ": " + parseFailure(s, "not JSON"), Path: path}
		}
		if inner.Type() != fastjson.TypeObject {
			return &MapError{Reason: path + ": not a JSON object", Path: path}
		}
		j.objs[i], _ = inner.Object()
		return nil
	}
	return &MapError{Reason: path + ": not a JSON string", Path: path}
}

// cast converts the JSON value of column c's node (nil: absent) into out
// (zero on entry). detail is the offending text for error messages.
func (j *jsonValues) cast(c *planColumn, a *Arena, out *cell) (failure, []byte) {
	v := j.vals[c.node]
	if v == nil || v.Type() == fastjson.TypeNull {
		out.null = true
		return ok, nil
	}
	if c.nested != nil {
		b := &j.nest
		b.begin()
		if v.Type() == fastjson.TypeString { // JSON text, as a path descends into one (and from_json reads one)
			s, _ := v.StringBytes()
			var err error
			if v, err = j.nestParsers[c.nested.idx].ParseBytes(s); err != nil {
				b.reason = append(b.reason[:0], parseFailure(s, "a string that is not JSON")...)
				return failNested, b.reason
			}
		}
		if f := j.walk(c.nested.root, v, 0); f != ok {
			return f, b.reason
		}
		out.b = b.finish(a)
		return ok, nil
	}
	return j.castValue(c, v, a, out)
}

// walk writes JSON value v (nil: absent) of nested type t, at repetition
// level rep, into j.nest: objects are structs (members no field names
// are ignored, missing fields null) and maps, arrays arrays.
func (j *jsonValues) walk(t *nestedType, v *fastjson.Value, rep int) failure {
	b := &j.nest
	if v == nil || v.Type() == fastjson.TypeNull {
		return b.null(t, rep)
	}
	switch t.shape {
	case nsStruct:
		o, err := v.Object()
		if err != nil {
			return b.shape(t, j.typeName(v))
		}
		for i := range t.fields {
			f := &t.fields[i]
			b.push(nestedStep{field: f.name})
			if fl := j.walk(f.t, o.Get(f.name), rep); fl != ok {
				return fl
			}
			b.pop()
		}
	case nsArray:
		items, err := v.Array()
		if err != nil {
			return b.shape(t, j.typeName(v))
		}
		if len(items) == 0 {
			b.nulls(t, rep, t.def)
		}
		for i, item := range items {
			r := rep
			if i > 0 {
				r = t.elem.rep
			}
			b.push(nestedStep{index: i})
			if fl := j.walk(t.elem, item, r); fl != ok {
				return fl
			}
			b.pop()
		}
	case nsMap:
		o, err := v.Object()
		if err != nil {
			return b.shape(t, j.typeName(v))
		}
		if o.Len() == 0 {
			b.nulls(t, rep, t.def)
			return ok
		}
		// Visit takes a function, not a closure (which would be allocated
		// per map): the walk's state is j's, saved around a map inside.
		outer := j.entries
		j.entries = entryWalk{t: t, rep: rep}
		o.Visit(j.entryFn)
		f := j.entries.fail
		j.entries = outer
		return f
	default:
		b.cast = cell{}
		f, detail := j.castValue(&t.leaf, v, &b.scratch, &b.cast)
		if f != ok {
			return b.fail(t, f, detail, JSON, j.typeName(v))
		}
		b.value(t, b.cast, rep)
	}
	return ok
}

// visitEntry writes one entry of the map j.entries walks.
func (j *jsonValues) visitEntry(k []byte, v *fastjson.Value) {
	e := &j.entries
	if e.fail != ok {
		return
	}
	r := e.rep
	if e.n > 0 {
		r = e.t.elem.rep
	}
	e.n++
	if e.fail = j.nest.key(e.t, k, r); e.fail != ok {
		return
	}
	t := e.t
	j.nest.push(nestedStep{key: k})
	if e.fail = j.walk(t.elem, v, r); e.fail != ok {
		return // a map inside has put j.entries back as it found it
	}
	j.nest.pop()
}

// typeName names the JSON type of v, for errors.
func (j *jsonValues) typeName(v *fastjson.Value) string {
	if int(v.Type()) < len(typeNames) {
		return typeNames[v.Type()]
	}
	return "value"
}

// castValue converts non-null JSON value v into out for column (or
// nested leaf) c.
func (j *jsonValues) castValue(c *planColumn, v *fastjson.Value, a *Arena, out *cell) (failure, []byte) {
	t := v.Type()
	switch c.kind {
	case kString:
		if t != fastjson.TypeString {
			return failType, nil
		}
		s, _ := v.StringBytes()
		if !utf8.Valid(s) {
			return failUTF8, nil
		}
		out.b = a.Copy(s)
		return ok, nil
	case kBinary: // base64, as from_json reads a binary (Jackson's getBinaryValue)
		if t != fastjson.TypeString {
			return failType, nil
		}
		s, _ := v.StringBytes()
		j.num = slices.Grow(j.num[:0], base64.StdEncoding.DecodedLen(len(s)))
		n, err := base64.StdEncoding.Decode(j.num[:cap(j.num)], s)
		if err != nil {
			return failBase64, s
		}
		out.b = a.Copy(j.num[:n])
		return ok, nil
	case kBoolean:
		switch t {
		case fastjson.TypeTrue:
			out.i = 1
			return ok, nil
		case fastjson.TypeFalse:
			return ok, nil
		}
	case kInteger, kLong:
		if t == fastjson.TypeNumber {
			j.num = v.MarshalTo(j.num[:0])
			n, f := parseInteger(j.num, c.kind == kInteger)
			out.i = n
			return f, j.num
		}
	case kFloat, kDouble:
		if t == fastjson.TypeNumber {
			j.num = v.MarshalTo(j.num[:0])
			x, err := fastfloat.Parse(unsafe.String(unsafe.SliceData(j.num), len(j.num)))
			switch {
			case err != nil:
				return failCast, j.num
			case math.IsNaN(x) || math.IsInf(x, 0):
				return failNotFinite, j.num
			case c.kind == kFloat && math.IsInf(float64(float32(x)), 0):
				return failOverflow, j.num
			}
			out.f = x
			return ok, nil
		}
	case kDecimal:
		switch t {
		case fastjson.TypeNumber:
			j.num = v.MarshalTo(j.num[:0])
			if nonFinite(j.num) {
				return failNotFinite, j.num
			}
			return c.dec.castText(j.num, false, out), j.num
		case fastjson.TypeString: // as from_json reads one: "12.30", "1,234.5"
			s, _ := v.StringBytes()
			if j.p.connect {
				return j.connectDecimal(c, s, out), s
			}
			return c.dec.castText(s, true, out), s
		case fastjson.TypeObject:
			if j.p.connect {
				return j.variableScaleDecimal(c, v, out)
			}
		}
	case kVariant:
		return j.variant.encode(v, a, out)
	case kTimestampNTZ: // a local date-time, as from_json reads one; a number is no timestamp_ntz for from_json
		if t == fastjson.TypeString {
			s, _ := v.StringBytes()
			us, f := parseTimestampNTZ(s)
			out.i = us
			return f, s
		}
		if t == fastjson.TypeNumber && j.p.connect { // a Debezium date or timestamp, if its schema says so
			return j.castConnectTime(c, v, out)
		}
	case kTimestamp, kDate:
		if t == fastjson.TypeString {
			s, _ := v.StringBytes()
			return castTimestampText(c, s, out), s
		}
		if t == fastjson.TypeNumber && j.p.connect {
			return j.castConnectTime(c, v, out)
		}
	}
	if t == fastjson.TypeString { // a string where a number or boolean belongs
		s, _ := v.StringBytes()
		return failCast, s
	}
	return failType, nil
}
