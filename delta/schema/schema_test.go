package schema

import (
	"errors"
	"strings"
	"testing"
)

// sparkNested is a schemaString as delta-spark writes it: nested structs,
// arrays and maps with containsNull / valueContainsNull, and column
// mapping metadata on nested fields.
const sparkNested = `{"type":"struct","fields":[` +
	`{"name":"id","type":"long","nullable":false,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-1"}},` +
	`{"name":"s","type":{"type":"struct","fields":[` +
	`{"name":"a","type":"decimal(10,2)","nullable":true,"metadata":{"delta.columnMapping.id":3,"delta.columnMapping.physicalName":"col-3"}},` +
	`{"name":"tags","type":{"type":"array","elementType":{"type":"struct","fields":[` +
	`{"name":"k","type":"timestamp_ntz","nullable":true,"metadata":{"delta.columnMapping.id":5,"delta.columnMapping.physicalName":"col-5"}}]},"containsNull":false},` +
	`"nullable":true,"metadata":{"delta.columnMapping.id":4,"delta.columnMapping.physicalName":"col-4"}}]},` +
	`"nullable":true,"metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-2","comment":"x"}},` +
	`{"name":"m","type":{"type":"map","keyType":"integer","valueType":{"type":"array","elementType":"date","containsNull":true},"valueContainsNull":false},` +
	`"nullable":true,"metadata":{"delta.columnMapping.id":6,"delta.columnMapping.physicalName":"col-6"}}]}`

// TestNestedSchemaRoundTrip: a nested schemaString parses and writes back
// byte for byte.
func TestNestedSchemaRoundTrip(t *testing.T) {
	s, err := ParseSchema(sparkNested)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.SchemaString(); got != sparkNested {
		t.Errorf("round trip:\n%s\nwant\n%s", got, sparkNested)
	}
	tags := s.Fields[1].Type.(*StructType).Fields[1]
	if a := tags.Type.(*ArrayType); a.ContainsNull || PhysicalName(&tags) != "col-4" {
		t.Errorf("tags: %+v", tags)
	}
	if m := s.Fields[2].Type.(*MapType); m.ValueContainsNull || !m.ValueType.(*ArrayType).ContainsNull {
		t.Errorf("m: %+v", m)
	}
}

// TestMergeSchemaNested: struct columns evolve field by field, inside
// arrays and maps too, whatever the nested fields' metadata: a nullable
// field is added, arrays and maps may come to hold nulls; a required
// field added, a type changed or widened inside is refused naming its path.
func TestMergeSchemaNested(t *testing.T) {
	parse := func(s string) *StructType {
		t.Helper()
		st, err := ParseSchema(s)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	cur := parse(`{"type":"struct","fields":[{"name":"s","type":{"type":"struct","fields":[` +
		`{"name":"a","type":"integer","nullable":true,"metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-2"}},` +
		`{"name":"l","type":{"type":"array","elementType":{"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{}}]},"containsNull":false},"nullable":true,"metadata":{}}]},` +
		`"nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-1"}}]}`)
	next := parse(`{"type":"struct","fields":[{"name":"s","type":{"type":"struct","fields":[` +
		`{"name":"a","type":"integer","nullable":true,"metadata":{}},` +
		`{"name":"l","type":{"type":"array","elementType":{"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{}},{"name":"y","type":"string","nullable":true,"metadata":{}}]},"containsNull":true},"nullable":true,"metadata":{}},` +
		`{"name":"b","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}`)
	merged, changed, err := MergeSchema(cur, next, true)
	if err != nil || !changed {
		t.Fatalf("MergeSchema: changed %v, %v", changed, err)
	}
	want := `{"type":"struct","fields":[{"name":"s","type":{"type":"struct","fields":[` +
		`{"name":"a","type":"integer","nullable":true,"metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-2"}},` +
		`{"name":"l","type":{"type":"array","elementType":{"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{}},{"name":"y","type":"string","nullable":true,"metadata":{}}]},"containsNull":true},"nullable":true,"metadata":{}},` +
		`{"name":"b","type":"string","nullable":true,"metadata":{}}]},` +
		`"nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-1"}}]}`
	if got := merged.SchemaString(); got != want {
		t.Errorf("merged\n%s\nwant\n%s", got, want)
	}
	if _, changed, err := MergeSchema(merged, cur, true); err != nil || changed {
		t.Errorf("an older writer's schema: changed %v, %v", changed, err)
	}
	for _, c := range []struct{ next, column, reason string }{
		{`{"name":"a","type":"integer","nullable":true,"metadata":{}},{"name":"r","type":"long","nullable":false,"metadata":{}}`, "s.r", "must be nullable"},
		{`{"name":"a","type":"long","nullable":true,"metadata":{}}`, "s.a", "type widening inside a struct"},
		{`{"name":"a","type":"string","nullable":true,"metadata":{}}`, "s.a", "column types differ"},
		{`{"name":"a","type":"integer","nullable":true,"metadata":{}},{"name":"l","type":{"type":"array","elementType":"long","containsNull":true},"nullable":true,"metadata":{}}`, "s.l.element", "column types differ"},
	} {
		n := parse(`{"type":"struct","fields":[{"name":"s","type":{"type":"struct","fields":[` + c.next + `]},"nullable":true,"metadata":{}}]}`)
		_, _, err := MergeSchema(cur, n, true)
		var sce *SchemaChangeError
		if !errors.As(err, &sce) || sce.Column != c.column || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: %v, want an error on %s: %s", c.next, err, c.column, c.reason)
		}
	}
}
