package mapping

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/valyala/fastjson"

	"github.com/deltaflow/deltaflow/delta"
)

const (
	// alertV1 is a JSON Schema as a producer registers it: draft-07, a
	// nullable property spelled both ways, a local $ref.
	alertV1 = `{
		"$schema": "http://json-schema.org/draft-07/schema#",
		"title": "Alert", "type": "object",
		"properties": {
			"id": {"type": "string"},
			"level": {"type": "integer", "minimum": 0, "maximum": 5},
			"score": {"type": ["number", "null"]},
			"at": {"type": "string", "format": "date-time"},
			"day": {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/Day"}]},
			"acked": {"type": "boolean"}
		},
		"required": ["id", "level", "at"],
		"definitions": {"Day": {"type": "string", "format": "date"}}
	}`
	// alertV2 adds a property.
	alertV2 = `{"type": "object", "properties": {"id": {"type": "string"}, "level": {"type": "integer"},
		"at": {"type": "string", "format": "date-time"}, "room": {"type": "string"}}, "required": ["id"]}`
)

// Columns come from the subject's latest JSON Schema, in its order, with
// the types docs/configuration.md gives, all nullable.
func TestJSONSchemaColumns(t *testing.T) {
	m, err := New(Config{Format: JSONSchema, Registry: &schemaMap{format: JSONSchema}, Schema: alertV1,
		SchemaOrigin: "subject alerts-value, schema id 1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if md := string(m.Schema().Fields[0].Metadata); md != `{"deltaflow.origin":"subject alerts-value, schema id 1"}` {
		t.Errorf("column metadata %s, want the schema's origin", md)
	}
	checkNullableColumns(t, m, []namedColumn{{"id", delta.String}, {"level", delta.Long}, {"score", delta.Double},
		{"at", delta.Timestamp}, {"day", delta.Date}, {"acked", delta.Boolean}})

	for _, c := range []struct{ name, schema, want string }{
		{"object property", `{"type":"object","properties":{"a":{"type":"string"},"loc":{"type":"object"},"tags":{"type":"array"}}}`,
			"property loc: an object with neither properties nor a schema of its additionalProperties; property tags: an array without one schema of its items"},
		{"recursive", `{"type":"object","properties":{"tree":{"$ref":"#/definitions/Node"}},
			"definitions":{"Node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/definitions/Node"}}}}}}`,
			"property tree: property kids: items: a recursive schema: no column holds it"},
		{"two types", `{"type":"object","properties":{"v":{"type":["string","number"]}}}`, "property v: of string, number"},
		{"no type", `{"type":"object","properties":{"v":{}}}`, "property v: of no type"},
		{"not an object", `{"type":"array"}`, "the schema is of array, not of an object"},
		{"remote ref", `{"type":"object","properties":{"v":{"$ref":"https://example.com/v.json"}}}`, "only references inside the schema"},
		{"dotted name", `{"type":"object","properties":{"a.b":{"type":"string"}}}`, `property "a.b": a dot`},
	} {
		_, err := New(Config{Format: JSONSchema, Registry: &schemaMap{format: JSONSchema}, Schema: c.schema}, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	if _, err := New(Config{Format: JSONSchema, Schema: alertV1}, nil); err == nil || !strings.Contains(err.Error(), "schema_registry.url") {
		t.Errorf("json_schema without a registry: %v, want an error naming schema_registry.url", err)
	}
}

// namedColumn is a column's name and type.
type namedColumn struct {
	name string
	typ  delta.PrimitiveType
}

// checkNullableColumns checks that m's columns are want, all nullable.
func checkNullableColumns(t *testing.T, m *Mapper, want []namedColumn) {
	t.Helper()
	got := m.Schema().Fields
	if len(got) != len(want) {
		t.Fatalf("columns %v, want %v", got, want)
	}
	for i, w := range want {
		if got[i].Name != w.name || got[i].Type != w.typ || !got[i].Nullable {
			t.Errorf("column %d: %s %v nullable %v, want %s %s nullable", i, got[i].Name, got[i].Type, got[i].Nullable, w.name, w.typ)
		}
	}
}

// Registry JSON records are validated by the writer schema their header
// names, then read as JSON: a record the schema refuses is a dead letter
// saying where and why; an id not fetched yet is pending; an Avro id is a
// dead letter naming both formats.
func TestMapRegistryJSONSchema(t *testing.T) {
	schemas := &schemaMap{format: JSONSchema, schemas: map[int]string{1: alertV1}, missing: map[int]error{9: ErrSchemaNotFound}}
	m, err := New(Config{Format: JSONSchema, Registry: schemas, Schema: alertV1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 5, 7, 30, 0, 0, time.UTC)
	var row Row
	rec := `{"id":"a1","level":3,"score":null,"at":"2026-12-05T07:30:00Z","day":"2026-12-05","acked":true}`
	if err := m.Map(&Record{Value: wire(1, []byte(rec))}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.ByteArrayValue([]byte("a1")), parquet.Int64Value(3), parquet.NullValue(),
		parquet.Int64Value(at.UnixMicro()), parquet.Int32Value(int32(at.Unix() / 86400)), parquet.BooleanValue(true)})

	err = m.Map(&Record{Value: wire(2, []byte(`{"id":"a2","level":1,"at":"2026-12-05T07:30:00Z"}`))}, &row)
	if pending, ok := errors.AsType[*SchemaPendingError](err); !ok || pending.ID != 2 {
		t.Fatalf("an unfetched id: %v, want a SchemaPendingError for id 2", err)
	}

	avro := &schemaMap{schemas: map[int]string{4: plugV1}}
	other, err := New(Config{Format: JSONSchema, Registry: avro, Schema: alertV1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Map(&Record{Value: wire(4, []byte(rec))}, &row); err == nil || !strings.Contains(err.Error(), "a schema of format avro; the table's format is json_schema") {
		t.Errorf("a record of an Avro schema id: %v, want a MapError naming both formats", err)
	}

	for _, c := range []struct {
		name  string
		value []byte
		want  string
	}{
		{"wrong type", wire(1, []byte(`{"id":"a3","level":"high","at":"2026-12-05T07:30:00Z"}`)), "at '/level': got string, want integer"},
		{"out of range", wire(1, []byte(`{"id":"a3","level":9,"at":"2026-12-05T07:30:00Z"}`)), "at '/level': maximum"},
		{"required missing", wire(1, []byte(`{"id":"a3"}`)), "missing properties"},
		{"not JSON", wire(1, []byte(`{"id":`)), "not JSON"},
		{"unknown to the registry", wire(9, []byte(`{}`)), "schema id 9: not found in the schema registry"},
		{"no header", []byte(rec), "magic byte 123"},
	} {
		err := m.Map(&Record{Value: c.value}, &row)
		if me, ok := errors.AsType[*MapError](err); !ok || !strings.Contains(me.Error(), c.want) {
			t.Errorf("%s: %v, want a MapError saying %q", c.name, err, c.want)
		}
	}
}

// A writer schema with new properties evolves the table: the first record
// of it is a SchemaChangeError naming the nullable columns to add, and the
// evolved Mapper maps it.
func TestMapRegistryJSONSchemaEvolves(t *testing.T) {
	schemas := &schemaMap{format: JSONSchema, schemas: map[int]string{1: alertV1, 2: alertV2}}
	m, err := New(Config{Format: JSONSchema, Registry: schemas, Schema: alertV1, Evolve: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	v2 := &Record{Value: wire(2, []byte(`{"id":"a2","level":1,"at":"2026-12-05T07:30:00Z","room":"hall"}`))}
	err = m.Map(v2, &row)
	change, ok := errors.AsType[*SchemaChangeError](err)
	if !ok || len(change.Add) != 1 || change.Add[0].Name != "room" || change.Add[0].Type != "string" || !*change.Add[0].Nullable ||
		change.Add[0].Origin != "schema id 2" {
		t.Fatalf("a writer schema with a new property: %v, want a SchemaChangeError adding room string, from schema id 2", err)
	}
	evolved, err := m.Evolved(change.Add)
	if err != nil {
		t.Fatal(err)
	}
	if err := evolved.Map(v2, &row); err != nil {
		t.Fatal(err)
	}
	if got := row.Values[len(row.Values)-1]; string(got.ByteArray()) != "hall" {
		t.Errorf("room = %v, want hall", got)
	}
	if err := evolved.Map(&Record{Value: wire(1, []byte(`{"id":"a1","level":1,"at":"2026-12-05T07:30:00Z"}`))}, &row); err != nil {
		t.Fatalf("a v1 record after the evolution: %v", err)
	}
}

// A writer schema's $ref outside itself is never loaded: not a file the
// schema names (deltaflow would read the host's files for whoever may
// register schemas), nor a URL.
func TestJSONSchemaLoadsNothing(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "other.json")
	if err := os.WriteFile(secret, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"file://" + secret, "https://json-schema.example/other.json"} {
		schema := `{"type":"object","properties":{"v":{"$ref":"` + ref + `"}}}`
		m, err := New(Config{Format: JSONSchema, Registry: &schemaMap{format: JSONSchema, schemas: map[int]string{1: schema}},
			Columns: []Column{{Name: "v", Type: "string"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var row Row
		err = m.Map(&Record{Value: wire(1, []byte(`{"v":"x"}`))}, &row)
		if me, ok := errors.AsType[*MapError](err); !ok || !strings.Contains(me.Error(), "no references outside the schema") {
			t.Errorf("$ref %s: %v, want a dead letter: deltaflow resolves no references outside the schema", ref, err)
		}
	}
}

// sensorJSONSchema is the seed's records as a JSON Schema describes them.
const sensorJSONSchema = `{"type": "object", "properties": {"device_id": {"type": "string"}, "device_type": {"type": "string"},
	"ingested_at": {"type": "string", "format": "date-time"}, "payload": {"type": "string"}},
	"required": ["device_id", "device_type", "ingested_at", "payload"]}`

// BenchmarkMapRegistryJSONSchemaSensor is BenchmarkMapSensor's records
// in the wire format, each validated by the JSON Schema its id names
// before it is mapped into the default columns: the cost of validation.
func BenchmarkMapRegistryJSONSchemaSensor(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Format, cfg.Registry = JSONSchema, &schemaMap{format: JSONSchema, schemas: map[int]string{1: sensorJSONSchema}}
	m, err := New(cfg, DefaultPartitionColumns)
	if err != nil {
		b.Fatal(err)
	}
	m.SetClock(func() time.Time { return fixedNow })
	recs := sensorMix(4096)
	for _, r := range recs {
		r.Value = wire(1, r.Value)
	}
	benchMap(b, m, recs)
}

// FuzzMapJSONSchema: the document the mapper builds over its own parse is
// validated as the validator's own decoding of the record would be: the
// schema refuses a record in the one exactly when it refuses it in the
// other.
func FuzzMapJSONSchema(f *testing.F) {
	m, err := New(Config{Format: JSONSchema, Registry: &schemaMap{format: JSONSchema, schemas: map[int]string{1: alertV1}},
		Schema: alertV1, Mode: Permissive}, nil)
	if err != nil {
		f.Fatal(err)
	}
	validator, err := compileJSONSchema(alertV1)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"id":"a1","level":3,"score":null,"at":"2026-12-05T07:30:00Z","day":"2026-12-05","acked":true}`))
	f.Add([]byte(`{"id":"a1","level":3.0,"at":"x","extra":[1,{"a":null}]}`))
	f.Add([]byte(`{"id":"a\u00e9","level":-1,"at":""}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var row Row
		err := m.Map(&Record{Value: wire(1, body)}, &row)
		if _, ok := errors.AsType[*MapError](err); err != nil && !ok {
			t.Fatalf("error %v is no MapError", err)
		}
		doc, derr := jsonschema.UnmarshalJSON(bytes.NewReader(body))
		if _, isObject := doc.(map[string]any); derr != nil || !isObject {
			return
		}
		refused := err != nil && strings.Contains(err.Error(), "the writer schema refuses the record")
		if err != nil && !refused {
			return // not parsed as JSON by the mapper: never validated
		}
		if verr := validator.Validate(doc); (verr != nil) != refused {
			t.Fatalf("%q: the validator on its own decoding says %v; Map says %v", body, verr, err)
		}
	})
}

// Objects and arrays make struct, array and map columns, read from the
// records as JSON ones are.
func TestJSONSchemaNestedColumns(t *testing.T) {
	const schema = `{"type": "object", "properties": {
		"id": {"type": "string"},
		"loc": {"type": ["object", "null"], "properties": {"lat": {"type": "number"},
			"inner": {"$ref": "#/definitions/Inner"}}},
		"readings": {"type": "array", "items": {"type": "object", "properties": {
			"at": {"type": "string", "format": "date-time"}, "tags": {"type": "array", "items": {"type": "string"}}}}},
		"attrs": {"type": "object", "additionalProperties": {"type": "integer"}}},
		"definitions": {"Inner": {"type": "object", "properties": {"floor": {"type": "integer"}}}}}`
	schemas := &schemaMap{format: JSONSchema, schemas: map[int]string{1: schema}}
	m, err := New(Config{Format: JSONSchema, Registry: schemas, Schema: schema}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range m.Schema().Fields {
		got = append(got, f.Name+" "+typeDDL(f.Type))
	}
	want := "id string, loc struct<lat: double, inner: struct<floor: long>>, readings array<struct<at: timestamp, tags: array<string>>>, attrs map<string, long>"
	if strings.Join(got, ", ") != want {
		t.Errorf("columns %s\nwant %s", strings.Join(got, ", "), want)
	}
	var row Row
	rec := `{"id":"a","loc":{"lat":1.5,"inner":{"floor":2}},"readings":[{"at":"2026-06-22T09:15:30Z","tags":["x"]}],"attrs":{"n":3}}`
	if err := m.Map(&Record{Value: wire(1, []byte(rec))}, &row); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{`0:r0d2=1.5 1:r0d3=2`, `0:r0d4=1782119730000000 1:r0d6="x"`, `0:r0d2="n" 1:r0d3=3`} {
		if got := leafText(t, row.Values[i+1]); got != want {
			t.Errorf("column %s: %s, want %s", m.Schema().Fields[i+1].Name, got, want)
		}
	}
}

// A property added inside an object (an object's, an array's items') by a
// later writer schema evolves the struct column: the first record of it
// is a SchemaChangeError with the column's type holding it, and the
// evolved Mapper maps it and the older version's records (null in the new
// field). Without evolution the new property is left out.
func TestMapRegistryJSONSchemaNestedFieldAdded(t *testing.T) {
	const (
		v1 = `{"type": "object", "properties": {"id": {"type": "string"},
			"loc": {"type": "object", "properties": {"lat": {"type": "number"}}},
			"readings": {"type": "array", "items": {"type": "object", "properties": {"v": {"type": "integer"}}}}}}`
		v2 = `{"type": "object", "properties": {"id": {"type": "string"},
			"loc": {"type": "object", "properties": {"lat": {"type": "number"}, "alt": {"type": "integer"}}},
			"readings": {"type": "array", "items": {"type": "object", "properties": {"v": {"type": "integer"},
				"unit": {"type": "string"}}}}}}`
	)
	schemas := &schemaMap{format: JSONSchema, schemas: map[int]string{1: v1, 2: v2}}
	m, err := New(Config{Format: JSONSchema, Registry: schemas, Schema: v1, Evolve: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	rec2 := &Record{Value: wire(2, []byte(`{"id":"b","loc":{"lat":2.5,"alt":400},"readings":[{"v":1,"unit":"kW"}]}`))}
	err = m.Map(rec2, &row)
	change, ok := errors.AsType[*SchemaChangeError](err)
	want := map[string]string{"loc": "struct<lat: double, alt: long>", "readings": "array<struct<v: long, unit: string>>"}
	if !ok || len(change.Add) != 2 || want[change.Add[0].Name] != change.Add[0].Type || want[change.Add[1].Name] != change.Add[1].Type {
		t.Fatalf("properties added inside loc and readings: %v, want a SchemaChangeError giving %v", err, want)
	}
	evolved, err := m.Evolved(change.Add)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rec           *Record
		loc, readings string
	}{
		{rec2, `0:r0d2=2.5 1:r0d2=400`, `0:r0d4=1 1:r0d4="kW"`},
		{&Record{Value: wire(1, []byte(`{"id":"a","loc":{"lat":1.5},"readings":[{"v":2}]}`))}, `0:r0d2=1.5 1:r0d1`, `0:r0d4=2 1:r0d3`},
	} {
		if err := evolved.Map(c.rec, &row); err != nil {
			t.Fatal(err)
		}
		if got := leafText(t, row.Values[1]) + " | " + leafText(t, row.Values[2]); got != c.loc+" | "+c.readings {
			t.Errorf("loc | readings = %s, want %s | %s", got, c.loc, c.readings)
		}
	}
	fixed, err := New(Config{Format: JSONSchema, Registry: schemas, Schema: v1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fixed.Map(rec2, &row); err != nil {
		t.Fatalf("without Evolve: %v", err)
	}
	if got := leafText(t, row.Values[1]); got != `0:r0d2=2.5` {
		t.Errorf("loc without Evolve: %s, want the new property left out", got)
	}
}

// The document a record is validated as takes no allocation for its
// top-level keys once they were seen (nor for values boxed without one:
// booleans, nulls).
func TestJSONSchemaDocumentKeysDoNotAllocate(t *testing.T) {
	j := &jsonSchemaValues{top: map[string]any{}, keys: map[string]string{}}
	var p fastjson.Parser
	v, err := p.Parse(`{"device_on": true, "door_open": false, "fault": null}`)
	if err != nil {
		t.Fatal(err)
	}
	o := v.GetObject()
	j.document(o)
	if allocs := testing.AllocsPerRun(100, func() { j.document(o) }); allocs != 0 {
		t.Errorf("%.1f allocations per document of seen keys, want 0", allocs)
	}
	if len(j.top) != 3 || j.top["device_on"] != true || j.top["fault"] != nil {
		t.Errorf("document %v", j.top)
	}
}

// Formats are annotations, not assertions: confluent-kafka's JSONSerializer
// validates without a format checker, so it writes "yesterday" in a
// date-time string, and such a record is no dead letter of validation
// wherever the format is (a $ref, a oneOf, an array's items, "regex"
// too). A value a column cannot hold is still a dead letter, by the cast.
func TestMapRegistryJSONSchemaFormatsNotAsserted(t *testing.T) {
	const schema = `{
		"$schema": "http://json-schema.org/draft-07/schema#",
		"type": "object",
		"properties": {
			"id": {"type": "string", "format": "uuid"},
			"at": {"type": "string", "format": "date-time"},
			"day": {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/Day"}]},
			"mail": {"type": "string", "format": "email"},
			"expr": {"type": "string", "format": "regex"},
			"links": {"type": "array", "items": {"type": "string", "format": "uri"}}
		},
		"required": ["id", "at"],
		"definitions": {"Day": {"type": "string", "format": "date"}}
	}`
	schemas := &schemaMap{format: JSONSchema, schemas: map[int]string{1: schema}}
	rec := &Record{Value: wire(1, []byte(`{"id":"a1","at":"yesterday","day":"soon","mail":"nobody","expr":"(","links":["not a uri"]}`))}

	kept, err := New(Config{Format: JSONSchema, Registry: schemas, Columns: []Column{
		{Name: "id", Type: "string"}, {Name: "at", Type: "string"}, {Name: "day", Type: "string"},
		{Name: "mail", Type: "string"}, {Name: "expr", Type: "string"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	if err := kept.Map(rec, &row); err != nil {
		t.Fatalf("a record whose strings are not of their formats, into string columns: %v, want it kept", err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.ByteArrayValue([]byte("a1")), parquet.ByteArrayValue([]byte("yesterday")),
		parquet.ByteArrayValue([]byte("soon")), parquet.ByteArrayValue([]byte("nobody")), parquet.ByteArrayValue([]byte("("))})

	derived, err := New(Config{Format: JSONSchema, Registry: schemas, Schema: schema}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = derived.Map(rec, &row)
	if me, ok := errors.AsType[*MapError](err); !ok || me.Reason != `at: unparsable timestamp "yesterday"` || me.Column != "at" {
		t.Errorf("into the derived timestamp column: %v, want the cast's dead letter", err)
	}

	// Ignoring formats is not forgiving their failures: a schema that
	// refuses a string of the format refuses "yesterday" too.
	const not = `{"type": "object", "properties": {"at": {"type": "string", "not": {"format": "date-time"}}}}`
	refusing, err := New(Config{Format: JSONSchema, Registry: &schemaMap{format: JSONSchema, schemas: map[int]string{1: not}},
		Columns: []Column{{Name: "at", Type: "string"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = refusing.Map(&Record{Value: wire(1, []byte(`{"at":"yesterday"}`))}, &row)
	if me, ok := errors.AsType[*MapError](err); !ok || !strings.Contains(me.Error(), "the writer schema refuses the record: at '/at': 'not' failed") {
		t.Errorf("not a date-time's format: %v, want a dead letter of validation", err)
	}
}
