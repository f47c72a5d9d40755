package mapping

import (
	"errors"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// Columns whose source is kafka.key.<path> read fields of the record key
// decoded in the key format: nested paths, a null key making them null, a
// key that cannot be decoded or cast a dead letter that says it is the
// key's, the value's columns read as before.
func TestMapKeyFields(t *testing.T) {
	cfg := Config{KeyFormat: JSON, Columns: []Column{
		{Name: "id", Type: "long", Source: "kafka.key.id"},
		{Name: "region", Type: "string", Source: "kafka.key.meta.region"},
		{Name: "power", Type: "double"},
	}}
	m, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	rec := &Record{Key: []byte(`{"id": 7, "meta": {"region": "eu"}}`), Value: []byte(`{"power": 1.5, "id": 99}`)}
	if err := m.Map(rec, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.Int64Value(7), parquet.ByteArrayValue([]byte("eu")), parquet.DoubleValue(1.5)})

	if err := m.Map(&Record{Value: []byte(`{"power": 2}`)}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.NullValue(), parquet.NullValue(), parquet.DoubleValue(2)})

	for key, want := range map[string]string{
		`not json`:     "key: not JSON",
		`"scalar"`:     "key: not a JSON object",
		`{"id": "x7"}`: `id: cannot cast "x7" to long`,
		`{"id": true}`: "id: expected number, got boolean",
	} {
		err := m.Map(&Record{Key: []byte(key), Value: []byte(`{"power": 1}`)}, &row)
		if me, ok := errors.AsType[*MapError](err); !ok || !strings.HasPrefix(me.Reason, want) {
			t.Errorf("key %s: %v, want a dead letter %q", key, err, want)
		}
	}
}

// A registry key format decodes the key through the registry, by the id
// in its header (a pending id is fetched, not a dead letter), beside a
// value in another encoding.
func TestMapKeyFieldsRegistry(t *testing.T) {
	const keyV1 = `{"type":"record","name":"PlugKey","fields":[{"name":"id","type":"long"}]}`
	schemas := &schemaMap{schemas: map[int]string{1: plugV1}}
	m, err := New(Config{Format: Avro, KeyFormat: Avro, Registry: schemas, Columns: []Column{
		{Name: "key_id", Type: "long", Source: "kafka.key.id"},
		{Name: "id", Type: "string"},
		{Name: "power", Type: "long"},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Record{Key: wire(10, encodeAvro(t, keyV1, map[string]any{"id": int64(42)})),
		Value: wire(1, encodeAvro(t, plugV1, map[string]any{"id": "p1", "power": int32(7)}))}
	var row Row
	err = m.Map(rec, &row)
	if pending, ok := errors.AsType[*SchemaPendingError](err); !ok || pending.ID != 10 {
		t.Fatalf("a key schema not fetched yet: %v, want a SchemaPendingError for id 10", err)
	}
	schemas.mu.Lock()
	schemas.schemas[10] = keyV1
	schemas.mu.Unlock()
	if err := m.Map(rec, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.Int64Value(42), parquet.ByteArrayValue([]byte("p1")), parquet.Int64Value(7)})

	rec.Key = []byte(`{"id": 42}`)
	err = m.Map(rec, &row)
	if me, ok := errors.AsType[*MapError](err); !ok || !strings.HasPrefix(me.Reason, "key: not in the schema registry's wire format") {
		t.Fatalf("a JSON key with key_format avro: %v, want a dead letter about the key's wire format", err)
	}
}

// The key's fields need a key format that decodes it; a registry one
// needs a registry; an unknown one is named.
func TestKeyFormatChecked(t *testing.T) {
	col := []Column{{Name: "id", Type: "long", Source: "kafka.key.id"}}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Columns: col}, "table.columns[0].source: kafka.key.id reads a field of the key: set table.key_format"},
		{Config{Columns: col, KeyFormat: Raw}, "set table.key_format"},
		{Config{Columns: col, KeyFormat: Protobuf}, "table.key_format: protobuf keys name their schemas in a registry"},
		{Config{Columns: col, KeyFormat: "xml"}, `table.key_format: unknown format "xml"`},
		{Config{Columns: []Column{{Name: "id", Type: "long", Source: "kafka.key..id"}}, KeyFormat: JSON}, `key path "kafka.key..id" has an empty segment`},
		{Config{Columns: []Column{{Name: "v", Type: "variant", Source: "kafka.key.v"}}, KeyFormat: JSON}, "a variant column reads the value, not the key"},
	} {
		if _, err := New(tc.cfg, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// Decoding the key costs no allocation once warm, as the value's does.
func TestMapKeyFieldsDoesNotAllocate(t *testing.T) {
	m, err := New(Config{KeyFormat: JSON, Columns: []Column{{Name: "id", Type: "long", Source: "kafka.key.id"}, {Name: "power", Type: "double"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Record{Key: []byte(`{"id": 7}`), Value: []byte(`{"power": 1.5}`)}
	row := Row{Arena: new(Arena)}
	if allocs := testing.AllocsPerRun(100, func() {
		row.Arena.Reset()
		if err := m.Map(rec, &row); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("%v allocations a record, want 0", allocs)
	}
}
