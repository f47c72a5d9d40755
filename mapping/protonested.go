package mapping

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// protoNestField pairs a field of a writer message with a nested column's
// type at the same place (the column's, a struct field's). Its value is
// made of the field's occurrences in the message's bytes: every one an
// element of a repeated field (several in a packed one) or an entry of a
// map, the last one a singular field's (as Protobuf's parsers take a
// scalar's; a message's occurrences are not merged).
type protoNestField struct {
	fd protoreflect.FieldDescriptor // nil: the message has no such field (null)
	t  *nestedType
	// wire is the wire type of one value (a map entry's value's);
	// packed: a repeated scalar, whose occurrences may pack several.
	wire   protowire.Type
	packed bool
	// mismatch: a repeated field or a map where the column has another
	// shape (a type error when it has values).
	mismatch bool
	value    *protoNest // an element's, a map value's, a singular value's
	// key is a map's key of a number or boolean kind (nil: a string key,
	// cast from its text), keyWire the wire type of a map's key.
	key     *protoNest
	keyWire protowire.Type
}

// protoNest pairs one value of a field with a nested type.
type protoNest struct {
	t    *nestedType
	node protoNode      // a scalar's, a Timestamp's or a wrapper's: how it casts
	lf   protoWalkField // a Timestamp's or a wrapper's: how it reads
	// message: a message into a struct, fields its struct fields' pairings.
	message bool
	fields  []*protoNestField
	// mismatch: the value is not of t's shape.
	mismatch bool
}

// pairProtoField compiles the walk of field fd into nested type t.
func pairProtoField(fd protoreflect.FieldDescriptor, t *nestedType) *protoNestField {
	f := &protoNestField{fd: fd, t: t, wire: wireType(fd)}
	switch {
	case fd.IsMap():
		f.mismatch = t.shape != nsMap
		if !f.mismatch {
			f.value, f.wire = pairProtoValue(fd.MapValue(), t.elem), wireType(fd.MapValue())
			if f.keyWire = wireType(fd.MapKey()); fd.MapKey().Kind() != protoreflect.StringKind {
				f.key = pairProtoValue(fd.MapKey(), t.key)
			}
		}
	case fd.IsList():
		f.mismatch = t.shape != nsArray
		if !f.mismatch {
			f.value, f.packed = pairProtoValue(fd, t.elem), f.wire != protowire.BytesType && f.wire != protowire.StartGroupType
		}
	default:
		f.value = pairProtoValue(fd, t)
	}
	return f
}

// pairProtoValue compiles the walk of one value of field fd into t.
func pairProtoValue(fd protoreflect.FieldDescriptor, t *nestedType) *protoNest {
	n := &protoNest{t: t, node: protoNode{fd: fd, value: fd, kind: fd.Kind()}}
	if md := fd.Message(); md != nil {
		switch w := wrapped(md); {
		case md.FullName() == "google.protobuf.Timestamp":
			n.lf.timestamp, n.node.time = true, true
		case w != nil:
			n.lf.wrapped, n.node.value, n.node.kind = w, w, w.Kind()
		case t.shape == nsStruct && fd.Kind() == protoreflect.MessageKind:
			n.message = true
			for i := range t.fields {
				sf := &t.fields[i]
				pf := &protoNestField{t: sf.t}
				if mfd := md.Fields().ByName(protoreflect.Name(sf.name)); mfd != nil {
					pf = pairProtoField(mfd, sf.t)
				}
				n.fields = append(n.fields, pf)
			}
			return n
		default:
			n.mismatch = true
			return n
		}
	}
	n.mismatch = t.shape != nsLeaf
	return n
}

// castNested walks the occurrences of nested column c's field in its
// message (the record, or the message of its path's parent) into the
// encoding of its leaves.
func (v *protoValues) castNested(c *planColumn, a *Arena, out *cell) (failure, []byte) {
	f, msg := v.cur.nests[c.nested.idx], v.body
	if parent := v.p.nodes[c.node].parent; parent != 0 {
		if !v.slots[parent].set {
			f = nil // below a message the record does not have: null
		}
		msg = v.slots[parent].b
	}
	b := &v.nest
	b.begin()
	if f == nil {
		out.null = true
		return ok, nil
	}
	if fd := f.fd; !fd.IsList() && !fd.IsMap() && fd.HasPresence() {
		_, _, found, err := lastOccurrence(msg, f)
		if err != nil {
			return b.malformed(err), b.reason
		}
		if !found { // the column's own null
			out.null = true
			return ok, nil
		}
	}
	if fl := v.emitField(msg, f, 0); fl != ok {
		return fl, b.reason
	}
	out.b = b.finish(a)
	return ok, nil
}

// emitField writes the value field f has in message msg, at repetition
// level rep: a repeated field's elements (none: an empty array), a map's
// entries, a singular field's last value (none: null, or its default
// without presence, as an unset proto3 scalar reads).
func (v *protoValues) emitField(msg []byte, f *protoNestField, rep int) failure {
	b, t := &v.nest, f.t
	if f.fd == nil {
		return b.null(t, rep)
	}
	fd := f.fd
	if !fd.IsList() && !fd.IsMap() {
		u, val, found, err := lastOccurrence(msg, f)
		switch {
		case err != nil:
			return b.malformed(err)
		case !found && fd.HasPresence():
			return b.null(t, rep)
		}
		return v.emitValue(f.value, u, val, rep)
	}
	items := 0
	for rest := msg; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 {
			return b.malformed(protowire.ParseError(n))
		}
		rest = rest[n:]
		if num != fd.Number() || typ == protowire.StartGroupType {
			if n = protowire.ConsumeFieldValue(num, typ, rest); n < 0 {
				return b.malformed(protowire.ParseError(n))
			}
			rest = rest[n:]
			continue
		}
		u, val, n := consumeValue(typ, rest)
		if n < 0 {
			return b.malformed(protowire.ParseError(n))
		}
		rest = rest[n:]
		if f.mismatch {
			what := "repeated " + fd.Kind().String()
			if fd.IsMap() {
				what = "map"
			}
			return b.shape(t, what)
		}
		switch {
		case fd.IsMap() && typ == protowire.BytesType:
			ku, key, vu, vval, err := mapEntry(val, f.keyWire, f.wire)
			if err != nil {
				return b.malformed(err)
			}
			r := v.nextItem(t, rep, &items)
			step := nestedStep{key: key}
			if f.key == nil {
				if fl := b.key(t, key, r); fl != ok {
					return fl
				}
			} else {
				b.push(nestedStep{isKey: true})
				if fl := v.emitValue(f.key, ku, nil, r); fl != ok {
					// Named in the reason by its text, which only a
					// failure needs: the cast again, the path with it.
					b.path[len(b.path)-1].key = protoKeyText(fd, f.keyWire, ku)
					return v.emitValue(f.key, ku, nil, r)
				}
				b.pop()
				step = nestedStep{keyKind: t.key.leaf.kind, index: int(b.cast.i)}
			}
			b.push(step)
			if fl := v.emitValue(f.value, vu, vval, r); fl != ok {
				return fl
			}
			b.pop()
		case f.packed && typ == protowire.BytesType:
			for len(val) > 0 {
				pu, _, m := consumeValue(f.wire, val)
				if m < 0 {
					return b.malformed(protowire.ParseError(m))
				}
				val = val[m:]
				b.push(nestedStep{index: items})
				if fl := v.emitValue(f.value, pu, nil, v.nextItem(t, rep, &items)); fl != ok {
					return fl
				}
				b.pop()
			}
		case typ == f.wire && !fd.IsMap():
			b.push(nestedStep{index: items})
			if fl := v.emitValue(f.value, u, val, v.nextItem(t, rep, &items)); fl != ok {
				return fl
			}
			b.pop()
		}
	}
	if items == 0 {
		b.nulls(t, rep, t.def)
	}
	return ok
}

// nextItem is the repetition level of the next item of array or map t
// (the first at rep, the others at t's own), and counts it.
func (v *protoValues) nextItem(t *nestedType, rep int, items *int) int {
	if *items++; *items > 1 {
		return t.elem.rep
	}
	return rep
}

// emitValue writes one value of n (its wire value: u, or val for a
// length-delimited one) at repetition level rep.
func (v *protoValues) emitValue(n *protoNest, u uint64, val []byte, rep int) failure {
	b, t := &v.nest, n.t
	switch {
	case n.message:
		for i, f := range n.fields {
			b.push(nestedStep{field: t.fields[i].name})
			if fl := v.emitField(val, f, rep); fl != ok {
				return fl
			}
			b.pop()
		}
		return ok
	case n.mismatch && t.shape == nsLeaf:
		return b.fail(t, failType, nil, Protobuf, n.node.fd.Kind().String())
	case n.mismatch:
		return b.shape(t, n.node.fd.Kind().String())
	}
	s := &v.leaf
	*s = protoSlot{u: u, b: val}
	if n.lf.timestamp || n.lf.wrapped != nil {
		*s = protoSlot{}
		if err := readLeafMessage(val, s, &n.lf); err != nil {
			return b.malformed(err)
		}
	}
	b.cast = cell{}
	if f, detail := v.castNode(&n.node, s, &t.leaf, &b.scratch, &b.cast); f != ok {
		return b.fail(t, f, detail, Protobuf, n.node.kind.String())
	}
	b.value(t, b.cast, rep)
	return ok
}

// lastOccurrence is the value of singular field f's last occurrence in
// msg (of its wire type), if any.
func lastOccurrence(msg []byte, f *protoNestField) (u uint64, val []byte, found bool, err error) {
	num := f.fd.Number()
	for len(msg) > 0 {
		n, typ, m := protowire.ConsumeTag(msg)
		if m < 0 {
			return 0, nil, false, protowire.ParseError(m)
		}
		msg = msg[m:]
		if n == num && typ == f.wire && typ != protowire.StartGroupType {
			u, val, m = consumeValue(typ, msg)
			found = true
		} else {
			m = protowire.ConsumeFieldValue(n, typ, msg)
		}
		if m < 0 {
			return 0, nil, false, protowire.ParseError(m)
		}
		msg = msg[m:]
	}
	return u, val, found, nil
}

// mapEntry reads a map entry message: its key (field 1, of wire type
// keyWire: a number in ku, a string in key) and its value (field 2, of
// wire type wire; absent: their defaults).
func mapEntry(entry []byte, keyWire, wire protowire.Type) (ku uint64, key []byte, u uint64, val []byte, err error) {
	key = emptyBytes
	for len(entry) > 0 {
		num, typ, n := protowire.ConsumeTag(entry)
		if n < 0 {
			return 0, nil, 0, nil, protowire.ParseError(n)
		}
		entry = entry[n:]
		switch {
		case num == 1 && typ == keyWire:
			var k []byte
			if ku, k, n = consumeValue(typ, entry); k != nil {
				key = k
			}
		case num == 2 && typ == wire && typ != protowire.StartGroupType:
			u, val, n = consumeValue(typ, entry)
		default:
			n = protowire.ConsumeFieldValue(num, typ, entry)
		}
		if n < 0 {
			return 0, nil, 0, nil, protowire.ParseError(n)
		}
		entry = entry[n:]
	}
	return ku, key, u, val, nil
}

// protoKeyText is the text of map field fd's key ku (a number or a
// boolean, read from the wire as wire type wire), as protoreflect formats
// it.
func protoKeyText(fd protoreflect.FieldDescriptor, wire protowire.Type, ku uint64) []byte {
	entry := protowire.AppendTag(nil, 1, wire)
	switch wire {
	case protowire.Fixed32Type:
		entry = protowire.AppendFixed32(entry, uint32(ku))
	case protowire.Fixed64Type:
		entry = protowire.AppendFixed64(entry, ku)
	default:
		entry = protowire.AppendVarint(entry, ku)
	}
	e := dynamicpb.NewMessage(fd.Message())
	_ = proto.Unmarshal(entry, e) // a key alone of its own wire type: no error
	return []byte(e.Get(fd.MapKey()).String())
}
