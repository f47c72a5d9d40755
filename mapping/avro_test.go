package mapping

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/sim"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/avro"
)

// readingSchema is a flat record of every Avro type a column is derived
// from (the formats tests' too).
var readingSchema = func() string {
	b, err := os.ReadFile("testdata/reading.avsc")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// schemaFile writes an Avro schema where Config.SchemaFile names it.
func schemaFile(t testing.TB, schema string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "schema.avsc")
	if err := os.WriteFile(path, []byte(schema), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAvroColumns(t *testing.T) {
	m, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, readingSchema)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range m.Schema().Fields {
		got = append(got, f.Name+" "+f.Type.String()+map[bool]string{true: " null", false: ""}[f.Nullable])
	}
	want := []string{"id string", "kind string", "other_kind string null", "on boolean", "count integer", "total long",
		"ratio float", "power double null", "day date", "at timestamp", "at_us timestamp null", "tod integer", "uid string",
		"price decimal(9,2)", "amount decimal(18,4) null", "balance decimal(38,10)", "serial decimal(25,0)",
		"local_at timestamp_ntz", "local_us timestamp_ntz null"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("columns\n got %s\nwant %s", strings.Join(got, ", "), strings.Join(want, ", "))
	}
}

func TestAvroColumnsRefusesWhatNoColumnHolds(t *testing.T) {
	schema := `{"type": "record", "name": "R", "fields": [
		{"name": "ok", "type": "string"},
		{"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
		{"name": "wide", "type": {"type": "bytes", "logicalType": "decimal", "precision": 39, "scale": 2}},
		{"name": "nothing", "type": ["null"]},
		{"name": "tree", "type": {"type": "record", "name": "Node", "fields": [
			{"name": "label", "type": "string"},
			{"name": "children", "type": {"type": "array", "items": "Node"}}]}},
		{"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}}
	]}`
	_, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, schema), Key: "tables[1]"}, nil)
	if !errors.Is(err, ErrAvroTypeNotSupported) {
		t.Fatalf("New: %v, want ErrAvroTypeNotSupported", err)
	}
	for _, want := range []string{"tables[1].schema_file",
		"field wide: bytes with logical type decimal: decimal(39,2) has more digits than a decimal column holds (38)",
		"field nothing: union of null: no type but null",
		"field tree: field children: array: record Node is recursive (it holds itself): no column holds it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "field ok") || strings.Contains(err.Error(), "field price") || strings.Contains(err.Error(), "field local") {
		t.Errorf("error %q names a field that makes a column", err)
	}
}

func TestAvroConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no schema file", Config{Format: Avro}, "table.schema_file: the avro format needs"},
		{"missing file", Config{Format: Avro, SchemaFile: "/nonexistent.avsc"}, "table.schema_file: open /nonexistent.avsc"},
		{"bad schema", Config{Format: Avro, SchemaFile: schemaFile(t, `{"type": "record"}`)}, "table.schema_file: "},
		{"not a record", Config{Format: Avro, SchemaFile: schemaFile(t, `"string"`)}, "the schema is a string, not a record"},
		{"schema file for json", Config{SchemaFile: "x.avsc", Columns: DefaultConfig().Columns}, "table.schema_file: only the avro and protobuf formats read a schema file"},
		{"unknown format", Config{Format: "xml"}, `table.format: unknown format "xml"`},
		{"variant", Config{Format: Avro, SchemaFile: schemaFile(t, readingSchema), Columns: []Column{{Name: "v", Type: "variant", Source: "id"}}},
			"table.columns[0].type: a variant column holds JSON values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// encodeAvro encodes v with schema, as a producer with that schema does.
func encodeAvro(t testing.TB, schema string, v any) []byte {
	t.Helper()
	b, err := avro.MustParse(schema).Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMapAvro(t *testing.T) {
	m, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, readingSchema)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 6, 22, 9, 15, 30, 123_000_000, time.UTC)
	full := map[string]any{"id": "plug-1", "kind": "PLUG", "other_kind": "DOOR", "on": true, "count": int32(-7), "total": int64(1) << 40,
		"ratio": float32(0.5), "power": 1234.5, "day": at, "at": at, "at_us": at.Add(456 * time.Microsecond),
		"tod": 30 * time.Second, "uid": "0b9e2f3a-5c4d-4e6f-8a7b-9c0d1e2f3a4b", "price": rat("-12.34"),
		"amount": rat("12345678901234.5678"), "balance": rat("-1234567890123456789012345678.0123456789"), "serial": rat("1"),
		// A local timestamp's wall clock, whatever the time.Time's zone (as twmb/avro encodes one).
		"local_at": time.Date(2026, 6, 22, 10, 15, 30, 123_000_000, time.FixedZone("CEST", 2*3600)),
		"local_us": time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC)}
	var row Row
	if err := m.Map(&Record{Value: encodeAvro(t, readingSchema, full)}, &row); err != nil {
		t.Fatal(err)
	}
	want := []parquet.Value{parquet.ByteArrayValue([]byte("plug-1")), parquet.ByteArrayValue([]byte("PLUG")),
		parquet.ByteArrayValue([]byte("DOOR")), parquet.BooleanValue(true), parquet.Int32Value(-7), parquet.Int64Value(1 << 40),
		parquet.FloatValue(0.5), parquet.DoubleValue(1234.5), parquet.Int32Value(int32(at.Unix() / 86400)),
		parquet.Int64Value(at.UnixMicro()), parquet.Int64Value(at.UnixMicro() + 456), parquet.Int32Value(30_000),
		parquet.ByteArrayValue([]byte("0b9e2f3a-5c4d-4e6f-8a7b-9c0d1e2f3a4b")), parquet.Int32Value(-1234),
		parquet.Int64Value(123456789012345678), fixedDecimal(16, "-12345678901234567890123456780123456789"), fixedDecimal(11, "1"),
		parquet.Int64Value(time.Date(2026, 6, 22, 10, 15, 30, 123_000_000, time.UTC).UnixMicro()),
		parquet.Int64Value(time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC).UnixMicro())}
	checkValues(t, row.Values, want)

	// The nullable unions' null branches are nulls.
	full["other_kind"], full["power"], full["at_us"], full["amount"], full["local_us"] = nil, nil, nil, nil, nil
	if err := m.Map(&Record{Value: encodeAvro(t, readingSchema, full)}, &row); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{2, 7, 10, 14, 18} {
		if !row.Values[i].IsNull() {
			t.Errorf("column %d: %v, want null", i, row.Values[i])
		}
	}
}

// scaled is the decimal unscaled×10^-scale, as twmb/avro encodes one.
func scaled(unscaled *big.Int, scale int) *big.Rat {
	return new(big.Rat).SetFrac(unscaled, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
}

// fixedDecimal is the FIXED_LEN_BYTE_ARRAY value of size bytes of a
// decimal's unscaled integer (decimal text).
func fixedDecimal(size int, unscaled string) parquet.Value {
	n, ok := new(big.Int).SetString(unscaled, 10)
	if !ok {
		panic(unscaled)
	}
	if n.Sign() < 0 {
		n.Add(n, new(big.Int).Lsh(big.NewInt(1), uint(8*size)))
	}
	return parquet.FixedLenByteArrayValue(n.FillBytes(make([]byte, size)))
}

// checkValues compares a row's values with want, by kind and value.
func checkValues(t *testing.T, got, want []parquet.Value) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Kind() != want[i].Kind() || !parquet.Equal(got[i], want[i]) {
			t.Errorf("column %d: %v (%v), want %v (%v)", i, got[i], got[i].Kind(), want[i], want[i].Kind())
		}
	}
}

// sensorSchema is the sensor event as an Avro producer would write it.
const sensorSchema = sim.AvroSchema

// sensorAvroConfig maps sensorSchema's records to the Spark job's columns
// (raw_payload left out: Avro has no payload string).
func sensorAvroConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.Format, cfg.SchemaFile = Avro, schemaFile(t, sensorSchema)
	cfg.Columns = slicesDeleteColumn(cfg.Columns, "raw_payload")
	return cfg
}

func slicesDeleteColumn(cols []Column, name string) []Column {
	var out []Column
	for _, c := range cols {
		if c.Name != name {
			out = append(out, c)
		}
	}
	return out
}

// sensorAvroMix is sensorMix's records as Avro of sensorSchema.
func sensorAvroMix(t testing.TB, n int) []*Record {
	rng := rand.New(rand.NewPCG(1, 2))
	schema := avro.MustParse(sensorSchema)
	base := time.Date(2026, 6, 22, 9, 15, 30, 0, time.UTC)
	recs := make([]*Record, n)
	for i := range recs {
		at := base.Add(time.Duration(rng.Int64N(int64(48 * time.Hour)))).Truncate(time.Microsecond)
		ev := map[string]any{"ingested_at": at}
		if i%2 == 0 {
			ev["device_id"], ev["device_type"] = "smart-plug-"+string(rune('a'+rng.IntN(20))), "smart_plug"
			ev["payload"] = map[string]any{"power": rng.Float64() * 2000, "voltage": 220 + rng.Float64()*20,
				"current": rng.Float64() * 10, "energy": rng.Float64() * 100, "state": []string{"ON", "OFF"}[rng.IntN(2)],
				"linkquality": int32(rng.IntN(256))}
		} else {
			ev["device_id"], ev["device_type"] = "door-sensor-"+string(rune('a'+rng.IntN(20))), "door_window"
			ev["payload"] = map[string]any{"contact": rng.IntN(2) == 0, "battery": int32(rng.IntN(101)), "linkquality": int32(rng.IntN(256))}
		}
		v, err := schema.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = &Record{Topic: "sensor-events", Partition: int32(i % 4), Offset: int64(i), Timestamp: base, Value: v}
	}
	return recs
}

func TestMapAvroSensor(t *testing.T) {
	m, err := New(sensorAvroConfig(t), DefaultPartitionColumns)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 6, 22, 23, 59, 59, 999_999_000, time.UTC)
	ev := map[string]any{"device_id": "plug-7", "device_type": "smart_plug", "ingested_at": at,
		"payload": map[string]any{"power": 12.5, "state": "ON", "linkquality": int32(80)}}
	var row Row
	if err := m.Map(&Record{Value: encodeAvro(t, sensorSchema, ev)}, &row); err != nil {
		t.Fatal(err)
	}
	if got := string(row.Key); got != "device_type=smart_plug/event_date=2026-06-22" {
		t.Errorf("routing key %q", got)
	}
	// device_id, event_time, linkquality, contact, battery, power, voltage,
	// current, energy, plug_state, processed_at (not compared).
	want := []parquet.Value{parquet.ByteArrayValue([]byte("plug-7")), parquet.Int64Value(at.UnixMicro()), parquet.Int32Value(80),
		parquet.Value{}, parquet.Value{}, parquet.DoubleValue(12.5), parquet.Value{}, parquet.Value{}, parquet.Value{},
		parquet.ByteArrayValue([]byte("ON"))}
	checkValues(t, row.Values[:len(want)], want)
}

func TestMapAvroRejects(t *testing.T) {
	m, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, readingSchema),
		Columns: []Column{{Name: "count", Type: "integer", Source: "id"}, {Name: "total", Type: "integer", Source: "total"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	good := map[string]any{"id": "x", "kind": "PLUG", "on": false, "count": int32(1), "total": int64(1) << 40, "ratio": float32(1),
		"day": time.Unix(0, 0), "at": time.Unix(0, 0), "tod": time.Duration(0), "uid": "u", "price": rat("0"), "balance": rat("0"),
		"serial": rat("0"), "local_at": time.Unix(0, 0)}
	body := encodeAvro(t, readingSchema, good)
	for _, tc := range []struct {
		name  string
		value []byte
		want  string
	}{
		{"truncated", body[:len(body)-3], "not Avro of the table's schema"},
		{"trailing bytes", append(append([]byte(nil), body...), 1, 2), "not Avro of the table's schema: 2 bytes after the record"},
		{"huge length", []byte{0xfe, 0xff, 0xff, 0xff, 0x0f}, "not Avro of the table's schema"},
		{"string for integer", body, "count: expected number, got string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var row Row
			err := m.Map(&Record{Value: tc.value}, &row)
			if _, isMapErr := errors.AsType[*MapError](err); !isMapErr || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Map: %v, want a MapError with %q", err, tc.want)
			}
		})
	}
	// Permissive: the integer that does not fit is null, as with JSON.
	m, err = New(Config{Format: Avro, SchemaFile: schemaFile(t, readingSchema), Mode: Permissive,
		Columns: []Column{{Name: "total", Type: "integer", Source: "total"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	if err := m.Map(&Record{Value: body}, &row); err != nil || !row.Values[0].IsNull() {
		t.Errorf("permissive: %v, %v; want a null", err, row.Values)
	}
}

func BenchmarkMapAvroSensor(b *testing.B) {
	m, err := New(sensorAvroConfig(b), DefaultPartitionColumns)
	if err != nil {
		b.Fatal(err)
	}
	benchMap(b, m, sensorAvroMix(b, 4096))
}

// BenchmarkMapRegistryAvroSensor is BenchmarkMapAvroSensor's records in
// the registry's wire format: the header and the writer schema's lookup
// on top of the walk.
func BenchmarkMapRegistryAvroSensor(b *testing.B) {
	cfg := sensorAvroConfig(b)
	cfg.SchemaFile, cfg.Schema = "", sensorSchema
	cfg.Registry = &schemaMap{schemas: map[int]string{7: sensorSchema}}
	m, err := New(cfg, DefaultPartitionColumns)
	if err != nil {
		b.Fatal(err)
	}
	recs := sensorAvroMix(b, 4096)
	for _, r := range recs {
		r.Value = wire(7, r.Value)
	}
	benchMap(b, m, recs)
}

// TestMapAvroAgreesWithTheEncoder: records of random values of every type
// readingSchema has, encoded by twmb/avro, map to exactly the values
// encoded.
func TestMapAvroAgreesWithTheEncoder(t *testing.T) {
	m, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, readingSchema)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	schema := avro.MustParse(readingSchema)
	runes := []rune("abz é€😀\x00\"\\")
	str := func() string {
		r := make([]rune, rng.IntN(20))
		for i := range r {
			r[i] = runes[rng.IntN(len(runes))]
		}
		return string(r)
	}
	var row Row
	for range 2000 {
		at := time.UnixMilli(rng.Int64N(253402300799999-(-62135596800000)) - 62135596800000).UTC()
		day := at.Truncate(24 * time.Hour)
		kinds := []string{"PLUG", "DOOR"}
		// Unscaled values of every size their precision allows, either sign.
		unscaled := func(digits int) *big.Int {
			b := []byte{"+-"[rng.IntN(2)]}
			for range 1 + rng.IntN(digits) {
				b = append(b, byte('0'+rng.IntN(10)))
			}
			n, _ := new(big.Int).SetString(string(b), 10)
			return n
		}
		price, balance, serial := unscaled(9), unscaled(38), unscaled(25)
		rec := map[string]any{"id": str(), "kind": kinds[rng.IntN(2)], "on": rng.IntN(2) == 0, "count": rng.Int32(),
			"total": rng.Int64() - rng.Int64(), "ratio": rng.Float32() * 1e6, "day": day, "at": at,
			"tod": time.Duration(rng.IntN(86_400_000)) * time.Millisecond, "uid": str(), "price": scaled(price, 2),
			"balance": scaled(balance, 10), "serial": scaled(serial, 0), "local_at": at}
		want := []parquet.Value{parquet.ByteArrayValue([]byte(rec["id"].(string))), parquet.ByteArrayValue([]byte(rec["kind"].(string))),
			{}, parquet.BooleanValue(rec["on"].(bool)), parquet.Int32Value(rec["count"].(int32)), parquet.Int64Value(rec["total"].(int64)),
			parquet.FloatValue(rec["ratio"].(float32)), {}, parquet.Int32Value(int32(floorDiv(day.UnixMicro(), microsDay))),
			parquet.Int64Value(at.UnixMicro()), {}, parquet.Int32Value(int32(rec["tod"].(time.Duration).Milliseconds())),
			parquet.ByteArrayValue([]byte(rec["uid"].(string))), parquet.Int32Value(int32(price.Int64())), {},
			fixedDecimal(16, balance.String()), fixedDecimal(11, serial.String()), parquet.Int64Value(at.UnixMicro()), {}}
		if rng.IntN(2) == 0 {
			amount := unscaled(18)
			rec["amount"], want[14] = scaled(amount, 4), parquet.Int64Value(amount.Int64())
			rec["other_kind"], want[2] = "DOOR", parquet.ByteArrayValue([]byte("DOOR"))
			x := rng.NormFloat64() * 1e300
			rec["power"], want[7] = x, parquet.DoubleValue(x)
			us := at.Add(time.Duration(rng.IntN(1000)) * time.Microsecond)
			rec["at_us"], want[10] = us, parquet.Int64Value(us.UnixMicro())
			rec["local_us"], want[18] = us, parquet.Int64Value(us.UnixMicro())
		}
		body, err := schema.Encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Map(&Record{Value: body}, &row); err != nil {
			t.Fatalf("%v: %v", rec, err)
		}
		checkValues(t, row.Values, want)
		if t.Failed() {
			t.Fatalf("record %v", rec)
		}
	}
}

// containersSchema has the shapes a path can go through (a record, a map,
// a nullable record) and those it cannot (an array, a recursive record).
const containersSchema = `{"type": "record", "name": "C", "fields": [
	{"name": "attrs", "type": {"type": "map", "values": "double"}},
	{"name": "tags", "type": {"type": "array", "items": "string"}},
	{"name": "maybe", "type": ["null", {"type": "record", "name": "M", "fields": [
		{"name": "x", "type": "long"}, {"name": "skipped", "type": {"type": "array", "items": "M"}}]}]},
	{"name": "list", "type": ["null", {"type": "record", "name": "Node", "fields": [
		{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}]},
	{"name": "after", "type": "string"}
]}`

func TestMapAvroPaths(t *testing.T) {
	cols := []Column{{Name: "temp", Type: "double", Source: "attrs.temp"}, {Name: "x", Type: "long", Source: "maybe.x"},
		{Name: "v", Type: "integer", Source: "list.v"}, {Name: "after", Type: "string"}, {Name: "attrs", Type: "string"},
		{Name: "v2", Type: "integer", Source: "list.next.v"}}
	m, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, containersSchema), Columns: cols, Mode: Permissive}, nil)
	if err != nil {
		t.Fatal(err)
	}
	schema := avro.MustParse(containersSchema)
	node := func(v int32, next any) map[string]any { return map[string]any{"v": v, "next": next} }
	for _, tc := range []struct {
		name string
		rec  map[string]any
		want []parquet.Value
	}{
		{"all there", map[string]any{"attrs": map[string]float64{"hum": 40, "temp": 21.5}, "tags": []string{"a", "b"},
			"maybe": map[string]any{"x": int64(9), "skipped": []any{map[string]any{"x": int64(1), "skipped": []any{}}}},
			"list":  node(1, node(2, nil)), "after": "end"},
			[]parquet.Value{parquet.DoubleValue(21.5), parquet.Int64Value(9), parquet.Int32Value(1), parquet.ByteArrayValue([]byte("end")), {}, parquet.Int32Value(2)}},
		{"nulls and no key", map[string]any{"attrs": map[string]float64{"hum": 40}, "tags": []string{}, "maybe": nil, "list": nil, "after": ""},
			[]parquet.Value{{}, {}, {}, parquet.ByteArrayValue(nil), {}, {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := schema.Encode(tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			var row Row
			if err := m.Map(&Record{Value: body}, &row); err != nil {
				t.Fatal(err)
			}
			checkValues(t, row.Values, tc.want)
		})
	}
	for _, tc := range []struct{ source, want string }{
		{"maybe.y", `table.columns[0].source: maybe.y: no field "y" in the schema's record M`},
		{"after.z", "table.columns[0].source: after is a string in the schema"},
		{"tags.a", "table.columns[0].source: tags is a array in the schema"},
		{"list.next.w", `table.columns[0].source: list.next.w: no field "w" in the schema's record Node`},
	} {
		_, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, containersSchema), Columns: []Column{{Name: "c", Type: "string", Source: tc.source}}}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("source %s: %v, want %q", tc.source, err, tc.want)
		}
	}
}

// TestMapAvroHostile: bodies built to make a decoder loop, recurse or
// allocate without end are dead letters, quickly.
func TestMapAvroHostile(t *testing.T) {
	schema := `{"type": "record", "name": "H", "fields": [
		{"name": "nulls", "type": {"type": "array", "items": "null"}},
		{"name": "list", "type": ["null", {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}]},
		{"name": "s", "type": "string"}]}`
	m, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, schema), Columns: []Column{{Name: "s", Type: "string"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	varint := func(n int64) []byte { return binary.AppendVarint(nil, n) }
	deep := []byte{0, 2} // no nulls; list: the Node branch
	for range 1000 {
		deep = append(deep, 2) // next: another Node
	}
	for _, tc := range []struct {
		name  string
		value []byte
		want  string
	}{
		{"a billion nulls", append(varint(1<<40), 0), "more items than the record's bytes allow"},
		{"a block size of nulls", append(append(varint(-(1<<40)), varint(0)...), 0), "more items than the record's bytes allow"},
		{"deep", deep, "nesting too deep"},
		{"long varint", bytes.Repeat([]byte{0xff}, 11), "varint longer than 10 bytes"},
		{"string past the end", []byte{0, 0, 0x80, 0x80, 0x04}, "length past the record's end"},
		{"negative length", append([]byte{0, 0}, varint(-5)...), "length past the record's end"},
		{"union branch", []byte{0, 8}, "union branch out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var row Row
			err := m.Map(&Record{Value: tc.value}, &row)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Map: %v, want %q", err, tc.want)
			}
		})
	}
	// Every prefix of a good record is truncated, never a panic.
	body := encodeAvro(t, schema, map[string]any{"nulls": []any{nil, nil}, "list": map[string]any{"next": map[string]any{"next": nil}}, "s": "end"})
	for i := range body {
		var row Row
		if err := m.Map(&Record{Value: body[:i]}, &row); err == nil {
			t.Errorf("prefix %d of %d mapped", i, len(body))
		}
	}
}

func TestMapAvroDoesNotAllocate(t *testing.T) {
	recs := sensorAvroMix(t, 64)
	m, err := New(sensorAvroConfig(t), DefaultPartitionColumns)
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	row.Arena = new(Arena)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		if err := m.Map(recs[i%len(recs)], &row); err != nil {
			t.Fatal(err)
		}
		if i++; i%len(recs) == 0 {
			row.Arena.Reset()
		}
	})
	if allocs != 0 {
		t.Errorf("Map allocates %.1f times per Avro record", allocs)
	}
}

// FuzzMapAvro feeds arbitrary bodies to mappings of schemas with every
// shape: Map must never panic and must fail only with a *MapError.
func FuzzMapAvro(f *testing.F) {
	reading, err := New(Config{Format: Avro, SchemaFile: schemaFile(f, readingSchema)}, nil)
	if err != nil {
		f.Fatal(err)
	}
	containers, err := New(Config{Format: Avro, SchemaFile: schemaFile(f, containersSchema), Columns: []Column{
		{Name: "temp", Type: "double", Source: "attrs.temp"}, {Name: "x", Type: "long", Source: "maybe.x"},
		{Name: "v", Type: "integer", Source: "list.v"}, {Name: "after", Type: "string"}}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(encodeAvro(f, containersSchema, map[string]any{"attrs": map[string]float64{"temp": 1}, "tags": []string{"a"},
		"maybe": map[string]any{"x": int64(1), "skipped": []any{}}, "list": map[string]any{"v": int32(1), "next": nil}, "after": "z"}), true)
	f.Add(encodeAvro(f, readingSchema, map[string]any{"id": "x", "kind": "PLUG", "on": true, "count": int32(1), "total": int64(2),
		"ratio": float32(1), "day": time.Unix(0, 0), "at": time.Unix(0, 0), "tod": time.Duration(0), "uid": "u", "price": rat("1.5"),
		"amount": rat("-2"), "balance": rat("-0.0000000001"), "serial": rat("7"), "local_at": time.Unix(0, 0)}), false)
	f.Fuzz(func(t *testing.T, value []byte, useContainers bool) {
		m := reading
		if useContainers {
			m = containers
		}
		var row Row
		if err := m.Map(&Record{Value: value}, &row); err != nil {
			if _, ok := errors.AsType[*MapError](err); !ok {
				t.Fatalf("error %v is not a MapError", err)
			}
		}
	})
}

func TestParseAvroSchemaErrors(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Nope"}]}`, `field a: unknown type "Nope"`},
		{`{"type": "record", "name": "R", "fields": [{"name": "a", "type": ["null", ["int"]]}]}`, "a union directly inside a union"},
		{`{"type": "record", "fields": []}`, "record without a name"},
		{`{"type": "record", "name": "R"}`, "record R without fields"},
		{`{"type": "enum", "name": "E", "symbols": []}`, "enum E without symbols"},
		{`{"type": "fixed", "name": "F"}`, "fixed F without a size"},
		{`{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "int"}]}`, "field a twice"},
		{`{"type": "record", "name": "R", "fields": [{"name": "a", "type": {"type": "enum", "name": "R", "symbols": ["X"]}}]}`, "type R defined twice"},
		{`{"type": "array"}`, `array without "items"`},
		{`{"name": "x"}`, `an object schema without "type"`},
		{`[1]`, "a schema is a string, a list or an object"},
		{`{"type": `, "not JSON"},
	} {
		if _, err := parseAvroSchema([]byte(tc.schema)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.schema, err, tc.want)
		}
	}
	// Names resolve in their namespace: a short name inside it, the full
	// name anywhere.
	s, err := parseAvroSchema([]byte(`{"type": "record", "name": "R", "namespace": "a.b", "fields": [
		{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X"]}},
		{"name": "short", "type": "E"},
		{"name": "full", "type": "a.b.E"},
		{"name": "other", "type": {"type": "record", "name": "c.O", "fields": [{"name": "again", "type": "a.b.E"}, {"name": "self", "type": ["null", "O"]}]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	f := s.root.fields
	if f[1].typ != f[0].typ || f[2].typ != f[0].typ || f[3].typ.fields[0].typ != f[0].typ || f[3].typ.fields[1].typ.branches[1] != f[3].typ {
		t.Errorf("references do not resolve to their definitions: %+v", f)
	}
	if s.root.name != "a.b.R" || f[3].typ.name != "c.O" {
		t.Errorf("full names %q and %q, want a.b.R and c.O", s.root.name, f[3].typ.name)
	}
}
