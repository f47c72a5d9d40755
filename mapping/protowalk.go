package mapping

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// protoValues reads the records of one Protobuf writer schema with a walk
// of the wire format compiled per message type for the plan's paths: it
// reads only the fields a column names, into slots that alias the record,
// and skips the rest, so a record costs no allocation.
type protoValues struct {
	p         *plan
	schema    *protoSchema
	byIndexes map[string]*protoWalk // by the record's message indexes
	cur       *protoWalk
	slots     []protoSlot // each node's value in the current record
	num       []byte
	// plain: the records are bodies of cur's message alone (a schema
	// file's), with no message indexes.
	plain bool
	body  []byte // the current record's message
	nest  nestedBuilder
	leaf  protoSlot // a nested column's scalar, read
}

// protoSlot is what the record holds at a plan node, if set: its wire
// value (a varint or fixed number in u, a length-delimited one in b); for
// a Timestamp, its seconds in u and nanos in n; for a wrapper, its value.
type protoSlot struct {
	set bool
	u   uint64
	n   int64
	b   []byte
}

// protoWalk reads one message type for a plan: the fields that plan nodes
// name, each with the walk of its message when nodes go into it.
type protoWalk struct {
	md     protoreflect.MessageDescriptor
	fields []protoWalkField
	nodes  []protoNode // by plan node, shared by a walk and its messages' walks
	// nests are the nested columns' fields of md, by nestedColumn.idx
	// (nil: the message has no such field).
	nests []*protoNestField
}

// protoNode is what a plan node reads in the message type a walk reads,
// settled when the walk is compiled.
type protoNode struct {
	fd       protoreflect.FieldDescriptor // nil: the message has no such field (null)
	value    protoreflect.FieldDescriptor // what its value is: fd, or a wrapper's value field
	kind     protoreflect.Kind            // value's
	list     bool                         // repeated or a map: no column holds it
	presence bool                         // unset reads null, not its default
	message  bool                         // nodes go into it: they read null while it is unset
	time     bool                         // a google.protobuf.Timestamp
}

type protoWalkField struct {
	num  protowire.Number
	wire protowire.Type
	node int
	sub  *protoWalk // the walk of a message field that nodes go into
	// A Timestamp's or wrapper's field, read as its value: timestamp, or
	// the wrapper's value field.
	timestamp bool
	wrapped   protoreflect.FieldDescriptor
}

// maxMessageDepth bounds the message indexes a record's header may give,
// and how deep nested messages are walked.
const maxMessageDepth = 32

// errProtoDepth is a record nested deeper than maxMessageDepth.
var errProtoDepth = errors.New("messages nested too deep")

func (v *protoValues) resolve(body []byte) error {
	of := "the schema file's "
	if !v.plain {
		indexes, n, err := messageIndexes(body)
		if err != nil {
			return &MapError{Reason: "not Protobuf in the schema registry's wire format: " + err.Error()}
		}
		body = body[n:]
		w := v.byIndexes[unsafe.String(unsafe.SliceData(indexes), len(indexes))]
		if w == nil {
			md, err := v.message(indexes)
			if err != nil {
				return &MapError{Reason: err.Error()}
			}
			w = compileProtoWalk(md, v.p, 0)
			v.byIndexes[string(indexes)] = w
		}
		v.cur, of = w, "its writer schema's "
	}
	v.body = body
	clear(v.slots)
	v.slots[0].set = true
	if err := v.cur.read(body, v.slots, 0); err != nil {
		return &MapError{Reason: "not Protobuf of " + of + string(v.cur.md.FullName()) + ": " + protoErrorText(err)}
	}
	return nil
}

// message is the message a record's indexes name.
func (v *protoValues) message(indexes []byte) (protoreflect.MessageDescriptor, error) {
	msgs := v.schema.main.Messages()
	var md protoreflect.MessageDescriptor
	for rest := indexes; len(rest) > 0; {
		x, n := binary.Varint(rest)
		rest = rest[n:]
		if x < 0 || int(x) >= msgs.Len() {
			return nil, fmt.Errorf("message index %d: the schema %s has %d messages there", x, v.schema.main.Path(), msgs.Len())
		}
		md = msgs.Get(int(x))
		msgs = md.Messages()
	}
	return md, nil
}

// compileProtoWalk compiles the walk of message md for the children of
// plan node at.
func compileProtoWalk(md protoreflect.MessageDescriptor, p *plan, at int) *protoWalk {
	w := &protoWalk{md: md, nodes: make([]protoNode, len(p.nodes)), nests: make([]*protoNestField, p.nestedCols)}
	w.bind(md, p, at)
	for i := range p.cols {
		if c := &p.cols[i]; c.nested != nil && w.nodes[c.node].fd != nil {
			w.nests[c.nested.idx] = pairProtoField(w.nodes[c.node].fd, c.nested.root)
		}
	}
	return w
}

// bind adds the fields of md that the children of node at name; a child
// with children of its own is walked into.
func (w *protoWalk) bind(md protoreflect.MessageDescriptor, p *plan, at int) {
	for _, child := range p.nodes[at].children {
		fd := md.Fields().ByName(protoreflect.Name(p.nodes[child].key))
		if fd == nil {
			continue
		}
		n := &w.nodes[child]
		*n = protoNode{fd: fd, value: fd, kind: fd.Kind(), list: fd.IsList() || fd.IsMap(), presence: fd.HasPresence()}
		f := protoWalkField{num: fd.Number(), wire: wireType(fd), node: child}
		if n.list {
			f.wire = -1 // never read: a column of it is a type error
		} else if sub := fd.Message(); sub != nil && len(p.nodes[child].children) > 0 {
			n.message = true
			f.sub = &protoWalk{md: sub, nodes: w.nodes}
			f.sub.bind(sub, p, child)
		} else if sub != nil {
			f.timestamp, f.wrapped = sub.FullName() == "google.protobuf.Timestamp", wrapped(sub)
			n.time = f.timestamp
			if f.wrapped != nil {
				n.value, n.kind = f.wrapped, f.wrapped.Kind()
			}
		}
		w.fields = append(w.fields, f)
	}
}

// wireType is how a singular field of fd's kind is encoded.
func wireType(fd protoreflect.FieldDescriptor) protowire.Type {
	switch fd.Kind() {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.VarintType
}

// read walks message body into slots: a field read twice keeps the last
// value (a message's fields merge), as Protobuf's parsers do; fields no
// node names, and those of an unexpected wire type, are skipped.
func (w *protoWalk) read(body []byte, slots []protoSlot, depth int) error {
	if depth > maxMessageDepth {
		return errProtoDepth
	}
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			return protowire.ParseError(n)
		}
		body = body[n:]
		var f *protoWalkField
		for i := range w.fields {
			if w.fields[i].num == num && w.fields[i].wire == typ {
				f = &w.fields[i]
				break
			}
		}
		if f == nil || typ == protowire.StartGroupType {
			if n = protowire.ConsumeFieldValue(num, typ, body); n < 0 {
				return protowire.ParseError(n)
			}
			body = body[n:]
			continue
		}
		s := &slots[f.node]
		u, b, n := consumeValue(typ, body)
		if n < 0 {
			return protowire.ParseError(n)
		}
		var err error
		switch {
		case typ != protowire.BytesType:
			s.u = u
		case f.sub != nil: // its bytes too: a nested column's field in it is read from them
			s.b = b
			err = f.sub.read(b, slots, depth+1)
		case f.timestamp || f.wrapped != nil:
			err = readLeafMessage(b, s, f)
		default:
			s.b = b
		}
		if err != nil {
			return err
		}
		s.set = true
		body = body[n:]
	}
	return nil
}

// protoErrorText is err's text without protobuf-go's "proto:" prefix, and
// without the no-break space it puts there now and then, on purpose,
// against matching on its errors.
func protoErrorText(err error) string {
	return strings.TrimPrefix(strings.ReplaceAll(err.Error(), "\u00a0", " "), "proto: ")
}

// firstMessage is the indexes of a schema's first message (read only).
var firstMessage = []byte{0}

// messageIndexes reads the message indexes after a Protobuf record's
// schema id: a zigzag varint count, then that many zigzag varint indexes
// of the message in the file's (and then its nested) messages; a count of
// 0 is the first message. It returns them as the bytes of zigzag varints
// (the first message's as one 0) and how many bytes of body they took.
func messageIndexes(body []byte) ([]byte, int, error) {
	count, n := binary.Varint(body)
	switch {
	case n <= 0:
		return nil, 0, errors.New("no message indexes")
	case count == 0:
		return firstMessage, n, nil
	case count < 0 || count > maxMessageDepth:
		return nil, 0, fmt.Errorf("%d message indexes", count)
	}
	start := n
	for range count {
		_, m := binary.Varint(body[n:])
		if m <= 0 {
			return nil, 0, errors.New("truncated message indexes")
		}
		n += m
	}
	return body[start:n], n, nil
}

func (v *protoValues) kindOf(node int) string {
	if n := &v.cur.nodes[node]; n.fd != nil && v.slots[node].set {
		return n.fd.Kind().String()
	}
	return "null"
}

// present reports whether node's value is in the record: set, or unset
// without presence (its default) inside a message that is there.
func (v *protoValues) present(node int) bool {
	if v.slots[node].set {
		return true
	}
	if v.cur.nodes[node].presence {
		return false
	}
	parent := v.p.nodes[node].parent
	return parent == 0 || (v.cur.nodes[parent].message && v.present(parent))
}

func (v *protoValues) cast(c *planColumn, a *Arena, out *cell) (failure, []byte) {
	if c.nested != nil {
		return v.castNested(c, a, out)
	}
	n := &v.cur.nodes[c.node]
	switch {
	case n.list:
		return failType, nil
	case n.fd == nil || !v.present(c.node):
		out.null = true
		return ok, nil
	}
	return v.castNode(n, &v.slots[c.node], c, a, out)
}

// castNode casts the value s of a singular field n, set, into column (or
// nested leaf) c.
func (v *protoValues) castNode(n *protoNode, s *protoSlot, c *planColumn, a *Arena, out *cell) (failure, []byte) {
	switch {
	case n.time: // into a timestamp_ntz column: its UTC wall clock
		if c.kind != kTimestamp && c.kind != kTimestampNTZ {
			return failType, nil
		}
		secs := int64(s.u)
		if secs < -62135596800 || secs > 253402300799 {
			return failRange, nil
		}
		out.i = secs*1_000_000 + s.n/1000
		return ok, nil
	case n.kind == protoreflect.MessageKind || n.kind == protoreflect.GroupKind:
		return failType, nil
	}
	return v.castScalar(n, s, c, a, out)
}

// castScalar casts a scalar value's wire value into c's type.
func (v *protoValues) castScalar(n *protoNode, s *protoSlot, c *planColumn, a *Arena, out *cell) (failure, []byte) {
	switch n.kind {
	case protoreflect.StringKind:
		if c.kind != kString {
			return failType, nil
		}
		if !utf8.Valid(s.b) {
			return failUTF8, nil
		}
		out.b = a.Copy(s.b)
	case protoreflect.EnumKind:
		if c.kind != kString {
			return failType, nil
		}
		if ev := n.value.Enum().Values().ByNumber(protoreflect.EnumNumber(int32(s.u))); ev != nil {
			out.b = a.CopyString(string(ev.Name()))
		} else {
			v.num = strconv.AppendInt(v.num[:0], int64(int32(s.u)), 10)
			out.b = a.Copy(v.num)
		}
	case protoreflect.BytesKind:
		if c.kind != kBinary {
			return failType, nil
		}
		out.b = a.Copy(s.b)
	case protoreflect.BoolKind:
		if c.kind != kBoolean {
			return failType, nil
		}
		if s.u != 0 {
			out.i = 1
		}
	case protoreflect.Int32Kind:
		return castInt(int64(int32(s.u)), c, out)
	case protoreflect.Sint32Kind:
		return castInt(int64(int32(protowire.DecodeZigZag(s.u&math.MaxUint32))), c, out)
	case protoreflect.Sfixed32Kind:
		return castInt(int64(int32(uint32(s.u))), c, out)
	case protoreflect.Int64Kind, protoreflect.Sfixed64Kind:
		return castInt(int64(s.u), c, out)
	case protoreflect.Sint64Kind:
		return castInt(protowire.DecodeZigZag(s.u), c, out)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return castInt(int64(uint32(s.u)), c, out)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if s.u > math.MaxInt64 {
			return failOverflow, nil
		}
		return castInt(int64(s.u), c, out)
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f := math.Float64frombits(s.u)
		if n.kind == protoreflect.FloatKind {
			f = float64(math.Float32frombits(uint32(s.u)))
		}
		switch {
		case c.kind != kFloat && c.kind != kDouble:
			return failType, nil
		case math.IsNaN(f) || math.IsInf(f, 0):
			return failNotFinite, nil
		case c.kind == kFloat && math.IsInf(float64(float32(f)), 0):
			return failOverflow, nil
		}
		out.f = f
	default:
		return failType, nil
	}
	return ok, nil
}

// consumeValue reads a value of wire type typ: a varint or fixed number in
// u, a length-delimited one in v.
func consumeValue(typ protowire.Type, b []byte) (u uint64, v []byte, n int) {
	switch typ {
	case protowire.VarintType:
		u, n = protowire.ConsumeVarint(b)
	case protowire.Fixed32Type:
		var x uint32
		x, n = protowire.ConsumeFixed32(b)
		u = uint64(x)
	case protowire.Fixed64Type:
		u, n = protowire.ConsumeFixed64(b)
	default:
		v, n = protowire.ConsumeBytes(b)
	}
	return u, v, n
}

// readLeafMessage reads a Timestamp's seconds and nanos, or a wrapper's
// value, into s: fields the message repeats overwrite, those it leaves out
// keep what an earlier occurrence of the field gave (messages merge).
func readLeafMessage(b []byte, s *protoSlot, f *protoWalkField) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var u uint64
		switch {
		case f.timestamp && typ == protowire.VarintType && (num == 1 || num == 2):
			if u, n = protowire.ConsumeVarint(b); num == 1 {
				s.u = u
			} else {
				s.n = int64(int32(u))
			}
		case f.wrapped != nil && num == 1 && typ == wireType(f.wrapped):
			var v []byte
			if u, v, n = consumeValue(typ, b); typ == protowire.BytesType {
				s.b = v
			} else {
				s.u = u
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	return nil
}
