package mapping

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// testdata/debezium/events-temporal-schemas.jsonl: the real Debezium's
// events of a table of Postgres' date, timestamp, timestamp(3) and
// timestamptz (README.md): io.debezium.time.Date, MicroTimestamp,
// Timestamp and ZonedTimestamp.
const debeziumTemporalFile = "testdata/debezium/events-temporal-schemas.jsonl"

// debeziumTemporalColumns read each temporal field into every column type
// it casts into.
var debeziumTemporalColumns = []Column{
	{Name: "id", Type: "long", Required: true},
	{Name: "day", Type: "date"},
	{Name: "day_ts", Type: "timestamp", Source: "day"},
	{Name: "day_ntz", Type: "timestamp_ntz", Source: "day"},
	{Name: "day_int", Type: "integer", Source: "day"},
	{Name: "at", Type: "timestamp"},
	{Name: "at_ntz", Type: "timestamp_ntz", Source: "at"},
	{Name: "at_date", Type: "date", Source: "at"},
	{Name: "at_long", Type: "long", Source: "at"},
	{Name: "at3", Type: "timestamp_ntz"},
	{Name: "at3_long", Type: "long", Source: "at3"},
	{Name: "atz", Type: "timestamp"},
}

// debeziumTemporalRow is what debeziumTemporalColumns hold of a row of
// the events table (at: µs, at3: ms, as Debezium writes them).
func debeziumTemporalRow(id int64, day, atMicros, at3Millis, atzMicros int64) []parquet.Value {
	return []parquet.Value{parquet.Int64Value(id),
		parquet.Int32Value(int32(day)), parquet.Int64Value(day * microsDay), parquet.Int64Value(day * microsDay), parquet.Int32Value(int32(day)),
		parquet.Int64Value(atMicros), parquet.Int64Value(atMicros), parquet.Int32Value(int32(floorDiv(atMicros, microsDay))), parquet.Int64Value(atMicros),
		parquet.Int64Value(at3Millis * 1000), parquet.Int64Value(at3Millis),
		parquet.Int64Value(atzMicros)}
}

func micros(y int, mo time.Month, d, h, mi, s, us int) int64 {
	return time.Date(y, mo, d, h, mi, s, us*1000, time.UTC).UnixMicro()
}

// debeziumTemporalWants are the rows of the captured events: the snapshot
// of 1, 2 and 3 (all null), the insert of 4 (0001-01-01 and the last
// millisecond of 9999), the update of 1, the delete of 2 (its before
// image); nil: the tombstone.
var debeziumTemporalWants = [][]parquet.Value{
	debeziumTemporalRow(1, 20626, micros(2026, 6, 22, 10, 15, 30, 123456), micros(2026, 6, 22, 10, 15, 30, 123000)/1000,
		micros(2026, 6, 22, 8, 15, 30, 123456)),
	debeziumTemporalRow(2, -1, -1, micros(1900, 1, 1, 0, 0, 0, 0)/1000, micros(1969, 12, 31, 23, 59, 59, 0)),
	nil,
	debeziumTemporalRow(4, -719162, minMicros, micros(9999, 12, 31, 23, 59, 59, 999000)/1000, micros(2000, 2, 29, 12, 0, 0, 0)),
	debeziumTemporalRow(1, 20793, micros(2026, 12, 6, 7, 30, 0, 500000), micros(2026, 6, 22, 10, 15, 30, 123000)/1000,
		micros(2026, 6, 22, 8, 15, 30, 123456)),
	debeziumTemporalRow(2, -1, -1, micros(1900, 1, 1, 0, 0, 0, 0)/1000, micros(1969, 12, 31, 23, 59, 59, 0)),
	nil,
}

// checkTemporal compares a mapped row of the events table with want (nil:
// every column but id null).
func checkTemporal(t *testing.T, what string, row Row, want []parquet.Value) {
	t.Helper()
	if want == nil {
		for i, v := range row.Values[1:] {
			if !v.IsNull() {
				t.Errorf("%s: %s %v, want null", what, debeziumTemporalColumns[i+1].Name, v)
			}
		}
		return
	}
	for i, w := range want {
		if g := row.Values[i]; g.IsNull() || g.Int64() != w.Int64() {
			t.Errorf("%s: %s %v, want %v", what, debeziumTemporalColumns[i].Name, g, w)
		}
	}
}

// With schemas.enable a number of Debezium's temporal types casts into a
// date, timestamp or timestamp_ntz column: a date its days, a timestamp
// (without time zone) its wall clock read as UTC, into a date its UTC
// date; a long or int column still takes the number as written.
func TestMapDebeziumTemporalJSON(t *testing.T) {
	m, err := New(Config{KeyFormat: JSON, Tombstones: true, CDC: CDCDebezium, Columns: debeziumTemporalColumns}, nil)
	if err != nil {
		t.Fatal(err)
	}
	samples := debeziumSamples(t, debeziumTemporalFile)
	if len(samples) != len(debeziumTemporalWants) {
		t.Fatalf("%d samples, want %d", len(samples), len(debeziumTemporalWants))
	}
	for i, s := range samples {
		row, ok := mapSample(t, m, i, &Record{Key: s.Key, Value: s.Value, Offset: s.Offset}, s.Value == nil)
		if !ok {
			continue
		}
		if row.Delete != (i == 5) {
			t.Errorf("#%d: delete %v", i, row.Delete)
		}
		want := debeziumTemporalWants[i]
		if i == 2 {
			if row.Values[0].Int64() != 3 {
				t.Errorf("#2: id %v, want 3", row.Values[0])
			}
			want = nil
		}
		checkTemporal(t, fmt.Sprintf("#%d", i), row, want)
	}
	var row Row
	rec := &Record{Key: samples[0].Key, Value: samples[0].Value}
	_ = m.Map(rec, &row) // warm: the row's buffers grown
	if allocs := testing.AllocsPerRun(50, func() {
		row.Arena.Reset()
		_ = m.Map(rec, &row)
	}); allocs != 0 {
		t.Errorf("%v allocations per event, want 0", allocs)
	}
}

// Debezium's NanoTimestamp and Kafka Connect's Date and Timestamp (an
// instant) read the same way; a value outside years 0001–9999 is a cast
// failure (mode decides); without schemas.enable, or of a field whose
// schema names no temporal type (a time of day, MicroTime), a number is
// no date or timestamp, as before.
func TestMapDebeziumTemporalJSONKinds(t *testing.T) {
	event := func(schemas bool, name, typ, value string) []byte {
		payload := `{"op": "c", "before": null, "after": {"id": 1, "v": ` + value + `}}`
		if !schemas {
			return []byte(payload)
		}
		field := `{"type": "` + typ + `", "optional": true, "name": "` + name + `", "version": 1, "field": "v"}`
		row := func(image string) string {
			return `{"type": "struct", "fields": [{"type": "int32", "optional": false, "field": "id"}, ` + field + `], "optional": true, "field": "` + image + `"}`
		}
		return []byte(`{"schema": {"type": "struct", "fields": [` + row("before") + `, ` + row("after") + `], "name": "pg.public.t.Envelope"}, "payload": ` + payload + `}`)
	}
	cols := []Column{{Name: "id", Type: "long", Required: true}, {Name: "ts", Type: "timestamp", Source: "v"},
		{Name: "ntz", Type: "timestamp_ntz", Source: "v"}, {Name: "d", Type: "date", Source: "v"}}
	strict, err := New(Config{Tombstones: true, CDC: CDCDebezium, Columns: cols}, nil)
	if err != nil {
		t.Fatal(err)
	}
	permissive, err := New(Config{Tombstones: true, CDC: CDCDebezium, Columns: cols, Mode: Permissive}, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := micros(2026, 6, 22, 10, 15, 30, 123456)
	for _, c := range []struct {
		name, typ, value string
		us               int64
	}{
		{"io.debezium.time.NanoTimestamp", "int64", "1782123330123456789", at},
		{"io.debezium.time.NanoTimestamp", "int64", "-1", -1}, // floored: 1969-12-31T23:59:59.999999
		{"io.debezium.time.Timestamp", "int64", "1782123330123", at - 456},
		{"org.apache.kafka.connect.data.Timestamp", "int64", "1782123330123", at - 456},
		{"io.debezium.time.MicroTimestamp", "int64", "-62135596800000000", minMicros},
		{"io.debezium.time.Date", "int32", "-719162", minMicros},
		{"org.apache.kafka.connect.data.Date", "int32", "20626", micros(2026, 6, 22, 0, 0, 0, 0)},
	} {
		var row Row
		if err := strict.Map(&Record{Value: event(true, c.name, c.typ, c.value)}, &row); err != nil {
			t.Errorf("%s %s: %v", c.name, c.value, err)
			continue
		}
		if row.Values[1].Int64() != c.us || row.Values[2].Int64() != c.us || int64(row.Values[3].Int32()) != floorDiv(c.us, microsDay) {
			t.Errorf("%s %s: %v %v %v, want %d µs", c.name, c.value, row.Values[1], row.Values[2], row.Values[3], c.us)
		}
	}
	for value, want := range map[string]string{
		string(event(true, "io.debezium.time.MicroTimestamp", "int64", "-62135596800000001")): "ts: timestamp out of range (years 0001-9999)",
		string(event(true, "io.debezium.time.MicroTimestamp", "int64", "253402300800000000")): "ts: timestamp out of range (years 0001-9999)",
		string(event(true, "io.debezium.time.Timestamp", "int64", "9223372036854775")):        "ts: timestamp out of range (years 0001-9999)", // ×1000 overflows
		string(event(true, "io.debezium.time.Date", "int32", "2932897")):                      "ts: timestamp out of range (years 0001-9999)", // 10000-01-01
		string(event(true, "io.debezium.time.Date", "int32", "1.5")):                          `ts: cannot cast "1.5" to timestamp`,
		string(event(true, "io.debezium.time.MicroTime", "int64", "36930123456")):             "ts: expected string, got number",
		string(event(false, "", "", "1782123330123456")):                                      "ts: expected string, got number",
	} {
		var row Row
		err := strict.Map(&Record{Value: []byte(value)}, &row)
		if me, ok := errors.AsType[*MapError](err); !ok || me.Reason != want {
			t.Errorf("%s: %v, want a dead letter %q", value, err, want)
		}
		if err := permissive.Map(&Record{Value: []byte(value)}, &row); err != nil || !row.Values[1].IsNull() || !row.Values[2].IsNull() || !row.Values[3].IsNull() {
			t.Errorf("permissive %s: %v %v, want the columns null", value, err, row.Values)
		}
	}
}

// debeziumTemporalEnvelope is the envelope schema of the events table as
// the Avro converter makes it from Debezium's Connect schema: the real
// converter's envelope of accounts (debeziumEnvelopeFile) with the Value
// record's fields those of events, each temporal type an int or long with
// its connect.name.
func debeziumTemporalEnvelope(t testing.TB) string {
	envelope := debeziumEnvelope(t)
	start := strings.Index(envelope, `"fields":[{"name":"id"`)
	end := strings.Index(envelope, `],"connect.name":"dbzavro2.public.accounts.Value"`)
	if start < 0 || end < 0 {
		t.Fatal("the envelope's Value record is not where the test looks")
	}
	semantic := func(name, typ, connect string) string {
		return `{"name": "` + name + `", "type": ["null", {"type": "` + typ + `", "connect.version": 1, "connect.name": "` + connect + `"}], "default": null}`
	}
	return envelope[:start] + `"fields": [{"name": "id", "type": "int"}, ` +
		semantic("day", "int", "io.debezium.time.Date") + ", " +
		semantic("at", "long", "io.debezium.time.MicroTimestamp") + ", " +
		semantic("at3", "long", "io.debezium.time.Timestamp") + ", " +
		semantic("atz", "string", "io.debezium.time.ZonedTimestamp") + envelope[end:]
}

// The same events in Avro: declared columns read them as the JSON ones
// do, and without columns a date is a date column and Debezium's
// Timestamp kinds timestamp_ntz (a timestamp without time zone).
func TestMapDebeziumTemporalAvro(t *testing.T) {
	envelope := debeziumTemporalEnvelope(t)
	samples := debeziumSamples(t, debeziumTemporalFile)
	reg := &schemaMap{schemas: map[int]string{1: envelope}}
	m, err := New(Config{Format: Avro, Tombstones: true, CDC: CDCDebezium, Columns: debeziumTemporalColumns, Registry: reg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	derived, err := New(Config{Format: Avro, Tombstones: true, CDC: CDCDebezium, Registry: reg, Schema: envelope, Evolve: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range derived.Schema().Fields {
		got = append(got, f.Name+" "+f.Type.String())
	}
	if want := "id integer, day date, at timestamp_ntz, at3 timestamp_ntz, atz timestamp"; strings.Join(got, ", ") != want {
		t.Errorf("derived columns %s, want %s", strings.Join(got, ", "), want)
	}
	var recs []*Record
	for i, s := range samples {
		var value []byte
		if s.Value != nil {
			value = wire(1, debeziumAvroEvent(t, envelope, s.Value))
		}
		recs = append(recs, &Record{Value: value, Offset: int64(i)})
		row, ok := mapSample(t, m, i, recs[i], s.Value == nil)
		if !ok {
			continue
		}
		want := debeziumTemporalWants[i]
		if i == 2 {
			want = nil
		}
		checkTemporal(t, fmt.Sprintf("avro #%d", i), row, want)
		if want == nil {
			continue
		}
		var drow Row
		if err := derived.Map(recs[i], &drow); err != nil {
			t.Errorf("derived #%d: %v", i, err)
			continue
		}
		for k, w := range []parquet.Value{want[1], want[5], want[9], want[11]} {
			if g := drow.Values[k+1]; g.Int64() != w.Int64() {
				t.Errorf("derived #%d: %s %v, want %v", i, derived.Schema().Fields[k+1].Name, g, w)
			}
		}
	}
	var row Row
	for _, r := range recs { // warm
		_ = m.Map(r, &row)
	}
	if allocs := testing.AllocsPerRun(50, func() {
		for _, r := range recs {
			row.Arena.Reset()
			_ = m.Map(r, &row)
		}
	}); allocs != 0 {
		t.Errorf("%v allocations per run, want 0", allocs)
	}
}

// In any Avro record (not only an envelope): Debezium's NanoTimestamp,
// Kafka Connect's Date and Timestamp with and without their Avro logical
// types; a time of day (MicroTime) stays a long; a numeric column reads
// the number as written; a value outside years 0001–9999 is a cast
// failure.
func TestAvroDebeziumTemporalKinds(t *testing.T) {
	schema := `{"type": "record", "name": "r", "fields": [
		{"name": "nano", "type": {"type": "long", "connect.name": "io.debezium.time.NanoTimestamp"}},
		{"name": "cdate", "type": {"type": "int", "connect.name": "org.apache.kafka.connect.data.Date"}},
		{"name": "cdate_logical", "type": {"type": "int", "connect.name": "org.apache.kafka.connect.data.Date", "logicalType": "date"}},
		{"name": "cts", "type": {"type": "long", "connect.name": "org.apache.kafka.connect.data.Timestamp"}},
		{"name": "cts_logical", "type": {"type": "long", "connect.name": "org.apache.kafka.connect.data.Timestamp", "logicalType": "timestamp-millis"}},
		{"name": "tod", "type": {"type": "long", "connect.name": "io.debezium.time.MicroTime"}}]}`
	derived, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, schema)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range derived.Schema().Fields {
		got = append(got, f.Name+" "+f.Type.String())
	}
	if want := "nano timestamp_ntz, cdate date, cdate_logical date, cts timestamp, cts_logical timestamp, tod long"; strings.Join(got, ", ") != want {
		t.Errorf("derived columns %s, want %s", strings.Join(got, ", "), want)
	}
	at := time.Date(2026, 6, 22, 10, 15, 30, 123_000_000, time.UTC)
	record := func(nano int64, days int32) []byte {
		return encodeAvro(t, schema, map[string]any{"nano": nano, "cdate": days, "cdate_logical": time.Unix(int64(days)*86400, 0).UTC(),
			"cts": at.UnixMilli(), "cts_logical": at, "tod": int64(36930123456)})
	}
	var row Row
	if err := derived.Map(&Record{Value: record(at.UnixNano()+456789, 20626)}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.Int64Value(at.UnixMicro() + 456), parquet.Int32Value(20626), parquet.Int32Value(20626),
		parquet.Int64Value(at.UnixMicro()), parquet.Int64Value(at.UnixMicro()), parquet.Int64Value(36930123456)})

	cols := []Column{{Name: "nano", Type: "date"}, {Name: "nano_long", Type: "long", Source: "nano"},
		{Name: "cdate", Type: "timestamp_ntz"}, {Name: "cdate_int", Type: "integer", Source: "cdate"}, {Name: "cts", Type: "double"}}
	declared, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, schema), Columns: cols}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := declared.Map(&Record{Value: record(-1, -1)}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.Int32Value(-1), parquet.Int64Value(-1), parquet.Int64Value(-microsDay), parquet.Int32Value(-1),
		parquet.DoubleValue(float64(at.UnixMilli()))})
	for _, rec := range [][]byte{record(0, 2932897), record(0, -719163)} {
		err := declared.Map(&Record{Value: rec}, &row)
		if me, ok := errors.AsType[*MapError](err); !ok || me.Reason != "cdate: timestamp out of range (years 0001-9999)" {
			t.Errorf("%v, want cdate out of range", err)
		}
	}
}

// mapSample maps sample i, rec, with m: a tombstone must be skipped
// (ErrSkip), anything else mapped. It reports whether a row came out.
func mapSample(t *testing.T, m *Mapper, i int, rec *Record, tombstone bool) (Row, bool) {
	t.Helper()
	var row Row
	err := m.Map(rec, &row)
	switch {
	case tombstone:
		if !errors.Is(err, ErrSkip) {
			t.Errorf("#%d (a tombstone): %v, want ErrSkip", i, err)
		}
		return row, false
	case err != nil:
		t.Errorf("#%d: %v", i, err)
		return row, false
	}
	return row, true
}
