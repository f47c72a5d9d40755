package mapping

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deltaflow/deltaflow/internal/sim"
)

const tripProto = "testdata/protofile/trip.proto"

// Repeated fields, maps and messages make array, map and struct columns,
// read from the wire: packed and unpacked elements, map entries, unset
// fields (proto3 scalars their default, messages and optional fields
// null, repeated fields and maps empty).
func TestMapProtobufNested(t *testing.T) {
	m, err := New(Config{Format: Protobuf, SchemaFile: tripProto, Message: "shop.Trip"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range m.Schema().Fields {
		got = append(got, f.Name+" "+typeDDL(f.Type))
	}
	reading := "struct<at: timestamp, v: long, notes: array<string>>"
	want := []string{"id string", "loc struct<lat: double, lon: double, inner: struct<floor: integer>>", "counts array<long>",
		"tags array<string>", "readings array<" + reading + ">", "attrs map<string, long>", "by_name map<string, " + reading + ">", "blob binary",
		"by_code map<integer, string>", "by_big map<long, boolean>", "by_flag map<boolean, integer>"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("columns\n got %s\nwant %s", strings.Join(got, ", "), strings.Join(want, ", "))
	}
	at := time.Unix(1000, 500_000)
	full := plainProto(t, m, func(r protoreflect.Message) {
		set(r, "id", "t1")
		set(r, "loc", func(l protoreflect.Message) {
			set(l, "lat", 1.5)
			set(l, "inner", func(protoreflect.Message) {}) // floor: its default
		})
		counts := r.Mutable(r.Descriptor().Fields().ByName("counts")).List()
		for _, n := range []int64{1, 2, 3} {
			counts.Append(protoreflect.ValueOfInt64(n))
		}
		set(r, "tags", []string{"a", ""})
		readings := r.Mutable(r.Descriptor().Fields().ByName("readings")).List()
		first := readings.NewElement().Message()
		set(first, "at", protoreflect.ValueOfMessage(timestamppb.New(at).ProtoReflect()))
		set(first, "v", protoreflect.ValueOfMessage(wrapperspb.Int64(7).ProtoReflect()))
		set(first, "notes", []string{"n"})
		readings.Append(protoreflect.ValueOfMessage(first))
		readings.Append(readings.NewElement()) // an empty message
		attrs := r.Mutable(r.Descriptor().Fields().ByName("attrs")).Map()
		attrs.Set(protoreflect.ValueOfString("k").MapKey(), protoreflect.ValueOfInt64(5))
		byName := r.Mutable(r.Descriptor().Fields().ByName("by_name")).Map()
		byName.Set(protoreflect.ValueOfString("x").MapKey(), byName.NewValue())
		set(r, "blob", protoreflect.ValueOfBytes([]byte{0, 1}))
		byCode := r.Mutable(r.Descriptor().Fields().ByName("by_code")).Map()
		byCode.Set(protoreflect.ValueOfInt32(-7).MapKey(), protoreflect.ValueOfString("minus seven"))
		byBig := r.Mutable(r.Descriptor().Fields().ByName("by_big")).Map()
		byBig.Set(protoreflect.ValueOfUint64(1<<40).MapKey(), protoreflect.ValueOfBool(true))
		byFlag := r.Mutable(r.Descriptor().Fields().ByName("by_flag")).Map()
		byFlag.Set(protoreflect.ValueOfBool(true).MapKey(), protoreflect.ValueOfInt32(-3))
	})
	// An entry without key nor value: 0 to "", the defaults. (Appended
	// after the other: Marshal orders a map's entries as it likes.)
	full = protowire.AppendBytes(protowire.AppendTag(full, 9, protowire.BytesType), nil)
	// Leaves: loc 0 lat, 1 lon, 2 inner.floor; readings 0 at, 1 v, 2
	// notes' element; attrs 0 key, 1 value; by_name 0 key, 1 at, 2 v, 3
	// notes' element; by_code, by_big, by_flag 0 key, 1 value (blob
	// between: its own value).
	for _, tc := range []struct {
		name string
		rec  []byte
		want []string // loc, counts, tags, readings, attrs, by_name, blob, by_code, by_big, by_flag
	}{
		{"full", full, []string{`0:r0d2=1.5 1:r0d1 2:r0d3=0`, `0:r0d3=1 0:r1d3=2 0:r1d3=3`, `0:r0d3="a" 0:r1d3=""`,
			`0:r0d4=1000000500 0:r1d3 1:r0d4=7 1:r1d3 2:r0d6="n" 2:r1d4`, `0:r0d2="k" 1:r0d3=5`, `0:r0d2="x" 1:r0d3 2:r0d3 3:r0d4`,
			`"\x00\x01"`, `0:r0d2=-7 0:r1d2=0 1:r0d3="minus seven" 1:r1d3=""`, `0:r0d2=1099511627776 1:r0d3=true`, `0:r0d2=true 1:r0d3=-3`}},
		{"unset", plainProto(t, m, func(r protoreflect.Message) { set(r, "id", "t2") }),
			[]string{"null", `0:r0d1`, `0:r0d1`, `0:r0d1 1:r0d1 2:r0d1`, `0:r0d1 1:r0d1`, `0:r0d1 1:r0d1 2:r0d1 3:r0d1`,
				`""`, `0:r0d1 1:r0d1`, `0:r0d1 1:r0d1`, `0:r0d1 1:r0d1`}},
		{"a message without its message", plainProto(t, m, func(r protoreflect.Message) {
			set(r, "loc", func(l protoreflect.Message) { set(l, "lon", -2.0) })
		}), []string{`0:r0d2=0 1:r0d2=-2 2:r0d1`, `0:r0d1`, `0:r0d1`, `0:r0d1 1:r0d1 2:r0d1`, `0:r0d1 1:r0d1`, `0:r0d1 1:r0d1 2:r0d1 3:r0d1`,
			`""`, `0:r0d1 1:r0d1`, `0:r0d1 1:r0d1`, `0:r0d1 1:r0d1`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var row Row
			if err := m.Map(&Record{Value: tc.rec}, &row); err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.want {
				var got string
				if i == 6 { // blob, no nested column
					got = fmt.Sprintf("%q", row.Values[i+1].ByteArray())
				} else {
					got = leafText(t, row.Values[i+1])
				}
				if got != want {
					t.Errorf("column %s: %s\nwant %s", m.p.cols[i+1].Name, got, want)
				}
			}
		})
	}
	var row Row
	if err := m.Map(&Record{Value: full}, &row); err != nil {
		t.Fatal(err)
	}
	if got := string(row.Values[7].ByteArray()); got != "\x00\x01" {
		t.Errorf("blob %q", got)
	}

	// A message that holds itself: no column.
	_, err = New(Config{Format: Protobuf, SchemaFile: tripProto, Message: "shop.Tree"}, nil)
	if want := "field kids: field kids: a message shop.Tree that holds itself (recursive): no column holds it"; !errors.Is(err, ErrProtobufTypeNotSupported) || !strings.Contains(err.Error(), want) {
		t.Errorf("columns of shop.Tree: %v, want %q", err, want)
	}
}

// Declared nested columns over Protobuf: a value of another shape is a
// dead letter naming the column and the path inside it.
func TestMapProtobufNestedRejects(t *testing.T) {
	for _, tc := range []struct{ typ, src, want string }{
		{"array<long>", "tags", `bad: element 0: expected number, got string`},
		{"struct<a: long>", "tags", `bad: expected struct, got repeated string`},
		{"array<struct<notes: array<long>>>", "readings", `bad: element 0: field notes: element 0: expected number, got string`},
		// Keys: a string key's text cast, a number kept or refused as a
		// scalar of its kind is.
		{"map<long, long>", "attrs", `bad: key "k": cannot cast "k" to long`},
		{"map<boolean, long>", "attrs", `bad: key "k": cannot cast "k" to boolean`},
		{"map<string, string>", "by_code", `bad: key "1": expected string, got int32`},
		{"map<integer, boolean>", "by_big", `bad: key "1099511627776": integer overflow`},
		{"map<long, long>", "by_big", `bad: value of key 1099511627776: expected number, got bool`},
		{"map<boolean, string>", "by_flag", `bad: value of key true: expected string, got sint32`},
	} {
		cfg := Config{Format: Protobuf, SchemaFile: tripProto, Message: "shop.Trip",
			Columns: []Column{{Name: "id", Type: "string"}, {Name: "bad", Type: tc.typ, Source: tc.src}}}
		m, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		rec := plainProto(t, m, func(r protoreflect.Message) {
			set(r, "tags", []string{"a"})
			readings := r.Mutable(r.Descriptor().Fields().ByName("readings")).List()
			first := readings.NewElement().Message()
			set(first, "notes", []string{"n"})
			readings.Append(protoreflect.ValueOfMessage(first))
			r.Mutable(r.Descriptor().Fields().ByName("attrs")).Map().Set(protoreflect.ValueOfString("k").MapKey(), protoreflect.ValueOfInt64(1))
			r.Mutable(r.Descriptor().Fields().ByName("by_code")).Map().Set(protoreflect.ValueOfInt32(1).MapKey(), protoreflect.ValueOfString("a"))
			r.Mutable(r.Descriptor().Fields().ByName("by_big")).Map().Set(protoreflect.ValueOfUint64(1<<40).MapKey(), protoreflect.ValueOfBool(true))
			r.Mutable(r.Descriptor().Fields().ByName("by_flag")).Map().Set(protoreflect.ValueOfBool(true).MapKey(), protoreflect.ValueOfInt32(1))
		})
		var row Row
		err = m.Map(&Record{Value: rec}, &row)
		if me, ok := errors.AsType[*MapError](err); !ok || me.Reason != tc.want {
			t.Errorf("%s of %s: %v, want a dead letter %q", tc.typ, tc.src, err, tc.want)
		}
	}
}

func TestMapProtobufNestedDoesNotAllocate(t *testing.T) {
	m, err := New(Config{Format: Protobuf, SchemaFile: tripProto, Message: "shop.Trip"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Record{Value: plainProto(t, m, func(r protoreflect.Message) {
		set(r, "id", "t1")
		set(r, "loc", func(l protoreflect.Message) { set(l, "lat", 1.5) })
		set(r, "tags", []string{"a", "b"})
		attrs := r.Mutable(r.Descriptor().Fields().ByName("attrs")).Map()
		attrs.Set(protoreflect.ValueOfString("k").MapKey(), protoreflect.ValueOfInt64(5))
		byCode := r.Mutable(r.Descriptor().Fields().ByName("by_code")).Map()
		byCode.Set(protoreflect.ValueOfInt32(42).MapKey(), protoreflect.ValueOfString("x"))
		byFlag := r.Mutable(r.Descriptor().Fields().ByName("by_flag")).Map()
		byFlag.Set(protoreflect.ValueOfBool(false).MapKey(), protoreflect.ValueOfInt32(1))
	})}
	var row Row
	row.Arena = new(Arena)
	if allocs := testing.AllocsPerRun(200, func() {
		if err := m.Map(rec, &row); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("%.1f allocations per record, want 0", allocs)
	}
}

// FuzzMapProtobufNested: hostile bodies of shop.Trip are rows or dead
// letters, never a panic: the nested walk reads sub-messages' bytes the
// top-level walk never parsed.
func FuzzMapProtobufNested(f *testing.F) {
	m, err := New(Config{Format: Protobuf, SchemaFile: tripProto, Message: "shop.Trip"}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(plainProto(f, m, func(r protoreflect.Message) {
		set(r, "loc", func(l protoreflect.Message) { set(l, "lat", 1.5) })
		set(r, "tags", []string{"a"})
		counts := r.Mutable(r.Descriptor().Fields().ByName("counts")).List()
		counts.Append(protoreflect.ValueOfInt64(-1))
		byName := r.Mutable(r.Descriptor().Fields().ByName("by_name")).Map()
		byName.Set(protoreflect.ValueOfString("x").MapKey(), byName.NewValue())
	}))
	f.Fuzz(func(t *testing.T, value []byte) {
		var row Row
		if err := m.Map(&Record{Value: value}, &row); err != nil {
			if _, ok := errors.AsType[*MapError](err); !ok {
				t.Fatalf("error %v is not a MapError", err)
			}
			return
		}
		for _, v := range slices.Concat(row.Values[1:7], row.Values[8:]) {
			leafText(t, v)
		}
	})
}

func BenchmarkMapProtobufNested(b *testing.B) {
	m, err := New(Config{Format: Protobuf, SchemaFile: tripProto, Message: "shop.Trip"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	rec := &Record{Value: plainProto(b, m, func(r protoreflect.Message) {
		set(r, "id", "t1")
		set(r, "loc", func(l protoreflect.Message) { set(l, "lat", 1.5) })
		set(r, "tags", []string{"kitchen", "metered", "eu"})
		counts := r.Mutable(r.Descriptor().Fields().ByName("counts")).List()
		for _, n := range []int64{1200, 1180, 1210} {
			counts.Append(protoreflect.ValueOfInt64(n))
		}
		attrs := r.Mutable(r.Descriptor().Fields().ByName("attrs")).Map()
		attrs.Set(protoreflect.ValueOfString("fw").MapKey(), protoreflect.ValueOfInt64(1042))
	})}
	benchMap(b, m, []*Record{rec})
}

// A field added inside a nested message by a later writer schema evolves
// the struct column: the first record of it is a SchemaChangeError with
// the column's type holding the field, and the evolved Mapper maps it and
// the older version's records (null in the new field); one that widens a
// field inside (int32 → int64) is a dead letter naming it and both types.
func TestMapRegistryProtobufNestedFieldAdded(t *testing.T) {
	// withInner is readingProto with fields added to t.Located.Inner.
	withInner := func(extra ...*descriptorpb.FieldDescriptorProto) string {
		b, err := base64.StdEncoding.DecodeString(readingProto(t))
		var set descriptorpb.FileDescriptorSet
		if err == nil {
			err = proto.Unmarshal(b, &set)
		}
		if err != nil {
			t.Fatal(err)
		}
		inner := set.File[0].MessageType[1].NestedType[0]
		inner.Field = append(inner.Field, extra...)
		if b, err = proto.Marshal(&set); err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	v1 := withInner(sim.ProtoField("floor", 2, descriptorpb.FieldDescriptorProto_TYPE_INT32, ""))
	v2 := withInner(sim.ProtoField("floor", 2, descriptorpb.FieldDescriptorProto_TYPE_INT32, ""),
		sim.ProtoField("alt", 3, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""))
	v3 := withInner(sim.ProtoField("floor", 2, descriptorpb.FieldDescriptorProto_TYPE_INT64, ""))
	schemas := &schemaMap{format: Protobuf, schemas: map[int]string{1: v1, 2: v2, 3: v3}}
	located := func(schema string, id int, alt string) []byte {
		return encodeProto(t, schema, id, 1, func(r *dynamicpb.Message, f protoreflect.FieldDescriptors) {
			setMsg(r, f, "id", protoreflect.ValueOfString("l1"))
			inner := r.NewField(f.ByName("loc")).Message()
			inner.Set(inner.Descriptor().Fields().ByName("lat"), protoreflect.ValueOfFloat64(52.5))
			if alt != "" {
				inner.Set(inner.Descriptor().Fields().ByName("alt"), protoreflect.ValueOfString(alt))
			}
			r.Set(f.ByName("loc"), protoreflect.ValueOfMessage(inner))
		})
	}
	m, err := New(Config{Format: Protobuf, Registry: schemas, Schema: v1, Message: "t.Located", Evolve: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	err = m.Map(&Record{Value: located(v2, 2, "high")}, &row)
	change, ok := errors.AsType[*SchemaChangeError](err)
	if !ok || len(change.Add) != 1 || change.Add[0].Name != "loc" || change.Add[0].Type != "struct<lat: double, floor: integer, alt: string>" {
		t.Fatalf("a field added inside loc: %v, want a SchemaChangeError giving loc struct<lat: double, floor: integer, alt: string>", err)
	}
	evolved, err := m.Evolved(change.Add)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rec  []byte
		want string
	}{{located(v2, 2, "high"), `0:r0d2=52.5 1:r0d2=0 2:r0d2="high"`}, {located(v1, 1, ""), `0:r0d2=52.5 1:r0d2=0 2:r0d1`}} {
		if err := evolved.Map(&Record{Value: c.rec}, &row); err != nil {
			t.Fatal(err)
		}
		if got := leafText(t, row.Values[1]); got != c.want {
			t.Errorf("loc %s, want %s", got, c.want)
		}
	}
	err = evolved.Map(&Record{Value: wire(3, []byte{0})}, &row)
	if me, ok := errors.AsType[*MapError](err); !ok || !strings.Contains(me.Reason, "field loc.floor: the writer schema's long is wider than the table's integer field loc.floor of column loc") {
		t.Errorf("a field widened inside loc: %v, want a dead letter naming loc.floor", err)
	}
}
