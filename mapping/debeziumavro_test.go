package mapping

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// Debezium's Avro change events are checked with the real converter's
// schema and re-encoded real events, not with a live Avro Debezium
// pipeline: Confluent's AvroConverter is not on Maven Central here, and
// no registry that Apicurio's converter could register its schemas with
// can be installed. testdata/debezium/README.md says how each was made.
const (
	debeziumEnvelopeFile = "testdata/debezium/accounts-envelope-value.avsc"
	debeziumEventsFile   = "testdata/debezium/accounts-numeric-schemas.jsonl"
)

func debeziumEnvelope(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(debeziumEnvelopeFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// avroDatum is JSON value v (the JSON converter's, decoded with
// UseNumber) as twmb/avro encodes Avro type typ (the schema's JSON):
// Kafka Connect's Decimal from its base64 at the schema's scale, a
// VariableScaleDecimal {scale, value} from its object.
func avroDatum(t testing.TB, typ any, v any, named map[string]any) any {
	t.Helper()
	if v == nil {
		return nil
	}
	switch ty := typ.(type) {
	case []any: // ["null", T] or [T, "null"]
		for _, b := range ty {
			if b != "null" {
				return avroDatum(t, b, v, named)
			}
		}
	case string:
		if def, ok := named[ty]; ok {
			return avroDatum(t, def, v, named)
		}
		switch ty {
		case "int":
			n, err := v.(json.Number).Int64()
			if err != nil {
				t.Fatal(err)
			}
			return int32(n)
		case "long":
			n, err := v.(json.Number).Int64()
			if err != nil {
				t.Fatal(err)
			}
			return n
		case "bytes":
			b, err := base64.StdEncoding.DecodeString(v.(string))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		return v
	case map[string]any:
		switch ty["type"] {
		case "record":
			obj := v.(map[string]any)
			out := map[string]any{}
			for _, f := range ty["fields"].([]any) {
				fm := f.(map[string]any)
				out[fm["name"].(string)] = avroDatum(t, fm["type"], obj[fm["name"].(string)], named)
			}
			return out
		case "bytes":
			if ty["logicalType"] == "decimal" {
				b := avroDatum(t, "bytes", v, named).([]byte)
				n := new(big.Int).SetBytes(b)
				if len(b) > 0 && b[0]&0x80 != 0 {
					n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
				}
				scale, _ := ty["scale"].(json.Number).Int64()
				return scaled(n, int(scale))
			}
		}
		return avroDatum(t, ty["type"], v, named)
	}
	t.Fatalf("no datum of %v for %v", typ, v)
	return nil
}

// debeziumAvroEvent re-encodes a real JSON change event (schemas.enable)
// with the envelope schema, nil for a tombstone.
func debeziumAvroEvent(t testing.TB, schema string, value json.RawMessage) []byte {
	t.Helper()
	if value == nil {
		return nil
	}
	var parsed, typ any
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	if err := dec.Decode(&parsed); err != nil {
		t.Fatal(err)
	}
	dec = json.NewDecoder(strings.NewReader(schema))
	dec.UseNumber()
	if err := dec.Decode(&typ); err != nil {
		t.Fatal(err)
	}
	named := map[string]any{}
	nameRecords(typ, named)
	return encodeAvro(t, schema, avroDatum(t, typ, parsed.(map[string]any)["payload"], named))
}

// nameRecords adds the records Avro type typ defines to named, by the
// names the schema refers to them with.
func nameRecords(typ any, named map[string]any) {
	switch ty := typ.(type) {
	case []any:
		for _, b := range ty {
			nameRecords(b, named)
		}
	case map[string]any:
		if ty["type"] != "record" {
			return
		}
		named[ty["name"].(string)] = ty
		for _, f := range ty["fields"].([]any) {
			nameRecords(f.(map[string]any)["type"], named)
		}
	}
}

// debeziumAvroColumns read every kind of value the events hold: the row
// image's int, text, bigint, numeric(12,2) (Decimal), numeric
// (VariableScaleDecimal) and timestamptz (ZonedTimestamp), and the
// envelope's op, source.lsn, source.ts_ms and source.snapshot (an Enum).
var debeziumAvroColumns = []Column{
	{Name: "id", Type: "long", Required: true},
	{Name: "name", Type: "string"},
	{Name: "balance", Type: "long"},
	{Name: "amount", Type: "decimal(12,2)"},
	{Name: "price", Type: "decimal(38,6)"},
	{Name: "ts", Type: "timestamp"},
	{Name: "ts_text", Type: "string", Source: "ts"},
	{Name: "op", Type: "string", Source: "cdc.op"},
	{Name: "lsn", Type: "long", Source: "cdc.source.lsn"},
	{Name: "source_ms", Type: "long", Source: "cdc.source.ts_ms"},
	{Name: "snapshot", Type: "string", Source: "cdc.source.snapshot"},
}

// The re-encoded events map to exactly the rows their JSON originals
// map to through the JSON path (with schemas.enable): creates, snapshot
// reads and updates their after image, deletes their before image as a
// delete, tombstones skipped; decimals, VariableScaleDecimals and
// ZonedTimestamps alike; the envelope's fields reachable by cdc.<path>.
// Through a registry (the wire format) and a schema file (bare bodies).
func TestMapDebeziumAvroEvents(t *testing.T) {
	envelope := debeziumEnvelope(t)
	samples := debeziumSamples(t, debeziumEventsFile)
	jsonMapper, err := New(Config{Tombstones: true, CDC: CDCDebezium, Columns: debeziumAvroColumns}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, registry := range []bool{true, false} {
		cfg := Config{Format: Avro, Tombstones: true, CDC: CDCDebezium, Columns: debeziumAvroColumns}
		if registry {
			cfg.Registry = &schemaMap{schemas: map[int]string{7: envelope}}
		} else {
			cfg.SchemaFile = schemaFile(t, envelope)
		}
		m, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		deletes, skips := 0, 0
		for i, s := range samples {
			body := debeziumAvroEvent(t, envelope, s.Value)
			if registry && body != nil {
				body = wire(7, body)
			}
			var want, got Row
			werr := jsonMapper.Map(&Record{Value: s.Value}, &want)
			gerr := m.Map(&Record{Value: body}, &got)
			switch {
			case werr != nil && errors.Is(werr, ErrSkip) && errors.Is(gerr, ErrSkip):
				skips++
				continue
			case werr != nil || gerr != nil:
				t.Fatalf("registry %v, event %d: JSON %v, Avro %v", registry, i, werr, gerr)
			case got.Delete != want.Delete:
				t.Errorf("registry %v, event %d: delete %v, want %v", registry, i, got.Delete, want.Delete)
			}
			if got.Delete {
				deletes++
			}
			checkValues(t, got.Values, want.Values)
		}
		if deletes != 3 || skips != 3 {
			t.Errorf("registry %v: %d deletes and %d tombstones skipped, want 3 and 3", registry, deletes, skips)
		}
	}
}

// Spot checks of what the events mean, beyond agreeing with the JSON
// path: the delete of 3 is its before image; 12345678901234567890.123
// (a VariableScaleDecimal of scale 3) and -123.45 (a Decimal) exact;
// ZonedTimestamp "2026-01-01T05:00:00.500000Z" the instant.
func TestMapDebeziumAvroValues(t *testing.T) {
	envelope := debeziumEnvelope(t)
	samples := debeziumSamples(t, debeziumEventsFile)
	m, err := New(Config{Format: Avro, Tombstones: true, CDC: CDCDebezium, Columns: debeziumAvroColumns,
		Registry: &schemaMap{schemas: map[int]string{1: envelope}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mapped := func(i int) Row {
		var row Row
		if err := m.Map(&Record{Value: wire(1, debeziumAvroEvent(t, envelope, samples[i].Value))}, &row); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		return row
	}
	del := mapped(7)
	if !del.Delete || del.Values[0].Int64() != 3 || string(del.Values[1].ByteArray()) != "carol" || string(del.Values[7].ByteArray()) != "d" ||
		del.Values[8].Int64() != 26371944 || !del.Values[4].IsNull() {
		t.Errorf("the delete of 3: %v %v", del.Delete, del.Values)
	}
	again := mapped(9)
	checkValues(t, again.Values[3:6], []parquet.Value{parquet.Int64Value(-12345),
		fixedDecimal(16, "12345678901234567890123000"), parquet.Int64Value(1767243600500000)})
	if string(again.Values[10].ByteArray()) != "false" || string(mapped(0).Values[10].ByteArray()) != "first" {
		t.Errorf("source.snapshot: %q", again.Values[10].ByteArray())
	}
}

// Without columns, the table's are the envelope's row record's (the
// Value record before and after share), with Debezium's semantic types as
// what they mean: a numeric(12,2) decimal(12,2), a numeric decimal(38,18),
// a timestamptz timestamp. A new column of the source table (a new field
// of Value) adds its column while running.
func TestDebeziumAvroDerivedColumns(t *testing.T) {
	envelope := debeziumEnvelope(t)
	reg := &schemaMap{schemas: map[int]string{1: envelope}}
	m, err := New(Config{Format: Avro, Tombstones: true, CDC: CDCDebezium, Registry: reg, Schema: envelope, Evolve: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range m.Schema().Fields {
		got = append(got, f.Name+" "+f.Type.String())
	}
	if want := "id integer, name string, balance long, amount decimal(12,2), price decimal(38,18), ts timestamp"; strings.Join(got, ", ") != want {
		t.Fatalf("columns %s, want %s", strings.Join(got, ", "), want)
	}
	samples := debeziumSamples(t, debeziumEventsFile)
	var row Row
	if err := m.Map(&Record{Value: wire(1, debeziumAvroEvent(t, envelope, samples[9].Value))}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.Int32Value(3).Level(0, 1, 0), parquet.ByteArrayValue([]byte("carol-again")).Level(0, 1, 1),
		parquet.Int64Value(333).Level(0, 1, 2), parquet.Int64Value(-12345).Level(0, 1, 3),
		fixedDecimal(16, "12345678901234567890123000000000000000").Level(0, 1, 4), parquet.Int64Value(1767243600500000).Level(0, 1, 5)})

	// ALTER TABLE accounts ADD COLUMN note text: Debezium's Value gains
	// the field, as the converter adds an optional one.
	v2 := strings.Replace(envelope, `"connect.name":"dbzavro2.public.accounts.Value"`,
		`"connect.name":"dbzavro2.public.accounts.Value"`, 1)
	v2 = strings.Replace(v2, `{"name":"ts",`, `{"name":"note","type":["null","string"],"default":null},{"name":"ts",`, 1)
	reg.schemas[2] = v2
	err = m.Map(&Record{Value: wire(2, debeziumAvroEvent(t, envelope, samples[9].Value))}, &row)
	if sc, ok := errors.AsType[*SchemaChangeError](err); !ok || len(sc.Add) != 1 || sc.Add[0].Name != "note" || sc.Add[0].Type != "string" {
		t.Fatalf("a v2 event: %v, want a schema change adding note", err)
	}
}

// What is no change event of the table is a dead letter saying so, and a
// route that cannot read one is refused.
func TestMapDebeziumAvroRefuses(t *testing.T) {
	envelope := debeziumEnvelope(t)
	reg := &schemaMap{schemas: map[int]string{1: envelope, 2: readingSchema}}
	m, err := New(Config{Format: Avro, Tombstones: true, CDC: CDCDebezium, Registry: reg, Columns: debeziumAvroColumns[:3]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	samples := debeziumSamples(t, debeziumEventsFile)
	var row Row
	body := wire(1, debeziumAvroEvent(t, envelope, samples[3].Value))
	for value, want := range map[string]string{
		string(wire(2, []byte{0})):       "schema id 2: not a Debezium envelope: record deltaflow.test.Reading has no field after",
		string(body[:len(body)-3]):       "not Avro of the table's schema: truncated",
		string(append(body[:5:5], 2, 4)): "not Avro of the table's schema",
	} {
		err := m.Map(&Record{Value: []byte(value)}, &row)
		if me, ok := errors.AsType[*MapError](err); !ok || !strings.Contains(me.Reason, want) {
			t.Errorf("%q: %v, want a dead letter with %q", value, err, want)
		}
	}
	// A PostgreSQL event has no binlog position.
	binlog, err := New(Config{Format: Avro, Tombstones: true, CDC: CDCDebezium, Registry: reg,
		Columns: []Column{{Name: "id", Type: "long"}, {Name: "pos", Type: "long", Source: BinlogPositionSource}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = binlog.Map(&Record{Value: body}, &row)
	if me, ok := errors.AsType[*MapError](err); !ok || me.Reason != "pos: cdc.source.file is missing: cdc.source.binlog_position reads a MySQL or MariaDB change event" {
		t.Errorf("a binlog position of a PostgreSQL event: %v", err)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Format: Avro, Tombstones: true, CDC: CDCDebezium, Registry: reg, Columns: []Column{{Name: "x", Type: "long", Source: "cdc.after.id"}}},
			"an Avro change event's row image is read by plain paths (id)"},
		{Config{Format: Avro, Tombstones: true, CDC: CDCDebezium, SchemaFile: schemaFile(t, readingSchema), Columns: debeziumAvroColumns[:1]},
			"not a Debezium envelope"},
		{Config{Format: Protobuf, Tombstones: true, CDC: CDCDebezium, Registry: reg, Columns: debeziumAvroColumns[:1]},
			"reads JSON change events (the JSON converter's) or Avro ones"},
	} {
		if _, err := New(tc.cfg, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg.Columns, err, tc.want)
		}
	}
}

// A change event of a known schema id maps without allocating, deletes
// (whose before image is read again) too.
func TestMapDebeziumAvroDoesNotAllocate(t *testing.T) {
	m, recs := debeziumAvroBench(t)
	var row Row
	for _, r := range recs { // warm: the schema compiled, the row's buffers grown
		_ = m.Map(r, &row)
	}
	allocs := testing.AllocsPerRun(50, func() {
		for _, r := range recs {
			row.Arena.Reset()
			if err := m.Map(r, &row); err != nil && !errors.Is(err, ErrSkip) {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run of %d events, want 0", allocs, len(recs))
	}
}

// debeziumAvroBench is a registry Mapper of the real events' columns and
// the events, re-encoded in the wire format.
func debeziumAvroBench(t testing.TB) (*Mapper, []*Record) {
	envelope := debeziumEnvelope(t)
	m, err := New(Config{Format: Avro, Tombstones: true, CDC: CDCDebezium, Columns: debeziumAvroColumns,
		Registry: &schemaMap{schemas: map[int]string{1: envelope}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*Record
	for i, s := range debeziumSamples(t, debeziumEventsFile) {
		var value []byte
		if s.Value != nil {
			value = wire(1, debeziumAvroEvent(t, envelope, s.Value))
		}
		recs = append(recs, &Record{Value: value, Offset: int64(i)})
	}
	return m, recs
}

// A VariableScaleDecimal inside a struct column is a decimal leaf too,
// derived or declared: Debezium's record (as the real envelope schema
// has it) in a record of a plain Avro topic.
func TestMapAvroNestedVariableScaleDecimal(t *testing.T) {
	vsd := `{"type":"record","name":"VariableScaleDecimal","namespace":"io.debezium.data","fields":[{"name":"scale","type":"int"},{"name":"value","type":"bytes"}],"connect.doc":"Variable scaled decimal","connect.version":1,"connect.name":"io.debezium.data.VariableScaleDecimal"}`
	schema := `{"type":"record","name":"r","fields":[{"name":"m","type":{"type":"record","name":"M","fields":[{"name":"price","type":` + vsd + `}]}}]}`
	body := encodeAvro(t, schema, map[string]any{"m": map[string]any{"price": map[string]any{"scale": int32(3), "value": []byte{0xcf, 0xc7}}}})
	// -12.345: at scale 18 in 16 bytes, derived; rounded half up to -12.35 declared.
	derived := fmt.Sprintf("0:r0d1=%q", fixedDecimal(16, "-12345000000000000000").ByteArray())
	for typ, want := range map[string]string{"": derived, "struct<price: decimal(9,2)>": "0:r0d2=-1235"} {
		cfg := Config{Format: Avro, SchemaFile: schemaFile(t, schema)}
		if typ != "" {
			cfg.Columns = []Column{{Name: "m", Type: typ}}
		}
		m, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := typeDDL(m.Schema().Fields[0].Type); typ == "" && got != "struct<price: decimal(38,18)>" {
			t.Errorf("derived column m %s, want struct<price: decimal(38,18)>", got)
		}
		var row Row
		if err := m.Map(&Record{Value: body}, &row); err != nil {
			t.Fatal(err)
		}
		if got := leafText(t, row.Values[0]); got != want {
			t.Errorf("%q: %s, want %s", typ, got, want)
		}
	}
}
