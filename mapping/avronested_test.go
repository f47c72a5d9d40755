package mapping

import (
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta"
)

// nestedAvroSchema has a record in a record, an array of records, a map
// of arrays, bytes, fixed and a general union.
const nestedAvroSchema = `{"type": "record", "name": "Event", "namespace": "deltaflow.test", "fields": [
	{"name": "id", "type": "string"},
	{"name": "loc", "type": ["null", {"type": "record", "name": "Loc", "fields": [
		{"name": "lat", "type": "double"},
		{"name": "lon", "type": ["null", "double"], "default": null},
		{"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [{"name": "floor", "type": "int"}]}}]}], "default": null},
	{"name": "readings", "type": {"type": "array", "items": {"type": "record", "name": "Reading", "fields": [
		{"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
		{"name": "v", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}}]}}},
	{"name": "series", "type": {"type": "map", "values": {"type": "array", "items": "long"}}},
	{"name": "blob", "type": "bytes"},
	{"name": "hash", "type": {"type": "fixed", "name": "H4", "size": 4}},
	{"name": "either", "type": ["null", "int", "string"], "default": null},
	{"name": "wide", "type": ["int", "long"]}
]}`

func nestedAvroEvent(over map[string]any) map[string]any {
	rec := map[string]any{"id": "e1",
		"loc":      map[string]any{"lat": 47.5, "lon": nil, "inner": map[string]any{"floor": int32(3)}},
		"readings": []any{map[string]any{"at": time.UnixMilli(1), "v": big.NewRat(125, 100)}, map[string]any{"at": time.UnixMilli(2), "v": big.NewRat(-3, 1)}},
		"series":   map[string]any{"s": []int64{1, 2}},
		"blob":     []byte{0, 1, 2}, "hash": []byte("abcd"), "either": int32(5), "wide": int32(7)}
	for k, v := range over {
		rec[k] = v
	}
	return rec
}

func TestAvroNestedColumns(t *testing.T) {
	m, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, nestedAvroSchema)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range m.Schema().Fields {
		got = append(got, f.Name+" "+typeDDL(f.Type)+map[bool]string{true: " null", false: ""}[f.Nullable])
	}
	want := []string{"id string", "loc struct<lat: double, lon: double, inner: struct<floor: integer>> null",
		"readings array<struct<at: timestamp, v: decimal(5,2)>>", "series map<string, array<long>>", "blob binary", "hash binary",
		"either struct<member0: integer, member1: string> null", "wide long"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("columns\n got %s\nwant %s", strings.Join(got, ", "), strings.Join(want, ", "))
	}
}

func TestMapAvroNested(t *testing.T) {
	m, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, nestedAvroSchema)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Leaves: loc 0 lat, 1 lon, 2 inner.floor; readings 0 at, 1 v;
	// series 0 key, 1 element; either 0 member0, 1 member1.
	for _, tc := range []struct {
		name                          string
		over                          map[string]any
		loc, readings, series, either string
	}{
		{"all present", nil, `0:r0d2=47.5 1:r0d1 2:r0d3=3`, `0:r0d3=1000 0:r1d3=2000 1:r0d3=125 1:r1d3=-300`,
			`0:r0d1="s" 1:r0d4=1 1:r2d4=2`, `0:r0d2=5 1:r0d1`},
		{"nulls and empties", map[string]any{"loc": nil, "readings": []any{}, "series": map[string]any{}, "either": nil},
			"null", `0:r0d0 1:r0d0`, `0:r0d0 1:r0d0`, "null"},
		{"empty inside", map[string]any{"loc": map[string]any{"lat": -1.0, "lon": 2.0, "inner": map[string]any{"floor": int32(-2)}},
			"series": map[string]any{"e": []int64{}}, "either": "x"},
			`0:r0d2=-1 1:r0d2=2 2:r0d3=-2`, `0:r0d3=1000 0:r1d3=2000 1:r0d3=125 1:r1d3=-300`, `0:r0d1="e" 1:r0d2`, `0:r0d1 1:r0d2="x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var row Row
			if err := m.Map(&Record{Value: encodeAvro(t, nestedAvroSchema, nestedAvroEvent(tc.over))}, &row); err != nil {
				t.Fatal(err)
			}
			if len(row.Values) != 8 {
				t.Fatalf("%d values, want one per column", len(row.Values))
			}
			for i, want := range map[int]string{1: tc.loc, 2: tc.readings, 3: tc.series, 6: tc.either} {
				if got := leafText(t, row.Values[i]); got != want {
					t.Errorf("column %s: %s\nwant %s", m.p.cols[i].Name, got, want)
				}
			}
			checkValues(t, []parquet.Value{row.Values[4], row.Values[5], row.Values[7]},
				[]parquet.Value{parquet.ByteArrayValue([]byte{0, 1, 2}), parquet.ByteArrayValue([]byte("abcd")), parquet.Int64Value(7)})
		})
	}
}

// Columns a route declares over Avro nested values: fields the writer
// lacks are null, those the column lacks skipped, scalars cast as a
// column's; a value of another shape is a dead letter naming the path.
func TestMapAvroNestedDeclared(t *testing.T) {
	cols := []Column{{Name: "id", Type: "string"},
		{Name: "place", Type: "struct<extra: string, lat: double, inner: struct<floor: long>>", Source: "loc"},
		{Name: "last", Type: "array<struct<v: decimal(10,4)>>", Source: "readings"},
		{Name: "power", Type: "array<long>", Source: "series.s"},
		{Name: "either", Type: "struct<member1: string>"}}
	m, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, nestedAvroSchema), Columns: cols}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	if err := m.Map(&Record{Value: encodeAvro(t, nestedAvroSchema, nestedAvroEvent(map[string]any{"either": "y"}))}, &row); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{`0:r0d1 1:r0d2=47.5 2:r0d3=3`, `0:r0d4=12500 0:r1d4=-30000`, `0:r0d3=1 0:r1d3=2`, `0:r0d2="y"`} {
		if got := leafText(t, row.Values[i+1]); got != want {
			t.Errorf("column %s: %s\nwant %s", cols[i+1].Name, got, want)
		}
	}
	if err := m.Map(&Record{Value: encodeAvro(t, nestedAvroSchema, nestedAvroEvent(nil))}, &row); err != nil {
		t.Fatal(err)
	}
	if got := leafText(t, row.Values[4]); got != `0:r0d1` {
		t.Errorf("either of the member the column leaves out: %s, want the struct with a null member", got)
	}

	for typ, want := range map[string]string{
		"array<double>":                              "bad: expected array, got record",
		"struct<lat: string>":                        "bad: field lat: expected string, got double",
		"struct<inner: struct<floor: boolean>>":      "bad: field inner: field floor: expected boolean, got int",
		"struct<inner: struct<floor: decimal(2,2)>>": "bad: field inner: field floor: decimal(2,2) overflow",
	} {
		cfg := Config{Format: Avro, SchemaFile: schemaFile(t, nestedAvroSchema), Columns: []Column{{Name: "id", Type: "string"},
			{Name: "bad", Type: typ, Source: "loc"}}}
		m, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = m.Map(&Record{Value: encodeAvro(t, nestedAvroSchema, nestedAvroEvent(nil))}, &row)
		if me, ok := errors.AsType[*MapError](err); !ok || me.Reason != want || me.Column != "bad" {
			t.Errorf("%s: %v, want a dead letter %q", typ, err, want)
		}
	}
}

// A field added inside a nested column by a later writer schema (in a
// record, an array's records, a map's records) evolves the column: the
// first record of it is a SchemaChangeError giving the column's struct
// type with the new fields, and the evolved Mapper maps it and the older
// version's records, null in the new fields. A field inside that widens
// (int → long) or turns a timestamp into a local date-time is a dead
// letter naming it and both types, with evolution or without; without
// evolution, a record with a new field is read, the field left out.
func TestMapRegistryAvroNestedFieldAdded(t *testing.T) {
	const (
		v1 = `{"type":"record","name":"R","fields":[{"name":"id","type":"string"},
			{"name":"loc","type":{"type":"record","name":"Loc","fields":[{"name":"lat","type":"double"},{"name":"floor","type":"int"}]}},
			{"name":"readings","type":{"type":"array","items":{"type":"record","name":"Rd","fields":[{"name":"v","type":"double"}]}}},
			{"name":"attrs","type":{"type":"map","values":{"type":"record","name":"At","fields":[{"name":"x","type":"long"}]}}}]}`
		// v2 adds loc.alt, readings.element.unit and attrs.value.y.
		v2 = `{"type":"record","name":"R","fields":[{"name":"id","type":"string"},
			{"name":"loc","type":{"type":"record","name":"Loc","fields":[{"name":"lat","type":"double"},{"name":"floor","type":"int"},
				{"name":"alt","type":"int"}]}},
			{"name":"readings","type":{"type":"array","items":{"type":"record","name":"Rd","fields":[{"name":"v","type":"double"},
				{"name":"unit","type":"string"}]}}},
			{"name":"attrs","type":{"type":"map","values":{"type":"record","name":"At","fields":[{"name":"x","type":"long"},
				{"name":"y","type":["null","string"]}]}}}]}`
		// v3 widens loc.floor; v5 makes v4's readings.element.at a local date-time.
		v3 = `{"type":"record","name":"R","fields":[{"name":"id","type":"string"},
			{"name":"loc","type":{"type":"record","name":"Loc","fields":[{"name":"lat","type":"double"},{"name":"floor","type":"long"}]}}]}`
		v4 = `{"type":"record","name":"R","fields":[{"name":"readings","type":{"type":"array","items":{"type":"record","name":"Rd","fields":[
			{"name":"at","type":{"type":"long","logicalType":"timestamp-micros"}}]}}}]}`
		v5 = `{"type":"record","name":"R","fields":[{"name":"readings","type":{"type":"array","items":{"type":"record","name":"Rd","fields":[
			{"name":"at","type":{"type":"long","logicalType":"local-timestamp-micros"}}]}}}]}`
	)
	schemas := &schemaMap{schemas: map[int]string{1: v1, 2: v2, 3: v3, 4: v4, 5: v5}}
	m, err := New(Config{Format: Avro, Registry: schemas, Schema: v1, Evolve: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	rec1 := wire(1, encodeAvro(t, v1, map[string]any{"id": "a", "loc": map[string]any{"lat": 1.5, "floor": int32(2)},
		"readings": []any{map[string]any{"v": 0.5}}, "attrs": map[string]any{"k": map[string]any{"x": int64(9)}}}))
	rec2 := wire(2, encodeAvro(t, v2, map[string]any{"id": "b", "loc": map[string]any{"lat": 2.5, "floor": int32(3), "alt": int32(400)},
		"readings": []any{map[string]any{"v": 0.25, "unit": "kW"}}, "attrs": map[string]any{"k": map[string]any{"x": int64(8), "y": "z"}}}))
	if err := m.Map(&Record{Value: rec1}, &row); err != nil {
		t.Fatal(err)
	}
	if got := leafText(t, row.Values[1]); got != `0:r0d2=1.5 1:r0d2=2` {
		t.Errorf("loc %s", got)
	}
	err = m.Map(&Record{Value: rec2}, &row)
	change, ok := errors.AsType[*SchemaChangeError](err)
	want := map[string]string{"loc": "struct<lat: double, floor: integer, alt: integer>",
		"readings": "array<struct<v: double, unit: string>>", "attrs": "map<string, struct<x: long, y: string>>"}
	if !ok || change.ID != 2 || len(change.Add) != len(want) {
		t.Fatalf("fields added inside loc, readings and attrs: %v, want a SchemaChangeError changing those columns", err)
	}
	for _, c := range change.Add {
		if want[c.Name] != c.Type || !c.IsNullable() || c.Origin != "schema id 2" {
			t.Errorf("column %s %s (nullable %v, origin %q), want type %s, nullable, from schema id 2", c.Name, c.Type, c.IsNullable(), c.Origin, want[c.Name])
		}
	}
	evolved, err := m.Evolved(change.Add)
	if err != nil {
		t.Fatal(err)
	}
	if got := evolved.Schema().Fields; len(got) != 4 || got[1].Type.(*delta.StructType).Fields[2].Name != "alt" || !got[1].Type.(*delta.StructType).Fields[2].Nullable {
		t.Fatalf("evolved columns %v, want id, loc with alt (nullable), readings, attrs", got)
	}
	for _, c := range []struct {
		rec                  []byte
		loc, readings, attrs string
	}{
		{rec2, `0:r0d2=2.5 1:r0d2=3 2:r0d2=400`, `0:r0d4=0.25 1:r0d4="kW"`, `0:r0d2="k" 1:r0d4=8 2:r0d4="z"`},
		{rec1, `0:r0d2=1.5 1:r0d2=2 2:r0d1`, `0:r0d4=0.5 1:r0d3`, `0:r0d2="k" 1:r0d4=9 2:r0d3`}, // null in the new fields
	} {
		if err := evolved.Map(&Record{Value: c.rec}, &row); err != nil {
			t.Fatal(err)
		}
		for i, want := range []string{c.loc, c.readings, c.attrs} {
			if got := leafText(t, row.Values[i+1]); got != want {
				t.Errorf("%s = %s, want %s", evolved.Schema().Fields[i+1].Name, got, want)
			}
		}
	}

	fixed, err := New(Config{Format: Avro, Registry: schemas, Schema: v1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fixed.Map(&Record{Value: rec2}, &row); err != nil {
		t.Fatalf("without Evolve: %v", err)
	}
	if got := leafText(t, row.Values[1]); got != `0:r0d2=2.5 1:r0d2=3` {
		t.Errorf("loc without Evolve: %s, want the new field left out", got)
	}

	// The dead letters are the writer schema's: no body is read.
	local, err := New(Config{Format: Avro, Registry: schemas, Schema: v4, Evolve: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ms   []*Mapper
		id   int
		want string
	}{
		{[]*Mapper{evolved, fixed}, 3, "schema id 3: field loc.floor: the writer schema's long is wider than the table's integer field loc.floor of column loc: " +
			"deltaflow does not widen a field inside a struct, array or map (Delta's writer widens none)"},
		{[]*Mapper{local}, 5, "schema id 5: field readings.element.at: the writer schema's timestamp_ntz is not the table's timestamp " +
			"field readings.element.at of column readings (one is an instant, the other a local date-time)"},
	} {
		for _, m := range c.ms {
			err := m.Map(&Record{Value: wire(c.id, nil)}, &row)
			if me, ok := errors.AsType[*MapError](err); !ok || me.Reason != c.want {
				t.Errorf("schema id %d: %v, want a dead letter %q", c.id, err, c.want)
			}
		}
	}
}

func TestMapAvroNestedDoesNotAllocate(t *testing.T) {
	m, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, nestedAvroSchema)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Record{Value: encodeAvro(t, nestedAvroSchema, nestedAvroEvent(map[string]any{"series": map[string]any{"s": []int64{1, 2}, "t": []int64{3}}}))}
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

func BenchmarkMapAvroNested(b *testing.B) {
	m, err := New(Config{Format: Avro, SchemaFile: schemaFile(b, nestedAvroSchema)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	rec := &Record{Value: encodeAvro(b, nestedAvroSchema, nestedAvroEvent(map[string]any{"series": map[string]any{"s": []int64{1, 2}, "t": []int64{3}}}))}
	benchMap(b, m, []*Record{rec})
}

// A struct column declared over a recursive record reads it as deep as
// the column's type goes: the levels below are skipped.
func TestMapAvroNestedRecursive(t *testing.T) {
	const schema = `{"type": "record", "name": "R", "fields": [{"name": "tree", "type": {"type": "record", "name": "Node", "fields": [
		{"name": "label", "type": "string"}, {"name": "children", "type": {"type": "array", "items": "Node"}}]}}]}`
	cols := []Column{{Name: "tree", Type: "struct<label: string, children: array<struct<label: string>>>"}}
	m, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, schema), Columns: cols}, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(label string, children ...any) map[string]any {
		return map[string]any{"label": label, "children": children}
	}
	var row Row
	rec := map[string]any{"tree": leaf("root", leaf("a", leaf("deep")), leaf("b"))}
	if err := m.Map(&Record{Value: encodeAvro(t, schema, rec)}, &row); err != nil {
		t.Fatal(err)
	}
	if got, want := leafText(t, row.Values[0]), `0:r0d2="root" 1:r0d5="a" 1:r1d5="b"`; got != want {
		t.Errorf("tree %s, want %s", got, want)
	}
}

// FuzzMapAvroNested: hostile bodies of nestedAvroSchema (truncated, huge
// counts, bad branches) are dead letters, never a panic, for derived
// columns and for declared ones that skip and reshape.
func FuzzMapAvroNested(f *testing.F) {
	derived, err := New(Config{Format: Avro, SchemaFile: schemaFile(f, nestedAvroSchema)}, nil)
	if err != nil {
		f.Fatal(err)
	}
	declared, err := New(Config{Format: Avro, SchemaFile: schemaFile(f, nestedAvroSchema), Columns: []Column{{Name: "id", Type: "string"},
		{Name: "place", Type: "struct<lat: double, inner: struct<floor: long>>", Source: "loc"},
		{Name: "v", Type: "array<struct<v: decimal(4,1)>>", Source: "readings"}, {Name: "s", Type: "array<long>", Source: "series.s"},
		{Name: "either", Type: "struct<member1: string>"}}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(encodeAvro(f, nestedAvroSchema, nestedAvroEvent(nil)), false)
	f.Add(encodeAvro(f, nestedAvroSchema, nestedAvroEvent(map[string]any{"loc": nil, "either": "x", "series": map[string]any{"s": []int64{}}})), true)
	f.Fuzz(func(t *testing.T, value []byte, useDeclared bool) {
		m := derived
		if useDeclared {
			m = declared
		}
		var row Row
		if err := m.Map(&Record{Value: value}, &row); err != nil {
			if _, ok := errors.AsType[*MapError](err); !ok {
				t.Fatalf("error %v is not a MapError", err)
			}
		}
	})
}

// A later writer schema's new top-level record or array field is a new
// struct or array column, added as scalar ones are; the evolved Mapper
// maps it.
func TestMapRegistryAvroNestedColumnAdded(t *testing.T) {
	const (
		v1 = `{"type":"record","name":"R","fields":[{"name":"id","type":"string"}]}`
		v2 = `{"type":"record","name":"R","fields":[{"name":"id","type":"string"},
			{"name":"loc","type":["null",{"type":"record","name":"Loc","fields":[{"name":"lat","type":"double"}]}],"default":null},
			{"name":"tags","type":{"type":"array","items":"string"},"default":[]}]}`
	)
	schemas := &schemaMap{schemas: map[int]string{1: v1, 2: v2}}
	m, err := New(Config{Format: Avro, Registry: schemas, Schema: v1, Evolve: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := wire(2, encodeAvro(t, v2, map[string]any{"id": "a", "loc": map[string]any{"lat": 1.5}, "tags": []string{"x"}}))
	var row Row
	change, ok := errors.AsType[*SchemaChangeError](m.Map(&Record{Value: rec}, &row))
	if !ok || len(change.Add) != 2 || change.Add[0].Type != "struct<lat: double>" || change.Add[1].Type != "array<string>" {
		t.Fatalf("a schema with a record and an array field: %v, want a SchemaChangeError adding loc and tags", change)
	}
	evolved, err := m.Evolved(change.Add)
	if err != nil {
		t.Fatal(err)
	}
	if err := evolved.Map(&Record{Value: rec}, &row); err != nil {
		t.Fatal(err)
	}
	if loc, tags := leafText(t, row.Values[1]), leafText(t, row.Values[2]); loc != `0:r0d2=1.5` || tags != `0:r0d3="x"` {
		t.Errorf("loc %s, tags %s", loc, tags)
	}
}
