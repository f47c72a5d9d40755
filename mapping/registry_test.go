package mapping

import (
	"cmp"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta"
)

// schemaMap is a Schemas over a map, below the interface that
// schemareg.Registry implements (its own tests use a real registry API).
type schemaMap struct {
	mu      sync.Mutex
	format  Format // of every schema; Avro if empty
	schemas map[int]string
	missing map[int]error
}

func (s *schemaMap) Schema(id int) (WriterSchema, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := WriterSchema{Format: cmp.Or(s.format, Avro)}
	if err := s.missing[id]; err != nil {
		return ws, true, err
	}
	text, ok := s.schemas[id]
	ws.Text = text
	return ws, ok, nil
}

// wire prefixes an Avro body with the Confluent header naming id.
func wire(id int, body []byte) []byte {
	b := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(id))
	return append(b, body...)
}

const (
	plugV1 = `{"type":"record","name":"Plug","fields":[{"name":"id","type":"string"},{"name":"power","type":"int"}]}`
	// v2 adds a field and widens power to long.
	plugV2 = `{"type":"record","name":"Plug","fields":[{"name":"id","type":"string"},{"name":"power","type":"long"},
		{"name":"volts","type":["null","double"],"default":null}]}`
	// v3 drops volts and makes power a string: incompatible.
	plugV3 = `{"type":"record","name":"Plug","fields":[{"name":"id","type":"string"},{"name":"power","type":"string"}]}`
)

// Registry records are read with the writer schema their header names,
// into the columns of the table's schema: a field the writer lacks is
// null, a widened one is cast, an incompatible one is a dead letter naming
// the column and both types; an id not fetched yet is pending, not a dead
// letter, and one the registry lacks is a dead letter.
func TestMapRegistryAvro(t *testing.T) {
	schemas := &schemaMap{schemas: map[int]string{1: plugV1, 3: plugV3}, missing: map[int]error{9: ErrSchemaNotFound}}
	m, err := New(Config{Format: Avro, Registry: schemas, Schema: plugV2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Schema().Fields; len(got) != 3 || got[1].Type != delta.Long || got[2].Name != "volts" {
		t.Fatalf("columns %v, want id, power long, volts from the table's schema", got)
	}
	var row Row
	if err := m.Map(&Record{Value: wire(1, encodeAvro(t, plugV1, map[string]any{"id": "p1", "power": int32(7)}))}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.ByteArrayValue([]byte("p1")), parquet.Int64Value(7), parquet.NullValue()})

	v2 := wire(2, encodeAvro(t, plugV2, map[string]any{"id": "p2", "power": int64(1) << 40, "volts": 230.5}))
	err = m.Map(&Record{Value: v2}, &row)
	if pending, ok := errors.AsType[*SchemaPendingError](err); !ok || pending.ID != 2 {
		t.Fatalf("an unfetched id: %v, want a SchemaPendingError for id 2", err)
	}
	schemas.mu.Lock()
	schemas.schemas[2] = plugV2
	schemas.mu.Unlock()
	if err := m.Map(&Record{Value: v2}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.ByteArrayValue([]byte("p2")), parquet.Int64Value(1 << 40), parquet.DoubleValue(230.5)})

	for _, c := range []struct {
		name  string
		value []byte
		want  string
	}{
		{"incompatible", wire(3, encodeAvro(t, plugV3, map[string]any{"id": "p3", "power": "high"})), "power"},
		{"unknown to the registry", wire(9, []byte{2, 'x'}), "schema id 9: not found in the schema registry"},
		{"no header", encodeAvro(t, plugV1, map[string]any{"id": "plug-1", "power": int32(7)}), "magic byte 12"},
		{"short", []byte{0, 0, 1}, "shorter than the 5-byte schema registry header"},
		{"body of another schema", wire(1, []byte{0xff}), "not Avro"},
	} {
		err := m.Map(&Record{Value: c.value}, &row)
		if me, ok := errors.AsType[*MapError](err); !ok || !strings.Contains(me.Error(), c.want) {
			t.Errorf("%s: %v, want a MapError saying %q", c.name, err, c.want)
		}
	}
}

// Mapping a registry record allocates nothing once its schema is compiled.
func TestMapRegistryAvroDoesNotAllocate(t *testing.T) {
	schemas := &schemaMap{schemas: map[int]string{1: plugV1, 2: plugV2}}
	m, err := New(Config{Format: Avro, Registry: schemas, Schema: plugV2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs := []*Record{
		{Value: wire(1, encodeAvro(t, plugV1, map[string]any{"id": "p1", "power": int32(7)}))},
		{Value: wire(2, encodeAvro(t, plugV2, map[string]any{"id": "p2", "power": int64(8), "volts": nil}))},
	}
	var row Row
	row.Arena = new(Arena)
	for _, r := range recs { // compile each id once
		if err := m.Map(r, &row); err != nil {
			t.Fatal(err)
		}
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		if err := m.Map(recs[i%2], &row); err != nil {
			t.Fatal(err)
		}
		if i++; i%64 == 0 {
			row.Arena.Reset()
		}
	})
	if allocs != 0 {
		t.Errorf("Map allocates %.1f times per registry record", allocs)
	}
}

// A column whose source the table's schema does not have is refused at
// start, naming the column, as with a schema file.
func TestMapRegistryAvroChecksSources(t *testing.T) {
	_, err := New(Config{Format: Avro, Registry: &schemaMap{}, Schema: plugV1,
		Columns: []Column{{Name: "watts", Type: "long", Source: "watts"}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "table.columns[0].source") {
		t.Fatalf("err = %v, want one naming table.columns[0].source", err)
	}
}

// FuzzWireHeader: any value is mapped or a *MapError, never a panic, and a
// pending schema only for a well-formed header naming an unknown id.
func FuzzWireHeader(f *testing.F) {
	m, err := New(Config{Format: Avro, Registry: &schemaMap{schemas: map[int]string{1: plugV1}}, Schema: plugV1}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(wire(1, []byte{4, 'p', '1', 14}))
	f.Add(wire(2, nil))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, value []byte) {
		var row Row
		err := m.Map(&Record{Value: value}, &row)
		if pending, ok := errors.AsType[*SchemaPendingError](err); ok {
			if len(value) < 5 || value[0] != 0 || pending.ID == 1 {
				t.Fatalf("pending %d for %x", pending.ID, value)
			}
			return
		}
		if _, ok := errors.AsType[*MapError](err); err != nil && !ok {
			t.Fatalf("error %v is neither a MapError nor pending", err)
		}
	})
}

// A writer schema that widens a column derived from an earlier version
// (int → long, float → double) widens the column where the table allows
// it and the mapping evolves: the record is refused with the column at its
// wider type, and the evolved Mapper maps it and the older versions'
// records at that type. Otherwise its records are dead letters naming the
// field, both types and why (how to allow it, where that would help):
// cast into the table's type they would overflow or lose precision (a
// double into a float column kept 7 digits of 17). Columns the route
// declares take the casts they ask for.
func TestMapRegistryAvroWidening(t *testing.T) {
	const (
		v1 = `{"type":"record","name":"R","fields":[{"name":"n","type":"int"},{"name":"x","type":"float"}]}`
		v2 = `{"type":"record","name":"R","fields":[{"name":"n","type":"int"},{"name":"x","type":"double"}]}`
		v3 = `{"type":"record","name":"R","fields":[{"name":"n","type":"long"},{"name":"x","type":"float"}]}`
	)
	schemas := &schemaMap{schemas: map[int]string{1: v1, 2: v2, 3: v3}}
	recs := map[int]map[string]any{1: {"n": int32(1), "x": float32(0.5)}, 2: {"n": int32(2), "x": 0.1234567891234},
		3: {"n": int64(1) << 40, "x": float32(0.5)}}
	value := func(id int) *Record { return &Record{Value: wire(id, encodeAvro(t, schemas.schemas[id], recs[id]))} }
	var row Row
	for _, c := range []struct {
		evolve, widening bool
		why              string
	}{
		{false, false, "(schema_evolution: none)"},
		{false, true, "(schema_evolution: none)"},
		{true, false, "ALTER TABLE ... SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')"},
	} {
		m, err := New(Config{Format: Avro, Registry: schemas, Schema: v1, Evolve: c.evolve, TypeWidening: c.widening}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Map(value(1), &row); err != nil {
			t.Fatal(err)
		}
		for id, want := range map[int]string{
			2: "field x: the writer schema's double is wider than the table's float column x: ",
			3: "field n: the writer schema's long is wider than the table's integer column n: ",
		} {
			err := m.Map(value(id), &row)
			if me, ok := errors.AsType[*MapError](err); !ok || !strings.Contains(me.Error(), want) || !strings.Contains(me.Error(), c.why) {
				t.Errorf("evolve %v, widening %v, schema id %d: %v, want a dead letter saying %q and %q", c.evolve, c.widening, id, err, want, c.why)
			}
		}
	}

	m, err := New(Config{Format: Avro, Registry: schemas, Schema: v1, Evolve: true, TypeWidening: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int]Column{2: {Name: "x", Type: "double"}, 3: {Name: "n", Type: "long"}} {
		err := m.Map(value(id), &row)
		change, ok := errors.AsType[*SchemaChangeError](err)
		if !ok || len(change.Add) != 1 || change.Add[0].Name != want.Name || change.Add[0].Type != want.Type || !change.Add[0].IsNullable() {
			t.Fatalf("schema id %d: %v, want a SchemaChangeError widening %s to %s", id, err, want.Name, want.Type)
		}
		if m, err = m.Evolved(change.Add); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.Schema().SchemaString(); len(m.Schema().Fields) != 2 || m.Schema().Fields[0].Type != delta.Long || m.Schema().Fields[1].Type != delta.Double {
		t.Fatalf("widened columns %s, want n long, x double", got)
	}
	for id, want := range map[int][]parquet.Value{
		1: {parquet.Int64Value(1), parquet.DoubleValue(0.5)},
		2: {parquet.Int64Value(2), parquet.DoubleValue(0.1234567891234)},
		3: {parquet.Int64Value(1 << 40), parquet.DoubleValue(0.5)},
	} {
		if err := m.Map(value(id), &row); err != nil {
			t.Fatalf("schema id %d after widening: %v", id, err)
		}
		checkValues(t, row.Values, want)
	}

	declared, err := New(Config{Format: Avro, Registry: schemas, Schema: v1,
		Columns: []Column{{Name: "x", Type: "float"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := declared.Map(&Record{Value: wire(2, encodeAvro(t, v2, map[string]any{"n": int32(2), "x": 0.5}))}, &row); err != nil {
		t.Errorf("a declared float column of a double: %v, want it cast", err)
	}
}

// A derived partition column is not widened: its records are dead
// letters saying so, whatever the table allows.
func TestMapRegistryAvroWideningPartition(t *testing.T) {
	const (
		v1 = `{"type":"record","name":"R","fields":[{"name":"n","type":"int"},{"name":"x","type":"float"}]}`
		v2 = `{"type":"record","name":"R","fields":[{"name":"n","type":"long"},{"name":"x","type":"float"}]}`
	)
	schemas := &schemaMap{schemas: map[int]string{1: v1, 2: v2}}
	m, err := New(Config{Format: Avro, Registry: schemas, Schema: v1, Evolve: true, TypeWidening: true}, []string{"n"})
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	err = m.Map(&Record{Value: wire(2, encodeAvro(t, v2, map[string]any{"n": int64(2), "x": float32(0.5)}))}, &row)
	if me, ok := errors.AsType[*MapError](err); !ok || !strings.Contains(me.Error(), "field n: the writer schema's long is wider than the table's integer column n: deltaflow does not widen a partition column") {
		t.Errorf("a widened partition column: %v, want a dead letter naming n", err)
	}
}

// An evolving mapping meets a writer schema with new fields: the record is
// refused with the columns they make (nullable; a field of a type no
// column holds is left out), and the evolved Mapper maps it and the older
// versions' records, null in the new columns. Without Evolve the new field
// is ignored.
func TestMapRegistryAvroEvolves(t *testing.T) {
	const v3 = `{"type":"record","name":"Plug","fields":[{"name":"id","type":"string"},{"name":"power","type":"int"},
		{"name":"volts","type":["null","double"],"default":null},{"name":"room","type":"string","default":""},
		{"name":"nothing","type":"null","default":null}]}`
	schemas := &schemaMap{schemas: map[int]string{1: plugV1, 2: plugV2, 3: v3}}
	m, err := New(Config{Format: Avro, Registry: schemas, Schema: plugV1, Evolve: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Schema().Fields {
		if !f.Nullable {
			t.Errorf("column %s made of the registry's schema is not nullable", f.Name)
		}
	}
	var row Row
	v1 := wire(1, encodeAvro(t, plugV1, map[string]any{"id": "p1", "power": int32(7)}))
	v3rec := wire(3, encodeAvro(t, v3, map[string]any{"id": "p3", "power": int32(9), "volts": 231.0, "room": "hall", "nothing": nil}))
	if err := m.Map(&Record{Value: v1}, &row); err != nil {
		t.Fatal(err)
	}
	err = m.Map(&Record{Value: v3rec}, &row)
	change, ok := errors.AsType[*SchemaChangeError](err)
	if !ok || change.ID != 3 || len(change.Add) != 2 || change.Add[0].Name != "volts" || change.Add[1].Name != "room" {
		t.Fatalf("a schema with new fields: %v, want a SchemaChangeError adding volts and room", err)
	}
	evolved, err := m.Evolved(change.Add)
	if err != nil {
		t.Fatal(err)
	}
	if got := evolved.Schema().Fields; len(got) != 4 || got[3].Name != "room" || !got[3].Nullable {
		t.Fatalf("evolved columns %v", got)
	}
	if err := evolved.Map(&Record{Value: v3rec}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.ByteArrayValue([]byte("p3")), parquet.Int32Value(9),
		parquet.DoubleValue(231), parquet.ByteArrayValue([]byte("hall"))})
	if err := evolved.Map(&Record{Value: v1}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.ByteArrayValue([]byte("p1")), parquet.Int32Value(7), parquet.NullValue(), parquet.NullValue()})

	fixed, err := New(Config{Format: Avro, Registry: schemas, Schema: plugV1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fixed.Map(&Record{Value: v3rec}, &row); err != nil {
		t.Fatalf("without Evolve: %v", err)
	}
}
