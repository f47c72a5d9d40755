package mapping

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	// The well-known types a schema imports without a reference.
	_ "google.golang.org/protobuf/types/known/anypb"
	_ "google.golang.org/protobuf/types/known/durationpb"
	_ "google.golang.org/protobuf/types/known/emptypb"
	_ "google.golang.org/protobuf/types/known/structpb"
	_ "google.golang.org/protobuf/types/known/timestamppb"
	_ "google.golang.org/protobuf/types/known/wrapperspb"
)

// ErrProtobufTypeNotSupported is wrapped by the error of a message whose
// fields make no columns: repeated fields, maps, bytes, and messages other
// than Timestamp and the wrappers. The route names such fields in columns
// (paths to the scalars of a nested message), or leaves them out.
var ErrProtobufTypeNotSupported = errors.New("no column type for this Protobuf type yet")

// protoSchema is a registry's Protobuf schema: its files (the schema's
// last), compiled.
type protoSchema struct {
	files *protoregistry.Files
	main  protoreflect.FileDescriptor
}

// parseProtoSchema decodes a WriterSchema's text of the protobuf format:
// a base64-encoded FileDescriptorSet, dependencies first (schemareg makes
// it of the schema and its references). Imports of the well-known types
// are taken from this binary's.
func parseProtoSchema(text string) (*protoSchema, error) {
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil, fmt.Errorf("not a Protobuf schema's files: %w", err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil || len(set.File) == 0 {
		return nil, fmt.Errorf("not a Protobuf schema's files: %v", err)
	}
	have := map[string]bool{}
	for _, f := range set.File {
		have[f.GetName()] = true
	}
	var known []*descriptorpb.FileDescriptorProto
	for _, f := range set.File {
		for _, dep := range f.GetDependency() {
			if have[dep] {
				continue
			}
			fd, err := protoregistry.GlobalFiles.FindFileByPath(dep)
			if err != nil || !strings.HasPrefix(dep, "google/protobuf/") {
				return nil, fmt.Errorf("%s imports %s, which is neither a reference of the schema nor a well-known type", f.GetName(), dep)
			}
			have[dep] = true
			known = append(known, protodesc.ToFileDescriptorProto(fd))
		}
	}
	set.File = append(known, set.File...)
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return nil, fmt.Errorf("Protobuf schema: %w", err)
	}
	main, err := files.FindFileByPath(set.File[len(set.File)-1].GetName())
	if err != nil {
		return nil, fmt.Errorf("Protobuf schema: %w", err)
	}
	return &protoSchema{files: files, main: main}, nil
}

// message is the message named name (a full name), or without one the
// schema's first, which Confluent's serializers write by default.
func (s *protoSchema) message(name string) (protoreflect.MessageDescriptor, error) {
	if name == "" {
		if s.main.Messages().Len() == 0 {
			return nil, fmt.Errorf("the schema %s has no message", s.main.Path())
		}
		return s.main.Messages().Get(0), nil
	}
	d, err := s.files.FindDescriptorByName(protoreflect.FullName(name))
	md, isMessage := d.(protoreflect.MessageDescriptor)
	if err != nil || !isMessage {
		return nil, fmt.Errorf("the schema %s has no message %s", s.main.Path(), name)
	}
	return md, nil
}

// protobufColumns derives a table's columns from a message, one per field
// in declaration order, all nullable (docs/configuration.md, Formats).
func protobufColumns(md protoreflect.MessageDescriptor) ([]Column, error) {
	fields := md.Fields()
	cols := make([]Column, 0, fields.Len())
	var errs []string
	for i := range fields.Len() {
		fd := fields.Get(i)
		typ, err := protobufColumnType(fd)
		if err != nil {
			errs = append(errs, fmt.Sprintf("field %s: %v", fd.Name(), err))
			continue
		}
		cols = append(cols, Column{Name: string(fd.Name()), Type: typ, Source: string(fd.Name()), Nullable: new(true)})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s (give columns with paths to the values to keep)", ErrProtobufTypeNotSupported, strings.Join(errs, "; "))
	}
	return cols, nil
}

// protobufColumnType is the column type of a field.
func protobufColumnType(fd protoreflect.FieldDescriptor) (string, error) {
	switch {
	case fd.IsMap():
		return "", errors.New("a map")
	case fd.IsList():
		return "", errors.New("a repeated field")
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return "boolean", nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return "integer", nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return "long", nil
	case protoreflect.FloatKind:
		return "float", nil
	case protoreflect.DoubleKind:
		return "double", nil
	case protoreflect.StringKind, protoreflect.EnumKind:
		return "string", nil
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if fd.Message().FullName() == "google.protobuf.Timestamp" {
			return "timestamp", nil
		}
		if v := wrapped(fd.Message()); v != nil {
			return protobufColumnType(v)
		}
		return "", fmt.Errorf("a message %s", fd.Message().FullName())
	}
	return "", fmt.Errorf("of kind %s", fd.Kind())
}

// wrapped is the value field of a wrapper message (google.protobuf.
// Int64Value, ...), nil for any other message.
func wrapped(md protoreflect.MessageDescriptor) protoreflect.FieldDescriptor {
	if md.ParentFile().Path() != "google/protobuf/wrappers.proto" {
		return nil
	}
	return md.Fields().ByName("value")
}

// compileProtobufWriter compiles a Protobuf writer schema for p: the
// messages the records' indexes name are read by field name into p's
// paths (a path the message lacks is null); with an evolving plan, the
// fields of the table's message no column reads make the columns to add.
func compileProtobufWriter(text string, p *plan) writerPlan {
	schema, err := parseProtoSchema(text)
	if err != nil {
		return writerPlan{err: err}
	}
	md, err := schema.message(p.cfg.Message)
	if err != nil {
		return writerPlan{err: err}
	}
	var fields []namedType
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		if typ, err := protobufColumnType(fd); err == nil {
			fields = append(fields, namedType{string(fd.Name()), typ})
		}
	}
	if err := checkWidening(fields, p); err != nil {
		return writerPlan{err: err}
	}
	if p.cfg.Evolve {
		if add := newColumnsOf(fields, p); len(add) > 0 {
			return writerPlan{add: add}
		}
	}
	return writerPlan{build: func(p *plan) values {
		return &protoValues{p: p, schema: schema, byIndexes: map[string]*protoReader{}, vals: make([]protoreflect.Value, len(p.nodes))}
	}}
}

// protoReader reads one message type of a schema: a message reused from
// record to record, and the field of each plan node (nil: the message has
// none, so the node reads null).
type protoReader struct {
	msg *dynamicpb.Message
	fds []protoreflect.FieldDescriptor
}

// protoValues reads the records of one Protobuf writer schema.
type protoValues struct {
	p         *plan
	schema    *protoSchema
	byIndexes map[string]*protoReader // by the record's message indexes
	cur       *protoReader
	vals      []protoreflect.Value // each node's value; invalid: null
	num       []byte
}

// maxMessageDepth bounds the message indexes a record's header may give.
const maxMessageDepth = 32

func (v *protoValues) resolve(body []byte) error {
	indexes, n, err := messageIndexes(body)
	if err != nil {
		return &MapError{Reason: "not Protobuf in the schema registry's wire format: " + err.Error()}
	}
	body = body[n:]
	r := v.byIndexes[unsafe.String(unsafe.SliceData(indexes), len(indexes))]
	if r == nil {
		if r, err = v.reader(indexes); err != nil {
			return &MapError{Reason: err.Error()}
		}
		v.byIndexes[string(indexes)] = r
	}
	r.msg.Reset()
	if err := (proto.UnmarshalOptions{DiscardUnknown: true, RecursionLimit: 100}).Unmarshal(body, r.msg); err != nil {
		// protobuf-go's errors put a no-break space after "proto:" now and
		// then, on purpose, against matching on them: not in our reasons.
		why := strings.TrimPrefix(strings.ReplaceAll(err.Error(), "\u00a0", " "), "proto: ")
		return &MapError{Reason: "not Protobuf of its writer schema's " + string(r.msg.Descriptor().FullName()) + ": " + why}
	}
	v.cur = r
	clear(v.vals)
	v.vals[0] = protoreflect.ValueOfMessage(r.msg)
	for i := 1; i < len(v.p.nodes); i++ {
		parent, fd := v.vals[v.p.nodes[i].parent], r.fds[i]
		if !parent.IsValid() || fd == nil {
			continue
		}
		pm := parent.Message()
		if fd.HasPresence() && !pm.Has(fd) {
			continue
		}
		v.vals[i] = pm.Get(fd)
	}
	return nil
}

// reader compiles the message a record's indexes name for the plan.
func (v *protoValues) reader(indexes []byte) (*protoReader, error) {
	msgs := v.schema.main.Messages()
	var md protoreflect.MessageDescriptor
	for i, rest := 0, indexes; len(rest) > 0; i++ {
		x, n := binary.Varint(rest)
		rest = rest[n:]
		if x < 0 || int(x) >= msgs.Len() {
			return nil, fmt.Errorf("message index %d: the schema %s has %d messages there", x, v.schema.main.Path(), msgs.Len())
		}
		md = msgs.Get(int(x))
		msgs = md.Messages()
	}
	r := &protoReader{msg: dynamicpb.NewMessage(md), fds: make([]protoreflect.FieldDescriptor, len(v.p.nodes))}
	mds := make([]protoreflect.MessageDescriptor, len(v.p.nodes))
	mds[0] = md
	for i := 1; i < len(v.p.nodes); i++ {
		n := v.p.nodes[i]
		if parent := mds[n.parent]; parent != nil {
			r.fds[i] = parent.Fields().ByName(protoreflect.Name(n.key))
		}
		if fd := r.fds[i]; fd != nil && fd.Message() != nil && !fd.IsList() && !fd.IsMap() {
			mds[i] = fd.Message()
		}
	}
	return r, nil
}

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
		return []byte{0}, n, nil
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
	if fd := v.cur.fds[node]; fd != nil && v.vals[node].IsValid() {
		return fd.Kind().String()
	}
	return "null"
}

func (v *protoValues) cast(c *planColumn, a *Arena, out *cell) (failure, []byte) {
	val, fd := v.vals[c.node], v.cur.fds[c.node]
	if !val.IsValid() || fd == nil || fd.IsList() || fd.IsMap() {
		if fd != nil && (fd.IsList() || fd.IsMap()) {
			return failType, nil
		}
		out.null = true
		return ok, nil
	}
	if md := fd.Message(); md != nil {
		if md.FullName() == "google.protobuf.Timestamp" {
			if c.kind != kTimestamp {
				return failType, nil
			}
			m := val.Message()
			secs, nanos := m.Get(md.Fields().ByNumber(1)).Int(), m.Get(md.Fields().ByNumber(2)).Int()
			if secs < -62135596800 || secs > 253402300799 {
				return failRange, nil
			}
			out.i = secs*1_000_000 + nanos/1000
			return ok, nil
		}
		w := wrapped(md)
		if w == nil {
			return failType, nil
		}
		fd, val = w, val.Message().Get(w)
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		if c.kind != kString {
			return failType, nil
		}
		s := val.String()
		if !utf8.ValidString(s) {
			return failUTF8, nil
		}
		out.b = a.CopyString(s)
	case protoreflect.EnumKind:
		if c.kind != kString {
			return failType, nil
		}
		if ev := fd.Enum().Values().ByNumber(val.Enum()); ev != nil {
			out.b = a.CopyString(string(ev.Name()))
		} else {
			v.num = strconv.AppendInt(v.num[:0], int64(val.Enum()), 10)
			out.b = a.Copy(v.num)
		}
	case protoreflect.BoolKind:
		if c.kind != kBoolean {
			return failType, nil
		}
		if val.Bool() {
			out.i = 1
		}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return castInt(val.Int(), c, out)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		u := val.Uint()
		if u > math.MaxInt64 {
			return failOverflow, nil
		}
		return castInt(int64(u), c, out)
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f := val.Float()
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

// castInt casts an integer into c's type.
func castInt(n int64, c *planColumn, out *cell) (failure, []byte) {
	switch c.kind {
	case kInteger:
		if n < math.MinInt32 || n > math.MaxInt32 {
			return failOverflow, nil
		}
		out.i = n
	case kLong:
		out.i = n
	case kFloat, kDouble:
		out.f = float64(n)
	default:
		return failType, nil
	}
	return ok, nil
}
