package formats

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/storage"
)

// tripSchema is an Avro record with a nullable record holding a record, an
// array of records holding an array, maps of nullable longs and of
// arrays, bytes and a nullable fixed.
func tripSchema(t *testing.T) string {
	return filepath.Join(scenario.RepoRoot(t), "internal", "tests", "formats", "testdata", "trip.avsc")
}

// tripTypes are trip.avsc's columns as delta-rs reads them (nested types
// as nestedDDL renders them): all nullable, made of a registry's schema.
var tripTypes = map[string]string{"id": "string null",
	"loc":      "struct<lat: double null, lon: double null, inner: struct<floor: integer null, since: date null> null> null",
	"readings": "array<struct<at: timestamp null, v: decimal(9,2) null, tags: array<string null> null> null> null",
	"attrs":    "map<string, long null> null", "series": "map<string, array<long null> null> null",
	"blob": "binary null", "hash": "binary null"}

// TestRegistryAvroNestedTopic: a topic confluent-kafka's AvroSerializer
// wrote through a schema registry, of records with a nested record, an
// array of records, maps and bytes (trip.avsc), read with `format: avro`
// and no columns: the columns are struct, array, map and binary columns as
// Spark's from_avro types them, and delta-rs and DuckDB read exactly the
// values produced (nulls, empty arrays and maps among them); records
// without the registry's header are dead letters. Spark reads the same
// table in TestAvroTypesMatchFromAvro's JVM (sparkReadTopics).
func TestRegistryAvroNestedTopic(t *testing.T) {
	r := newRegistryTopic(t, "registry-trips", "avro")
	rows := r.produce("avroproduce.py", 7, registryBad, "--schema", tripSchema(t))
	r.firstRun(rows, maps.Clone(tripTypes), "mapping: not in the schema registry's wire format: magic byte 255, want 0 (a schema registry header)")
}

// avroNestedEvolution: a registry topic of trip.avsc's records (v1), then
// of a v2 that adds a field inside the nested record loc (alt) and one
// inside readings' records (unit), and of a v3 that widens
// loc.inner.floor (int → long), all written by confluent-kafka's
// AvroSerializer. The first run makes the table of v1; the second,
// started while the registry is down (the KV's v1 stands in for the
// latest version), meets v2 mid-stream and adds the two fields (the old
// rows null in them), and v3's records are dead letters naming
// loc.inner.floor and both types. delta-rs and DuckDB read exactly the
// rows produced after each run; it returns the topic, its table local
// (Spark reads it in TestAvroTypesMatchFromAvro's JVM), with the rows
// Spark must find.
func avroNestedEvolution(t *testing.T) *registryTopic {
	t.Helper()
	r := newRegistryTopic(t, "oracle-trips-evolved", "avro")
	r.uri = filepath.Join(t.TempDir(), "avro_evolved")
	dir := t.TempDir()
	// editRecord edits the fields of the record named name in the Avro
	// schema at from.
	editRecord := func(from, to, name string, edit func(fields []any) []any) string {
		return editJSON(t, from, filepath.Join(dir, to), func(schema map[string]any) {
			var walk func(v any)
			walk = func(v any) {
				switch v := v.(type) {
				case map[string]any:
					if v["name"] == name && v["type"] == "record" {
						v["fields"] = edit(v["fields"].([]any))
					}
					for _, x := range v {
						walk(x)
					}
				case []any:
					for _, x := range v {
						walk(x)
					}
				}
			}
			walk(schema)
		})
	}
	nullable := func(name, typ string) map[string]any {
		return map[string]any{"name": name, "type": []any{"null", typ}, "default": nil}
	}
	v2 := editRecord(tripSchema(t), "trip-v2-loc.avsc", "Loc", func(f []any) []any { return append(f, nullable("alt", "int")) })
	v2 = editRecord(v2, "trip-v2.avsc", "Reading", func(f []any) []any { return append(f, nullable("unit", "string")) })
	v3 := editRecord(v2, "trip-v3.avsc", "Inner", func(fields []any) []any {
		for _, f := range fields {
			if f := f.(map[string]any); f["name"] == "floor" {
				f["type"] = "long"
			}
		}
		return fields
	})
	produce := func(schema string, seed, bad int) []map[string]any {
		return r.produce("avroproduce.py", seed, bad, "--schema", schema)
	}
	r.firstRun(produce(tripSchema(t), 7, registryBad), maps.Clone(tripTypes),
		"mapping: not in the schema registry's wire format: magic byte 255, want 0 (a schema registry header)")

	rows := avroRows(t, v2, produce(v2, 8, 0))
	produce(v3, 9, 0)                // all dead letters
	r.want = avroRows(t, v2, r.want) // null in the new fields
	types := maps.Clone(tripTypes)
	types["loc"] = "struct<lat: double null, lon: double null, inner: struct<floor: integer null, since: date null> null, alt: integer null> null"
	types["readings"] = "array<struct<at: timestamp null, v: decimal(9,2) null, tags: array<string null> null, unit: string null> null> null"
	r.evolveWhileDown(rows, types, "loc")
	widened := regexp.MustCompile(`^mapping: schema id \d+: field loc\.inner\.floor: the writer schema's long is wider than the table's integer ` +
		`field loc\.inner\.floor of column loc: deltaflow does not widen a field inside a struct, array or map`)
	n := 0
	for _, l := range r.deadLetters() {
		if widened.MatchString(l) {
			n++
		}
	}
	if n != registryCount {
		t.Errorf("%d dead letters name loc.inner.floor's widening, want v3's %d: %q", n, registryCount, r.deadLetters())
	}
	r.want = sparkRows(t, r.uri, r.want)
	return r
}

// TestRegistryJSONSchemaNestedTopic: a topic confluent-kafka's
// JSONSerializer wrote through a schema registry, of objects holding an
// object (holding a $ref'd object) and an array of objects holding an
// array (trip.schema.json), read with `format: json_schema` and no
// columns: the columns are struct and array columns, and delta-rs and
// DuckDB read exactly the values produced; records the schema refuses are
// dead letters. Spark reads such a table in TestAvroTypesMatchFromAvro's
// JVM (sparkReadTopics).
func TestRegistryJSONSchemaNestedTopic(t *testing.T) {
	r := newRegistryTopic(t, "registry-trips-json", "json_schema")
	rows := r.produce("jsonschemaproduce.py", 7, registryBad, "--schema", tripJSONSchema(t))
	types := map[string]string{"id": "string null", "count": "long null",
		"loc":      "struct<lat: double null, at: timestamp null, inner: struct<floor: long null> null> null",
		"readings": "array<struct<v: double null, day: date null, tags: array<string null> null> null> null"}
	r.firstRun(rows, types, "mapping: the writer schema refuses the record: at '/count': got string, want integer")
}

// tripJSONSchema is a JSON Schema of objects holding an object (holding a
// $ref'd object) and an array of objects holding an array.
func tripJSONSchema(t *testing.T) string {
	return filepath.Join(scenario.RepoRoot(t), "internal", "tests", "formats", "testdata", "trip.schema.json")
}

// nestedDDL renders a Delta schema's nested type (its JSON) as
// struct<name: type[ null], …>, array<type[ null]>, map<key, value[ null]>.
func nestedDDL(t any) string {
	m, ok := t.(map[string]any)
	if !ok {
		s, _ := t.(string)
		return s
	}
	null := func(b any) string {
		if b == true {
			return " null"
		}
		return ""
	}
	switch m["type"] {
	case "struct":
		var fields []string
		for _, f := range m["fields"].([]any) {
			f := f.(map[string]any)
			fields = append(fields, f["name"].(string)+": "+nestedDDL(f["type"])+null(f["nullable"]))
		}
		return "struct<" + strings.Join(fields, ", ") + ">"
	case "array":
		return "array<" + nestedDDL(m["elementType"]) + null(m["containsNull"]) + ">"
	case "map":
		return "map<" + nestedDDL(m["keyType"]) + ", " + nestedDDL(m["valueType"]) + null(m["valueContainsNull"]) + ">"
	}
	b, _ := json.Marshal(t)
	return string(b)
}

// sparkTripTypes are tripTypes as Spark's simpleString writes them.
var sparkTripTypes = map[string]string{"id": "string", "loc": "struct<lat:double,lon:double,inner:struct<floor:int,since:date>>",
	"readings": "array<struct<at:timestamp,v:decimal(9,2),tags:array<string>>>", "attrs": "map<string,bigint>",
	"series": "map<string,array<bigint>>", "blob": "binary", "hash": "binary"}

// sparkNestedTypes are the nested columns of sparkReadTopics' tables as
// Spark's simpleString writes them, by table.
var sparkNestedTypes = map[string]map[string]string{
	"avro_nested": sparkTripTypes,
	"avro_evolved": func() map[string]string { // avroNestedEvolution's v2
		types := maps.Clone(sparkTripTypes)
		types["loc"] = "struct<lat:double,lon:double,inner:struct<floor:int,since:date>,alt:int>"
		types["readings"] = "array<struct<at:timestamp,v:decimal(9,2),tags:array<string>,unit:string>>"
		return types
	}(),
	"json_schema_nested": {"id": "string", "count": "bigint", "loc": "struct<lat:double,at:timestamp,inner:struct<floor:bigint>>",
		"readings": "array<struct<v:double,day:date,tags:array<string>>>"},
	"proto_file": {"id": "string", "status": "string", "placed": "timestamp", "total_currency": "string", "total_units": "bigint",
		"email": "string", "phone": "bigint", "line_sku": "string", "line_qty": "int", "tags": "array<string>",
		"line": "struct<sku:string,qty:int>"},
	"proto_map_keys": {"id": "string", "by_code": "map<int,string>"},
}

// sparkRows are rows as delta-rs reads them (a struct as an object, a
// map as its entries or an object) as pyspark's rows render (rowjson): a
// struct as the list of its fields' values, in the order of the local
// table at uri's schema, a map as an object.
func sparkRows(t *testing.T, uri string, rows []map[string]any) []map[string]any {
	t.Helper()
	store, err := storage.NewLocal(uri)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := delta.NewTable(store).Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	schema, err := snap.Schema()
	if err != nil {
		t.Fatal(err)
	}
	var conv func(typ delta.DataType, v any) any
	conv = func(typ delta.DataType, v any) any {
		if v == nil {
			return nil
		}
		switch ty := typ.(type) {
		case *delta.StructType:
			obj := v.(map[string]any)
			list := make([]any, len(ty.Fields))
			for i, f := range ty.Fields {
				list[i] = conv(f.Type, obj[f.Name])
			}
			return list
		case *delta.ArrayType:
			list := []any{}
			for _, e := range v.([]any) {
				list = append(list, conv(ty.ElementType, e))
			}
			return list
		case *delta.MapType:
			obj := map[string]any{}
			if entries, ok := v.([]any); ok {
				for _, e := range entries {
					e := e.([]any)
					obj[fmt.Sprint(e[0])] = conv(ty.ValueType, e[1])
				}
				return obj
			}
			for k, x := range v.(map[string]any) {
				obj[k] = conv(ty.ValueType, x)
			}
			return obj
		}
		return v
	}
	out := make([]map[string]any, len(rows))
	for i, row := range rows {
		out[i] = map[string]any{}
		for _, f := range schema.Fields {
			out[i][f.Name] = conv(f.Type, row[f.Name])
		}
	}
	return out
}

// avroRows are rows avroproduce.py printed (a record as an object, a map
// as its entries), written with schema file schema or an earlier version
// of it, as the table of schema holds them: a field their writer schema
// lacked (in a nested record too) is null.
func avroRows(t *testing.T, schema string, rows []map[string]any) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(schema)
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	named := map[string]any{}
	var conv func(typ, v any) any
	conv = func(typ, v any) any {
		if v == nil {
			return nil
		}
		switch ty := typ.(type) {
		case string:
			if n, ok := named[ty]; ok {
				return conv(n, v)
			}
			return v
		case []any: // a union of null and one type
			for _, b := range ty {
				if b != "null" {
					return conv(b, v)
				}
			}
		case map[string]any:
			if name, ok := ty["name"].(string); ok {
				named[name] = ty
			}
			switch ty["type"] {
			case "record":
				rec := v.(map[string]any)
				obj := map[string]any{}
				for _, f := range ty["fields"].([]any) {
					f := f.(map[string]any)
					name := f["name"].(string)
					obj[name] = conv(f["type"], rec[name])
				}
				return obj
			case "array":
				var out []any
				for _, item := range v.([]any) {
					out = append(out, conv(ty["items"], item))
				}
				if out == nil {
					out = []any{}
				}
				return out
			case "map":
				entries := []any{}
				for _, e := range v.([]any) {
					e := e.([]any)
					entries = append(entries, []any{e[0], conv(ty["values"], e[1])})
				}
				return entries
			}
		}
		return v
	}
	out := make([]map[string]any, len(rows))
	for i, row := range rows {
		out[i] = map[string]any{}
		for _, f := range root["fields"].([]any) {
			f := f.(map[string]any)
			name := f["name"].(string)
			out[i][name] = conv(f["type"], row[name])
		}
	}
	return out
}
