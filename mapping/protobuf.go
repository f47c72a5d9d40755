package mapping

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	// The well-known types a schema imports without a reference.
	_ "google.golang.org/protobuf/types/known/anypb"
	_ "google.golang.org/protobuf/types/known/durationpb"
	_ "google.golang.org/protobuf/types/known/emptypb"
	_ "google.golang.org/protobuf/types/known/structpb"
	_ "google.golang.org/protobuf/types/known/timestamppb"
	_ "google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deltaflow/deltaflow/delta"
)

// ErrProtobufTypeNotSupported is wrapped by the error of a message whose
// fields make no columns: maps whose keys are not strings, recursive
// messages, messages without fields. The route names such fields in
// columns (paths to the scalars of a nested message), or leaves them out.
var ErrProtobufTypeNotSupported = errors.New("no column type for this Protobuf type")

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
	return newProtoSchema(&set)
}

// newProtoSchema compiles set's files, dependencies first, the schema's
// last. Imports of the well-known types that set lacks are taken from this
// binary's.
func newProtoSchema(set *descriptorpb.FileDescriptorSet) (*protoSchema, error) {
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
	files, err := protodesc.NewFiles(set)
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
	t, err := protobufDataType(fd, nil)
	if err != nil {
		return "", err
	}
	return typeDDL(t), nil
}

// protobufDataType is the Delta type of field fd: a repeated field an
// array, a map a map, a message (but a Timestamp or a wrapper) a struct of
// its fields; inside are the messages fd is in, to refuse a recursive one.
func protobufDataType(fd protoreflect.FieldDescriptor, inside []protoreflect.MessageDescriptor) (delta.DataType, error) {
	switch {
	case fd.IsMap():
		k, err := protobufValueType(fd.MapKey(), inside) // string, bool or an integer kind: a scalar of mapKeyTypes
		if err != nil {
			return nil, err
		}
		v, err := protobufValueType(fd.MapValue(), inside)
		if err != nil {
			return nil, fmt.Errorf("a map's values: %w", err)
		}
		return &delta.MapType{KeyType: k, ValueType: v, ValueContainsNull: true}, nil
	case fd.IsList():
		e, err := protobufValueType(fd, inside)
		if err != nil {
			return nil, err
		}
		return &delta.ArrayType{ElementType: e, ContainsNull: true}, nil
	}
	return protobufValueType(fd, inside)
}

// protobufValueType is the type of one value of field fd.
func protobufValueType(fd protoreflect.FieldDescriptor, inside []protoreflect.MessageDescriptor) (delta.DataType, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return delta.Boolean, nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return delta.Integer, nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return delta.Long, nil
	case protoreflect.FloatKind:
		return delta.Float, nil
	case protoreflect.DoubleKind:
		return delta.Double, nil
	case protoreflect.StringKind, protoreflect.EnumKind:
		return delta.String, nil
	case protoreflect.BytesKind:
		return delta.Binary, nil
	case protoreflect.MessageKind, protoreflect.GroupKind:
		md := fd.Message()
		if md.FullName() == "google.protobuf.Timestamp" {
			return delta.Timestamp, nil
		}
		if v := wrapped(md); v != nil {
			return protobufValueType(v, inside)
		}
		if slices.Contains(inside, md) {
			return nil, fmt.Errorf("a message %s that holds itself (recursive): no column holds it", md.FullName())
		}
		if md.Fields().Len() == 0 {
			return nil, fmt.Errorf("a message %s without fields: Parquet holds no empty struct", md.FullName())
		}
		st := &delta.StructType{}
		for i := range md.Fields().Len() {
			f := md.Fields().Get(i)
			t, err := protobufDataType(f, append(slices.Clip(inside), md))
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", f.Name(), err)
			}
			st.Fields = append(st.Fields, delta.StructField{Name: string(f.Name()), Type: t, Nullable: true})
		}
		return st, nil
	}
	return nil, fmt.Errorf("of kind %s", fd.Kind())
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
	add, err := columnChanges(fields, p)
	switch {
	case err != nil:
		return writerPlan{err: err}
	case len(add) > 0:
		return writerPlan{add: add}
	}
	return writerPlan{build: func(p *plan) values {
		return &protoValues{p: p, schema: schema, byIndexes: map[string]*protoWalk{}, slots: make([]protoSlot, len(p.nodes))}
	}}
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
	case kDecimal:
		return c.dec.castInt(n, out), nil
	default:
		return failType, nil
	}
	return ok, nil
}
