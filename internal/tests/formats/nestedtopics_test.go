package formats

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/internal/tests/scenario"
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

// TestRegistryJSONSchemaNestedTopic: a topic confluent-kafka's
// JSONSerializer wrote through a schema registry, of objects holding an
// object (holding a $ref'd object) and an array of objects holding an
// array (trip.schema.json), read with `format: json_schema` and no
// columns: the columns are struct and array columns, and delta-rs and
// DuckDB read exactly the values produced; records the schema refuses are
// dead letters.
func TestRegistryJSONSchemaNestedTopic(t *testing.T) {
	r := newRegistryTopic(t, "registry-trips-json", "json_schema")
	rows := r.produce("jsonschemaproduce.py", 7, registryBad, "--schema",
		filepath.Join(scenario.RepoRoot(t), "internal", "tests", "formats", "testdata", "trip.schema.json"))
	types := map[string]string{"id": "string null", "count": "long null",
		"loc":      "struct<lat: double null, at: timestamp null, inner: struct<floor: long null> null> null",
		"readings": "array<struct<v: double null, day: date null, tags: array<string null> null> null> null"}
	r.firstRun(rows, types, "mapping: the writer schema refuses the record: at '/count': got string, want integer")
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

// sparkRows are rows avroproduce.py printed for Avro schema file schema
// (as delta-rs reads them: a record as an object, a map as its entries)
// as pyspark's rows render (rowjson): a record as the list of its fields'
// values, a map as an object.
func sparkRows(t *testing.T, schema string, rows []map[string]any) []map[string]any {
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
				var out []any
				for _, f := range ty["fields"].([]any) {
					f := f.(map[string]any)
					out = append(out, conv(f["type"], rec[f["name"].(string)]))
				}
				return out
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
				out := map[string]any{}
				for _, e := range v.([]any) {
					e := e.([]any)
					out[e[0].(string)] = conv(ty["values"], e[1])
				}
				return out
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
