package mapping

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/deltaflow/deltaflow/delta"
)

// orderProto is testdata/protofile/order.proto, which imports money.proto
// beside it.
var orderProto = filepath.Join("testdata", "protofile", "order.proto")

// plainProto encodes a message of the schema file (protobuf-go's encoder,
// not the walk that reads it), set by set.
func plainProto(t testing.TB, m *Mapper, set func(m protoreflect.Message)) []byte {
	t.Helper()
	msg := dynamicpb.NewMessage(m.p.cfg.protoMessage)
	set(msg)
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// set sets field name of m, a message field to what fill sets in a new
// one of its type.
func set(m protoreflect.Message, name string, v any) {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	switch v := v.(type) {
	case func(protoreflect.Message):
		sub := m.NewField(fd).Message()
		v(sub)
		m.Set(fd, protoreflect.ValueOfMessage(sub))
	case []string:
		list := m.Mutable(fd).List()
		for _, s := range v {
			list.Append(protoreflect.ValueOfString(s))
		}
	case protoreflect.Value:
		m.Set(fd, v)
	default:
		m.Set(fd, protoreflect.ValueOf(v))
	}
}

// A protobuf table with a schema file reads plain bodies of the message it
// names: columns with paths read a nested message and one of the imported
// file, an enum reads its name, a Timestamp a timestamp, the oneof member
// set its value and the other null, a repeated field is read past; unset
// messages are null; a body that is not the message is a dead letter with
// the decoder's error, a Confluent-framed one too.
func TestMapProtoFile(t *testing.T) {
	m, err := New(Config{Format: Protobuf, SchemaFile: orderProto, Message: "shop.Order", Columns: []Column{
		{Name: "id", Type: "string"}, {Name: "status", Type: "string"}, {Name: "placed", Type: "timestamp"},
		{Name: "currency", Type: "string", Source: "total.currency"}, {Name: "units", Type: "long", Source: "total.units"},
		{Name: "email", Type: "string"}, {Name: "phone", Type: "long"},
		{Name: "sku", Type: "string", Source: "line.sku"}, {Name: "qty", Type: "integer", Source: "line.qty"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 12, 0, 5, 250000000, time.UTC)
	full := plainProto(t, m, func(r protoreflect.Message) {
		set(r, "id", "o1")
		set(r, "status", protoreflect.ValueOfEnum(2))
		set(r, "placed", protoreflect.ValueOfMessage(timestamppb.New(at).ProtoReflect()))
		set(r, "total", func(s protoreflect.Message) {
			set(s, "currency", protoreflect.ValueOfEnum(1))
			set(s, "units", int64(1250))
		})
		set(r, "tags", []string{"gift", "rush"})
		set(r, "phone", int64(5551234))
		set(r, "line", func(s protoreflect.Message) {
			set(s, "sku", "x-1")
			set(s, "qty", int32(3))
		})
	})
	var row Row
	if err := m.Map(&Record{Value: full}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.ByteArrayValue([]byte("o1")), parquet.ByteArrayValue([]byte("SHIPPED")),
		parquet.Int64Value(at.UnixMicro()), parquet.ByteArrayValue([]byte("EUR")), parquet.Int64Value(1250), parquet.NullValue(),
		parquet.Int64Value(5551234), parquet.ByteArrayValue([]byte("x-1")), parquet.Int32Value(3)})

	email := plainProto(t, m, func(r protoreflect.Message) {
		set(r, "id", "o2")
		set(r, "email", "a@b.example")
	})
	if err := m.Map(&Record{Value: email}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.ByteArrayValue([]byte("o2")), parquet.ByteArrayValue([]byte("STATUS_UNSPECIFIED")),
		parquet.NullValue(), parquet.NullValue(), parquet.NullValue(), parquet.ByteArrayValue([]byte("a@b.example")),
		parquet.NullValue(), parquet.NullValue(), parquet.NullValue()})

	for _, c := range []struct {
		name  string
		value []byte
		want  string
	}{
		{"not Protobuf", []byte("\xff\xff\xff not protobuf"), "not Protobuf of the schema file's shop.Order: cannot parse reserved wire type"},
		{"in the registry's wire format", append([]byte{0, 0, 0, 0, 1, 0}, full...), "not Protobuf of the schema file's shop.Order: invalid field number"},
	} {
		err := m.Map(&Record{Value: c.value}, &row)
		if me, ok := errors.AsType[*MapError](err); !ok || !strings.Contains(me.Error(), c.want) {
			t.Errorf("%s: %v, want a MapError saying %q", c.name, err, c.want)
		}
	}
}

// Without columns, the fields of a schema file's message make them as a
// registry schema's do: all nullable, an enum of the imported file and a
// oneof's members each a column, a nested message a struct, a repeated
// field an array; a message with fields no column type holds is refused
// naming them.
func TestProtoFileColumns(t *testing.T) {
	m, err := New(Config{Format: Protobuf, SchemaFile: orderProto, Message: "shop.Event"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkNullableColumns(t, m, []namedColumn{{"id", delta.String}, {"status", delta.String}, {"at", delta.Timestamp},
		{"currency", delta.String}, {"amount", delta.Double}, {"text", delta.String}})
	at := time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC)
	event := plainProto(t, m, func(r protoreflect.Message) {
		set(r, "id", "e1")
		set(r, "status", protoreflect.ValueOfEnum(1))
		set(r, "at", protoreflect.ValueOfMessage(timestamppb.New(at).ProtoReflect()))
		set(r, "currency", protoreflect.ValueOfEnum(2))
		set(r, "text", "hello")
	})
	var row Row
	if err := m.Map(&Record{Value: event}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.ByteArrayValue([]byte("e1")), parquet.ByteArrayValue([]byte("OPEN")),
		parquet.Int64Value(at.UnixMicro()), parquet.ByteArrayValue([]byte("USD")), parquet.NullValue(), parquet.ByteArrayValue([]byte("hello"))})

	order, err := New(Config{Format: Protobuf, SchemaFile: orderProto, Message: "shop.Order"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range order.Schema().Fields {
		got = append(got, f.Name+" "+typeDDL(f.Type))
	}
	want := "id string, status string, placed timestamp, total struct<currency: string, units: long>, tags array<string>, " +
		"email string, phone long, line struct<sku: string, qty: integer>"
	if strings.Join(got, ", ") != want {
		t.Errorf("columns of shop.Order: %s, want %s", strings.Join(got, ", "), want)
	}
	_, err = New(Config{Format: Protobuf, SchemaFile: tripProto, Message: "shop.Tree"}, nil)
	if want := "table.schema_file: " + tripProto + ": shop.Tree: no column type for this Protobuf type: field kids: "; !errors.Is(err, ErrProtobufTypeNotSupported) || !strings.Contains(err.Error(), want) {
		t.Errorf("columns of shop.Tree: %v, want %q", err, want)
	}
}

// A schema file that cannot be read, does not compile, lacks an import or
// the message is a configuration error naming the key and the file (and a
// syntax error's line).
func TestProtoFileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	missing := filepath.Join(dir, "nope.proto")
	syntax := write("syntax.proto", "syntax = \"proto3\";\nmessage M {\n  int32 a = ;\n}\n")
	noImport := write("imports.proto", "syntax = \"proto3\";\nimport \"gone.proto\";\nmessage M { Gone g = 1; }\n")
	for _, c := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"a missing file", Config{SchemaFile: missing, Message: "M"}, []string{"tables[1].schema_file: " + missing + ": ", "nope.proto"}},
		{"a syntax error", Config{SchemaFile: syntax, Message: "M"}, []string{"tables[1].schema_file: " + syntax + ": syntax.proto:3:13: syntax error"}},
		{"an import not found", Config{SchemaFile: noImport, Message: "M"}, []string{"tables[1].schema_file: " + noImport + ": ", "gone.proto"}},
		{"an unknown message", Config{SchemaFile: orderProto, Message: "shop.Nope"},
			[]string{"tables[1].message: " + orderProto + ": the schema order.proto has no message shop.Nope"}},
		{"no message", Config{SchemaFile: orderProto}, []string{"tables[1].message: ", "give the full name of their message in " + orderProto}},
		{"a variant column", Config{SchemaFile: orderProto, Message: "shop.Order", Columns: []Column{{Name: "id", Type: "variant"}}},
			[]string{"tables[1].columns[0].type: a variant column holds JSON values; the format is protobuf"}},
	} {
		c.cfg.Format, c.cfg.Key = Protobuf, "tables[1]"
		_, err := New(c.cfg, nil)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want an error saying %q", c.name, err, w)
			}
		}
	}
	if _, err := New(Config{SchemaFile: orderProto}, nil); err == nil ||
		!strings.Contains(err.Error(), "table.schema_file: only the avro and protobuf formats read a schema file (format is json)") {
		t.Errorf("a json table with a schema file: %v", err)
	}
}
