package mapping

import (
	"encoding/base64"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/sim"
)

// readingProto is, as a descriptor, the schema
//
//	syntax = "proto3"; package t;
//	import "google/protobuf/timestamp.proto"; import "google/protobuf/wrappers.proto";
//	message Reading { string id = 1; int32 count = 2; uint64 big = 3; float ratio = 4; bool on = 5;
//	  Kind kind = 6; google.protobuf.Timestamp at = 7; google.protobuf.DoubleValue volts = 8;
//	  enum Kind { KIND_UNSPECIFIED = 0; PLUG = 1; } }
//	message Located { string id = 1; Inner loc = 2; message Inner { double lat = 1; } }
//
// with extra fields (v2: int64 count, or a new string room = 9).
func readingProto(t testing.TB, extra ...*descriptorpb.FieldDescriptorProto) string {
	t.Helper()
	field := sim.ProtoField
	reading := []*descriptorpb.FieldDescriptorProto{
		field("id", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""),
		field("count", 2, descriptorpb.FieldDescriptorProto_TYPE_INT32, ""),
		field("big", 3, descriptorpb.FieldDescriptorProto_TYPE_UINT64, ""),
		field("ratio", 4, descriptorpb.FieldDescriptorProto_TYPE_FLOAT, ""),
		field("on", 5, descriptorpb.FieldDescriptorProto_TYPE_BOOL, ""),
		field("kind", 6, descriptorpb.FieldDescriptorProto_TYPE_ENUM, ".t.Reading.Kind"),
		field("at", 7, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".google.protobuf.Timestamp"),
		field("volts", 8, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".google.protobuf.DoubleValue"),
	}
	for _, e := range extra {
		if i := func() int {
			for i, f := range reading {
				if f.GetName() == e.GetName() {
					return i
				}
			}
			return -1
		}(); i >= 0 {
			reading[i] = e
		} else {
			reading = append(reading, e)
		}
	}
	fd := &descriptorpb.FileDescriptorProto{
		Name: proto.String("t/reading.proto"), Package: proto.String("t"), Syntax: proto.String("proto3"),
		Dependency: []string{"google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto"},
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("Reading"), Field: reading, EnumType: []*descriptorpb.EnumDescriptorProto{{
				Name: proto.String("Kind"), Value: []*descriptorpb.EnumValueDescriptorProto{
					{Name: proto.String("KIND_UNSPECIFIED"), Number: proto.Int32(0)}, {Name: proto.String("PLUG"), Number: proto.Int32(1)}},
			}}},
			{Name: proto.String("Located"), Field: []*descriptorpb.FieldDescriptorProto{
				field("id", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""),
				field("loc", 2, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".t.Located.Inner"),
			}, NestedType: []*descriptorpb.DescriptorProto{{Name: proto.String("Inner"), Field: []*descriptorpb.FieldDescriptorProto{
				field("lat", 1, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE, ""),
			}}}},
		},
	}
	b, err := proto.Marshal(&descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{fd}})
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// encodeProto encodes message index of schema with fields set, framed
// in the wire format with schema id and the message's indexes.
func encodeProto(t testing.TB, schema string, id, index int, set func(m *dynamicpb.Message, fields protoreflect.FieldDescriptors)) []byte {
	t.Helper()
	s, err := parseProtoSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	md := s.main.Messages().Get(index)
	m := dynamicpb.NewMessage(md)
	set(m, md.Fields())
	body, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	indexes := []byte{0} // the first message
	if index > 0 {
		indexes = []byte{2, byte(2 * index)} // one index, zigzag
	}
	return wire(id, append(indexes, body...))
}

func setMsg(m protoreflect.Message, fields protoreflect.FieldDescriptors, name string, v protoreflect.Value) {
	m.Set(fields.ByName(protoreflect.Name(name)), v)
}

// Columns come from the schema's first message, with the types
// docs/configuration.md gives; records are read by the message their
// indexes name; unset fields read their default, unset messages null.
func TestMapRegistryProtobuf(t *testing.T) {
	v1 := readingProto(t)
	schemas := &schemaMap{format: Protobuf, schemas: map[int]string{1: v1}, missing: map[int]error{9: ErrSchemaNotFound}}
	m, err := New(Config{Format: Protobuf, Registry: schemas, Schema: v1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkNullableColumns(t, m, []namedColumn{{"id", delta.String}, {"count", delta.Integer}, {"big", delta.Long},
		{"ratio", delta.Float}, {"on", delta.Boolean}, {"kind", delta.String}, {"at", delta.Timestamp}, {"volts", delta.Double}})

	at := time.Date(2026, 12, 5, 7, 30, 0, 123456000, time.UTC)
	full := encodeProto(t, v1, 1, 0, func(r *dynamicpb.Message, f protoreflect.FieldDescriptors) {
		setMsg(r, f, "id", protoreflect.ValueOfString("p1"))
		setMsg(r, f, "count", protoreflect.ValueOfInt32(-7))
		setMsg(r, f, "big", protoreflect.ValueOfUint64(1<<40))
		setMsg(r, f, "ratio", protoreflect.ValueOfFloat32(0.5))
		setMsg(r, f, "on", protoreflect.ValueOfBool(true))
		setMsg(r, f, "kind", protoreflect.ValueOfEnum(1))
		setMsg(r, f, "at", protoreflect.ValueOfMessage(timestamppb.New(at).ProtoReflect()))
		setMsg(r, f, "volts", protoreflect.ValueOfMessage(wrapperspb.Double(230.5).ProtoReflect()))
	})
	var row Row
	if err := m.Map(&Record{Value: full}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.ByteArrayValue([]byte("p1")), parquet.Int32Value(-7), parquet.Int64Value(1 << 40),
		parquet.FloatValue(0.5), parquet.BooleanValue(true), parquet.ByteArrayValue([]byte("PLUG")), parquet.Int64Value(at.UnixMicro()),
		parquet.DoubleValue(230.5)})

	empty := encodeProto(t, v1, 1, 0, func(*dynamicpb.Message, protoreflect.FieldDescriptors) {})
	if err := m.Map(&Record{Value: empty}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.ByteArrayValue(nil), parquet.Int32Value(0), parquet.Int64Value(0),
		parquet.FloatValue(0), parquet.BooleanValue(false), parquet.ByteArrayValue([]byte("KIND_UNSPECIFIED")), parquet.NullValue(),
		parquet.NullValue()})

	for _, c := range []struct {
		name  string
		value []byte
		want  string
	}{
		{"uint64 past a long", encodeProto(t, v1, 1, 0, func(r *dynamicpb.Message, f protoreflect.FieldDescriptors) {
			setMsg(r, f, "big", protoreflect.ValueOfUint64(math.MaxUint64))
		}), "big"},
		{"a message index past the schema's", wire(1, []byte{2, 8}), "message index 4: the schema t/reading.proto has 2 messages"},
		{"no indexes", wire(1, nil), "no message indexes"},
		{"not Protobuf", wire(1, []byte{0, 0xff, 0xff}), "not Protobuf of its writer schema's t.Reading: unexpected EOF"},
		{"unknown to the registry", wire(9, []byte{0}), "schema id 9: not found in the schema registry"},
	} {
		err := m.Map(&Record{Value: c.value}, &row)
		if me, ok := errors.AsType[*MapError](err); !ok || !strings.Contains(me.Error(), c.want) {
			t.Errorf("%s: %v, want a MapError saying %q", c.name, err, c.want)
		}
	}
}

// A nested message makes a struct column; columns with paths into it
// read its scalars, from the records of the message the indexes name.
func TestMapRegistryProtobufPaths(t *testing.T) {
	v1 := readingProto(t)
	schemas := &schemaMap{format: Protobuf, schemas: map[int]string{1: v1}}
	derived, err := New(Config{Format: Protobuf, Registry: schemas, Schema: v1, Message: "t.Located"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if loc := derived.Schema().Fields[1]; loc.Name != "loc" || typeDDL(loc.Type) != "struct<lat: double>" {
		t.Errorf("columns of t.Located: %s %s, want loc struct<lat: double>", loc.Name, typeDDL(loc.Type))
	}
	m, err := New(Config{Format: Protobuf, Registry: schemas, Schema: v1, Message: "t.Located",
		Columns: []Column{{Name: "id", Type: "string"}, {Name: "lat", Type: "double", Source: "loc.lat"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	located := encodeProto(t, v1, 1, 1, func(r *dynamicpb.Message, f protoreflect.FieldDescriptors) {
		setMsg(r, f, "id", protoreflect.ValueOfString("l1"))
		inner := r.NewField(f.ByName("loc")).Message()
		inner.Set(inner.Descriptor().Fields().ByName("lat"), protoreflect.ValueOfFloat64(52.5))
		r.Set(f.ByName("loc"), protoreflect.ValueOfMessage(inner))
	})
	var row Row
	if err := m.Map(&Record{Value: located}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.ByteArrayValue([]byte("l1")), parquet.DoubleValue(52.5)})
	if err := derived.Map(&Record{Value: located}, &row); err != nil {
		t.Fatal(err)
	}
	if got := leafText(t, row.Values[1]); got != `0:r0d2=52.5` {
		t.Errorf("loc %s", got)
	}
	noLoc := encodeProto(t, v1, 1, 1, func(r *dynamicpb.Message, f protoreflect.FieldDescriptors) {
		setMsg(r, f, "id", protoreflect.ValueOfString("l2"))
	})
	if err := m.Map(&Record{Value: noLoc}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.ByteArrayValue([]byte("l2")), parquet.NullValue()})
}

// A writer schema with a new field evolves the table; one that widens a
// derived column's type (int32 → int64) makes its records dead letters,
// unless the table allows type widening: then the column widens.
func TestMapRegistryProtobufEvolves(t *testing.T) {
	v1 := readingProto(t)
	v2 := readingProto(t, sim.ProtoField("room", 9, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""))
	v3 := readingProto(t, sim.ProtoField("count", 2, descriptorpb.FieldDescriptorProto_TYPE_INT64, ""))
	schemas := &schemaMap{format: Protobuf, schemas: map[int]string{1: v1, 2: v2, 3: v3}}
	m, err := New(Config{Format: Protobuf, Registry: schemas, Schema: v1, Evolve: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	rec2 := encodeProto(t, v2, 2, 0, func(r *dynamicpb.Message, f protoreflect.FieldDescriptors) {
		setMsg(r, f, "room", protoreflect.ValueOfString("hall"))
	})
	err = m.Map(&Record{Value: rec2}, &row)
	change, ok := errors.AsType[*SchemaChangeError](err)
	if !ok || len(change.Add) != 1 || change.Add[0].Name != "room" || change.Add[0].Type != "string" {
		t.Fatalf("a schema with a new field: %v, want a SchemaChangeError adding room", err)
	}
	evolved, err := m.Evolved(change.Add)
	if err != nil {
		t.Fatal(err)
	}
	if err := evolved.Map(&Record{Value: rec2}, &row); err != nil {
		t.Fatal(err)
	}
	if got := row.Values[len(row.Values)-1]; string(got.ByteArray()) != "hall" {
		t.Errorf("room = %v, want hall", got)
	}
	rec3 := encodeProto(t, v3, 3, 0, func(r *dynamicpb.Message, f protoreflect.FieldDescriptors) {
		setMsg(r, f, "count", protoreflect.ValueOfInt64(1<<40))
	})
	err = evolved.Map(&Record{Value: rec3}, &row)
	if me, ok := errors.AsType[*MapError](err); !ok || !strings.Contains(me.Error(), "field count: the writer schema's long is wider than the table's integer column count: "+delta.TypeWideningHint) {
		t.Errorf("a schema widening count: %v, want a dead letter naming count", err)
	}

	// On a table that allows type widening, the column widens.
	m, err = New(Config{Format: Protobuf, Registry: schemas, Schema: v1, Evolve: true, TypeWidening: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Map(&Record{Value: rec3}, &row)
	change, ok = errors.AsType[*SchemaChangeError](err)
	if !ok || len(change.Add) != 1 || change.Add[0].Name != "count" || change.Add[0].Type != "long" {
		t.Fatalf("a schema widening count on a table that allows it: %v, want a SchemaChangeError widening count", err)
	}
	if evolved, err = m.Evolved(change.Add); err != nil {
		t.Fatal(err)
	}
	if err := evolved.Map(&Record{Value: rec3}, &row); err != nil {
		t.Fatal(err)
	}
	if i := evolved.Schema().Index("count"); evolved.Schema().Fields[i].Type != delta.Long || row.Values[i].Int64() != 1<<40 {
		t.Errorf("count widened: %s = %v, want long 1<<40", evolved.Schema().Fields[i].Type, row.Values[i])
	}
}

// A schema that imports a file neither among its references nor a
// well-known type is refused naming it.
func TestParseProtoSchemaImports(t *testing.T) {
	fd := &descriptorpb.FileDescriptorProto{Name: proto.String("a.proto"), Syntax: proto.String("proto3"),
		Dependency: []string{"other/b.proto"}}
	b, _ := proto.Marshal(&descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{fd}})
	_, err := parseProtoSchema(base64.StdEncoding.EncodeToString(b))
	if err == nil || !strings.Contains(err.Error(), "a.proto imports other/b.proto, which is neither a reference") {
		t.Errorf("an unresolved import: %v", err)
	}
	if _, err := parseProtoSchema("syntax = \"proto3\";"); err == nil {
		t.Error("a schema in .proto text was taken for files")
	}
}

// BenchmarkMapRegistryProtobuf maps Reading records of every field type
// (the message decoded by dynamicpb, reused from record to record).
func BenchmarkMapRegistryProtobuf(b *testing.B) {
	v1 := readingProto(b)
	m, err := New(Config{Format: Protobuf, Registry: &schemaMap{format: Protobuf, schemas: map[int]string{1: v1}}, Schema: v1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 12, 5, 7, 30, 0, 0, time.UTC)
	recs := make([]*Record, 256)
	for i := range recs {
		recs[i] = &Record{Value: encodeProto(b, v1, 1, 0, func(r *dynamicpb.Message, f protoreflect.FieldDescriptors) {
			setMsg(r, f, "id", protoreflect.ValueOfString("smart-plug-"+strconv.Itoa(i%20)))
			setMsg(r, f, "count", protoreflect.ValueOfInt32(int32(i)))
			setMsg(r, f, "big", protoreflect.ValueOfUint64(uint64(i)<<33))
			setMsg(r, f, "ratio", protoreflect.ValueOfFloat32(float32(i)/7))
			setMsg(r, f, "on", protoreflect.ValueOfBool(i%2 == 0))
			setMsg(r, f, "kind", protoreflect.ValueOfEnum(protoreflect.EnumNumber(i%2)))
			setMsg(r, f, "at", protoreflect.ValueOfMessage(timestamppb.New(at.Add(time.Duration(i)*time.Second)).ProtoReflect()))
			setMsg(r, f, "volts", protoreflect.ValueOfMessage(wrapperspb.Double(230+float64(i)/10).ProtoReflect()))
		})}
	}
	benchMap(b, m, recs)
}

// FuzzMapProtobuf: any body after a schema id is a row or a dead letter,
// never a panic or a pending schema; and a body protobuf-go's own parser
// (dynamicpb) takes is mapped to the values it reads.
func FuzzMapProtobuf(f *testing.F) {
	v1 := readingProto(f)
	m, err := New(Config{Format: Protobuf, Registry: &schemaMap{format: Protobuf, schemas: map[int]string{1: v1}}, Schema: v1}, nil)
	if err != nil {
		f.Fatal(err)
	}
	schema, err := parseProtoSchema(v1)
	if err != nil {
		f.Fatal(err)
	}
	md := schema.main.Messages().Get(0)
	f.Add(encodeProto(f, v1, 1, 0, func(r *dynamicpb.Message, fs protoreflect.FieldDescriptors) {
		setMsg(r, fs, "id", protoreflect.ValueOfString("p1"))
		setMsg(r, fs, "count", protoreflect.ValueOfInt32(-3))
		setMsg(r, fs, "kind", protoreflect.ValueOfEnum(7))
		setMsg(r, fs, "at", protoreflect.ValueOfMessage(timestamppb.New(time.Unix(1e9, 5000)).ProtoReflect()))
		setMsg(r, fs, "volts", protoreflect.ValueOfMessage(wrapperspb.Double(-1.5).ProtoReflect()))
	})[5:])
	f.Add([]byte{2, 2, 10, 2, 'l', '1'})
	f.Add([]byte{0x7f, 1})
	f.Add([]byte{0, 0x12, 0x00, 0x10, 0x05, 0x10, 0x06})
	f.Fuzz(func(t *testing.T, body []byte) {
		var row Row
		err := m.Map(&Record{Value: wire(1, body)}, &row)
		if _, ok := errors.AsType[*MapError](err); err != nil && !ok {
			t.Fatalf("error %v is no MapError", err)
		}
		if len(body) == 0 || body[0] != 0 {
			return // the oracle reads the first message only
		}
		msg := dynamicpb.NewMessage(md)
		if proto.Unmarshal(body[1:], msg) != nil {
			return
		}
		if err != nil {
			if strings.Contains(err.Error(), "not Protobuf") {
				t.Fatalf("%x: protobuf-go reads it, Map says %v", body, err)
			}
			return // a value no column takes (a uint64 past a long, a timestamp out of range)
		}
		want := protoOracleRow(msg)
		if !protoRowsEqual(row.Values, want) {
			t.Fatalf("%x: Map reads %v, protobuf-go %v", body, row.Values, want)
		}
	})
}

// protoOracleRow is what the table should hold for a Reading message, as
// protobuf-go reads it.
func protoOracleRow(msg *dynamicpb.Message) []parquet.Value {
	fs := msg.Descriptor().Fields()
	get := func(name string) protoreflect.Value { return msg.Get(fs.ByName(protoreflect.Name(name))) }
	kind := fs.ByName("kind")
	kindName := strconv.Itoa(int(get("kind").Enum()))
	if ev := kind.Enum().Values().ByNumber(get("kind").Enum()); ev != nil {
		kindName = string(ev.Name())
	}
	row := []parquet.Value{parquet.ByteArrayValue([]byte(get("id").String())), parquet.Int32Value(int32(get("count").Int())),
		parquet.Int64Value(int64(get("big").Uint())), parquet.FloatValue(float32(get("ratio").Float())), parquet.BooleanValue(get("on").Bool()),
		parquet.ByteArrayValue([]byte(kindName)), parquet.NullValue(), parquet.NullValue()}
	if msg.Has(fs.ByName("at")) {
		ts := get("at").Message().Interface()
		m := ts.ProtoReflect()
		secs, nanos := m.Get(m.Descriptor().Fields().ByNumber(1)).Int(), m.Get(m.Descriptor().Fields().ByNumber(2)).Int()
		row[6] = parquet.Int64Value(secs*1_000_000 + nanos/1000)
	}
	if msg.Has(fs.ByName("volts")) {
		w := get("volts").Message()
		row[7] = parquet.DoubleValue(w.Get(w.Descriptor().Fields().ByNumber(1)).Float())
	}
	return row
}

// protoRowsEqual compares rows by kind and value.
func protoRowsEqual(got, want []parquet.Value) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if protoValueText(got[i]) != protoValueText(want[i]) {
			return false
		}
	}
	return true
}

func protoValueText(v parquet.Value) string {
	switch {
	case v.IsNull():
		return "null"
	case v.Kind() == parquet.ByteArray:
		return strconv.Quote(string(v.ByteArray()))
	case v.Kind() == parquet.Boolean:
		return strconv.FormatBool(v.Boolean())
	case v.Kind() == parquet.Int32:
		return "i" + strconv.Itoa(int(v.Int32()))
	case v.Kind() == parquet.Int64:
		return "l" + strconv.FormatInt(v.Int64(), 10)
	case v.Kind() == parquet.Float:
		return "f" + strconv.FormatFloat(float64(v.Float()), 'g', -1, 32)
	case v.Kind() == parquet.Double:
		return "d" + strconv.FormatFloat(v.Double(), 'g', -1, 64)
	}
	return v.Kind().String()
}

// Mapping a Protobuf record allocates nothing once its message is
// compiled.
func TestMapRegistryProtobufDoesNotAllocate(t *testing.T) {
	v1 := readingProto(t)
	m, err := New(Config{Format: Protobuf, Registry: &schemaMap{format: Protobuf, schemas: map[int]string{1: v1}}, Schema: v1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Record{Value: encodeProto(t, v1, 1, 0, func(r *dynamicpb.Message, f protoreflect.FieldDescriptors) {
		setMsg(r, f, "id", protoreflect.ValueOfString("p1"))
		setMsg(r, f, "kind", protoreflect.ValueOfEnum(1))
		setMsg(r, f, "at", protoreflect.ValueOfMessage(timestamppb.New(time.Unix(1e9, 0)).ProtoReflect()))
		setMsg(r, f, "volts", protoreflect.ValueOfMessage(wrapperspb.Double(230).ProtoReflect()))
	})}
	var row Row
	row.Arena = new(Arena)
	if err := m.Map(rec, &row); err != nil {
		t.Fatal(err)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		if err := m.Map(rec, &row); err != nil {
			t.Fatal(err)
		}
		if i++; i%64 == 0 {
			row.Arena.Reset()
		}
	})
	if allocs != 0 {
		t.Errorf("Map allocates %.1f times per Protobuf record", allocs)
	}
}
