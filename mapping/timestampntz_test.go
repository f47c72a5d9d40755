package mapping

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/deltaflow/deltaflow/delta"
)

// ntzText renders parseTimestampNTZ's result: the local date-time, or
// "zone", "bad" or "range" for failZone, failTimestamp and failRange.
func ntzText(us int64, f failure) string {
	switch f {
	case ok:
		return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000000")
	case failZone:
		return "zone"
	case failTimestamp:
		return "bad"
	case failRange:
		return "range"
	}
	return "failure " + strconv.Itoa(int(f))
}

// TestParseTimestampNTZ: strings parse as Spark 3.5.1's from_json reads
// them into a TimestampNTZType column (no timestampNTZFormat), each case
// run through from_json: a local date-time of 1 to 7 fields, missing ones
// their least value, a fraction of any length truncated to µs, ASCII
// whitespace and control characters around it ignored; from_json gives
// null for a zone or offset ("zone") and for malformed text or fields out
// of range ("bad"). Years outside 0001–9999, which from_json takes
// ("0000-12-31 23:59:59", "+10000-01-01 00:00:00"), deltaflow refuses
// ("range"), as it refuses them in timestamp columns.
func TestParseTimestampNTZ(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// A value in from_json.
		{"2026-06-22T10:15:30", "2026-06-22T10:15:30.000000"},
		{"2026-06-22 10:15:30.123456", "2026-06-22T10:15:30.123456"},
		{"2026-06-22", "2026-06-22T00:00:00.000000"},
		{"2026-06", "2026-06-01T00:00:00.000000"},
		{"2026", "2026-01-01T00:00:00.000000"},
		{"2026-06-22T10:15", "2026-06-22T10:15:00.000000"},
		{"2026-06-22T10", "2026-06-22T10:00:00.000000"},
		{"2026-06-22 ", "2026-06-22T00:00:00.000000"},
		{" 2026-06-22T10:15:30 ", "2026-06-22T10:15:30.000000"},
		{"\t2026-06-22T10:15:30\n", "2026-06-22T10:15:30.000000"},
		{"\x002026-06-22T10:15:30\x7f", "2026-06-22T10:15:30.000000"},
		{"2026-06-22T10:15:30.", "2026-06-22T10:15:30.000000"},
		{"2026-06-22T10:15:30.1", "2026-06-22T10:15:30.100000"},
		{"2026-06-22T10:15:30.123456789", "2026-06-22T10:15:30.123456"},
		{"2026-06-22T10:15:30.1234567891234", "2026-06-22T10:15:30.123456"},
		{"2026-06-22T10:15:30.999999999", "2026-06-22T10:15:30.999999"},
		{"2026-06-22T10:15:30.000000001", "2026-06-22T10:15:30.000000"},
		{"2026-6-2 1:2:3", "2026-06-02T01:02:03.000000"},
		{"2026-06-22T1:2:3.4", "2026-06-22T01:02:03.400000"},
		{"2026-06-22T10:15:3", "2026-06-22T10:15:03.000000"},
		{"2024-02-29T23:59:59", "2024-02-29T23:59:59.000000"},
		{"2000-02-29", "2000-02-29T00:00:00.000000"},
		{"1582-10-10T00:00:00", "1582-10-10T00:00:00.000000"}, // proleptic Gregorian
		{"0001-01-01T00:00:00", "0001-01-01T00:00:00.000000"},
		{"9999-12-31T23:59:59.999999", "9999-12-31T23:59:59.999999"},
		{"+2026-06-22", "2026-06-22T00:00:00.000000"},
		{"02026-06-22", "2026-06-22T00:00:00.000000"},
		{"2026-06-22T10:15:30 ", "2026-06-22T10:15:30.000000"},
		// null in from_json: a zone or offset.
		{"2026-06-22T10:15:30Z", "zone"},
		{"2026-06-22T10:15:30.123Z", "zone"},
		{"2026-06-22T10:15:30+02:00", "zone"},
		{"2026-06-22T10:15:30.5-05:00", "zone"},
		{"2026-06-22T10:15:30.123+0100", "zone"},
		{"2026-06-22T10:15:30 UTC", "zone"},
		{"2026-06-22T10:15:30GMT", "zone"},
		{"2026-06-22T10:15:30 Europe/Paris", "zone"},
		{"2026-06-22T10:15:30 +02:00", "zone"},
		{"2026-06-22T10:15:30.123 Z", "zone"},
		{"2026-06-22T10:15:30.12x", "zone"},
		{"2026-06-22T10:15:30.-1", "zone"},
		// null in from_json: malformed, or a field out of range.
		{"2026-06-22T", "bad"},
		{"2026-13-01", "bad"},
		{"2026-02-29", "bad"},
		{"1900-02-29", "bad"},
		{"2026-06-22T24:00:00", "bad"},
		{"2026-06-22T23:60:00", "bad"},
		{"2026-06-22T23:59:60", "bad"},
		{"10:15:30", "bad"},  // a time alone: from_json's timestamp takes today's date, its timestamp_ntz nothing
		{"T10:15:30", "bad"}, // likewise
		{"", "bad"},
		{" ", "bad"},
		{"abc", "bad"},
		{"+", "bad"},
		{"-", "bad"},
		{"2026-", "bad"},
		{"2026/06/22", "bad"},
		{"20260622", "bad"},
		{"1234567-01-01", "bad"},
		{"2026-06-22T10:15:30,5", "bad"},
		{"2026-06-22t10:15:30", "bad"},
		{"2026-06-22X10:15:30", "bad"},
		{"2026-06-22  10:15:30", "bad"},
		{"2026-06-22T10:15:30\u00a0", "bad"},
		{"\u00852026-06-22", "bad"},
		{"2026-06-22T10:15:", "bad"},
		{"2026-06-22T10:15:Z", "bad"},
		{"2026-06-22T10:15:30:00", "bad"},
		{"2026-06-22T10::30", "bad"},
		{"2026--22", "bad"},
		{"2026-06-022", "bad"},
		{"2026-006-22", "bad"},
		{"2026-06-22T010:15:30", "bad"},
		// A value in from_json, outside deltaflow's years 0001–9999.
		{"0000-12-31T23:59:59", "range"},
		{"-0001-01-01", "range"},
		{"+10000-01-01T00:00:00", "range"},
		{"123456-01-01", "range"},
	} {
		if got := ntzText(parseTimestampNTZ([]byte(c.in))); got != c.want {
			t.Errorf("parseTimestampNTZ(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

// ntzGrammar is the grammar of parseTimestampNTZ's doc comment (Spark's),
// trimmed as Spark trims.
var ntzGrammar = regexp.MustCompile(`^[\x00-\x20\x7f]*([+-]?)(\d{4,6})(?:-(\d{1,2})(?:-(\d{1,2})(?:[T ](\d{1,2})(?::(\d{1,2})(?::(\d{1,2})(?:\.(\d*))?)?)?)?)?)?[\x00-\x20\x7f]*$`)

// refTimestampNTZ is what the grammar and time.Date make of s: ok, the
// value, and whether the year is out of range.
func refTimestampNTZ(s string) (us int64, good, outOfRange bool) {
	m := ntzGrammar.FindStringSubmatch(s)
	if m == nil {
		return 0, false, false
	}
	field := func(i, def int) int {
		if m[i] == "" {
			return def
		}
		n, _ := strconv.Atoi(m[i])
		return n
	}
	year, month, day, hour, minute, sec := field(2, 0), field(3, 1), field(4, 1), field(5, 0), field(6, 0), field(7, 0)
	if m[1] == "-" {
		year = -year
	}
	frac := (m[8] + "000000")[:6]
	micros, _ := strconv.Atoi(frac)
	t := time.Date(year, time.Month(month), day, hour, minute, sec, micros*1000, time.UTC)
	if t.Year() != year || int(t.Month()) != month || t.Day() != day || t.Hour() != hour || t.Minute() != minute || t.Second() != sec {
		return 0, false, false // normalized: a field out of range
	}
	if year < 1 || year > 9999 {
		return 0, true, true
	}
	return t.UnixMicro(), true, false
}

func checkTimestampNTZ(t *testing.T, s string) {
	t.Helper()
	us, f := parseTimestampNTZ([]byte(s))
	want, good, outOfRange := refTimestampNTZ(s)
	switch {
	case !good && f != failTimestamp && f != failZone:
		t.Errorf("parseTimestampNTZ(%q) = %s; the grammar refuses it", s, ntzText(us, f))
	case outOfRange && f != failRange:
		t.Errorf("parseTimestampNTZ(%q) = %s; want range (year out of range)", s, ntzText(us, f))
	case good && !outOfRange && (f != ok || us != want):
		t.Errorf("parseTimestampNTZ(%q) = %s; want %s", s, ntzText(us, f), ntzText(want, ok))
	}
}

// TestParseTimestampNTZAgainstGrammar: combinations of every field's
// forms, good and bad, parse as the grammar and time.Date have them.
func TestParseTimestampNTZAgainstGrammar(t *testing.T) {
	n := 0
	for _, date := range []string{"2026-06-22", "2026-6-2", "2026-06", "2026", "0001-01-01", "9999-12-31", "0000-01-01", "+2026-06-22",
		"-2026-06-22", "202606-01-01", "02026-02-28", "2024-02-29", "2026-02-29", "2026-04-31", "2026-13-01", "2026-00-10",
		"2026-06-00", "2026-006-22", "20260622", "2026-06-2a", "226-06-22", ""} {
		for _, sep := range []string{"T", " ", "t", "x", ""} {
			for _, clock := range []string{"00:00:00", "10:15:30", "23:59:59", "24:00:00", "23:60:00", "23:59:60", "9:5:3", "10:15",
				"10", "010:15:30", "10::30", ""} {
				for _, frac := range []string{"", ".", ".1", ".123456", ".1234567", ".123456789", ".1234567891234", ",5", ".x"} {
					for _, zone := range []string{"", "Z", "+02:00", " UTC", " ", "\t", "\u00a0", ":00"} {
						checkTimestampNTZ(t, date+sep+clock+frac+zone)
						checkTimestampNTZ(t, " "+date+sep+clock+frac+zone)
						n += 2
					}
				}
			}
		}
	}
	t.Logf("%d inputs", n)
}

func FuzzParseTimestampNTZ(f *testing.F) {
	for _, s := range []string{"2026-06-22T10:15:30.123456", "2026", "+10000-01-01", "2026-06-22 10:15:30Z", " 2026-6-2 1:2:3.1234567 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkTimestampNTZ(t, s)
	})
}

// ntzMapper maps records {"t": <value>, "n": 7} into a timestamp_ntz
// column t and a long n.
func ntzMapper(t testing.TB, mode Mode, required bool) *Mapper {
	t.Helper()
	m, err := New(Config{Mode: mode, Columns: []Column{{Name: "t", Type: "timestamp_ntz", Required: required}, {Name: "n", Type: "long"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestJSONTimestampNTZ: a JSON string becomes the local date-time it
// holds, unshifted (the same digits in Delta and in every reader); what
// from_json makes null is a dead letter naming the column in strict mode:
// a zone or offset, malformed text, a number (from_json's timestamp takes
// seconds since the epoch, its timestamp_ntz does not; nor does
// deltaflow's timestamp), a boolean; a year outside 0001–9999 too.
func TestJSONTimestampNTZ(t *testing.T) {
	m := ntzMapper(t, Strict, false)
	for _, c := range []struct{ json, want string }{
		{`"2026-06-22T10:15:30.123456"`, "2026-06-22T10:15:30.123456"},
		{`"2026-06-22 10:15:30.1234567"`, "2026-06-22T10:15:30.123456"},
		{`"2026-06-22"`, "2026-06-22T00:00:00.000000"},
		{`" 2026-06-22T10:15 "`, "2026-06-22T10:15:00.000000"},
		{`"2026-06-22T10:15:30\u0000"`, "2026-06-22T10:15:30.000000"},
		{`null`, "null"},
		{`"2026-06-22T10:15:30Z"`, `timestamp_ntz "2026-06-22T10:15:30Z" has a zone or offset: a timestamp_ntz is a local date-time without one`},
		{`"2026-06-22T10:15:30+02:00"`, `timestamp_ntz "2026-06-22T10:15:30+02:00" has a zone or offset: a timestamp_ntz is a local date-time without one`},
		{`"2026-06-22T24:00:00"`, `unparsable timestamp_ntz "2026-06-22T24:00:00"`},
		{`"yesterday"`, `unparsable timestamp_ntz "yesterday"`},
		{`""`, `unparsable timestamp_ntz ""`},
		{`"0000-12-31T23:59:59"`, "timestamp out of range (years 0001-9999)"},
		{`"+10000-01-01"`, "timestamp out of range (years 0001-9999)"},
		{`1750000000`, "expected string, got number"},
		{`-1`, "expected string, got number"},
		{`true`, "expected string, got boolean"},
		{`{"at": "2026-06-22"}`, "expected string, got object"},
	} {
		var row Row
		err := m.Map(&Record{Value: []byte(`{"t": ` + c.json + `, "n": 7}`)}, &row)
		var got string
		switch me, isMapErr := errors.AsType[*MapError](err); {
		case isMapErr:
			got, _ = strings.CutPrefix(me.Reason, "t: ")
			if me.Column != "t" {
				t.Errorf("%s: the dead letter names column %q", c.json, me.Column)
			}
		case err != nil:
			t.Fatal(err)
		case row.Values[0].IsNull():
			got = "null"
		default:
			got = ntzText(row.Values[0].Int64(), ok)
		}
		if got != c.want {
			t.Errorf("%s: got %s, want %s", c.json, got, c.want)
		}
	}
}

// TestTimestampNTZPermissive: in permissive mode what from_json makes
// null is null, the rest of the row kept; a required column still sends
// the record to the DLQ.
func TestTimestampNTZPermissive(t *testing.T) {
	m := ntzMapper(t, Permissive, false)
	for _, v := range []string{`"2026-06-22T10:15:30Z"`, `"2026-06-22T25:00"`, `"abc"`, `1750000000`, `true`, `"0000-01-01"`} {
		var row Row
		if err := m.Map(&Record{Value: []byte(`{"t": ` + v + `, "n": 7}`)}, &row); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if !row.Values[0].IsNull() || row.Values[1].Int64() != 7 {
			t.Errorf("%s: %v, want null and 7", v, row.Values)
		}
	}
	req := ntzMapper(t, Permissive, true)
	var row Row
	if err := req.Map(&Record{Value: []byte(`{"t": "2026-06-22T10:15:30Z"}`)}, &row); err == nil || !strings.Contains(err.Error(), "has a zone or offset") {
		t.Errorf("required, with an offset: %v", err)
	}
}

// TestTimestampNTZColumns: `type: timestamp_ntz` makes a TIMESTAMP_NTZ
// column, written as Spark writes one (INT64 µs of the wall clock); date()
// of it is its local date; it is no partition column, and the sources
// that give instants (now(), kafka.timestamp) do not fill it.
func TestTimestampNTZColumns(t *testing.T) {
	cfg := Config{Columns: []Column{{Name: "device_type", Type: "string"}, {Name: "local_time", Type: "timestamp_ntz", Source: "payload.at"},
		{Name: "local_date", Type: "date", Source: "date(local_time)"}}}
	m, err := New(cfg, []string{"device_type", "local_date"})
	if err != nil {
		t.Fatal(err)
	}
	if f := m.Schema().Fields[1]; f.Type != delta.TimestampNTZ || !f.Nullable {
		t.Errorf("column %+v, want a nullable timestamp_ntz", f)
	}
	var row Row
	if err := m.Map(&Record{Value: []byte(`{"device_type": "plug", "payload": {"at": "2026-06-22T23:59:59.5"}}`)}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.Int64Value(time.Date(2026, 6, 22, 23, 59, 59, 5e8, time.UTC).UnixMicro())})
	if got := *row.PartitionValues[1]; got != "2026-06-22" {
		t.Errorf("date(local_time) = %s, want 2026-06-22 (the local date)", got)
	}
	if err := m.Map(&Record{Value: []byte(`{"device_type": "plug", "payload": {}}`)}, &row); err != nil || row.PartitionValues[1] != nil {
		t.Errorf("no local_time: %v, date %v; want a null date", err, row.PartitionValues[1])
	}

	for _, c := range []struct {
		cfg   Config
		parts []string
		want  string
	}{
		{cfg, []string{"local_time"}, `table.partition_columns[0]: column "local_time" is timestamp_ntz; partition columns must be`},
		{Config{Columns: []Column{{Name: "t", Type: "timestamp_ntz", Source: "now()"}}}, nil, `table.columns[0].type: source "now()" cannot fill a timestamp_ntz column`},
		{Config{Columns: []Column{{Name: "t", Type: "timestamp_ntz", Source: "kafka.timestamp"}}}, nil,
			`table.columns[0].type: source "kafka.timestamp" cannot fill a timestamp_ntz column`},
		{Config{Columns: []Column{{Name: "t", Type: "timestamp-ntz"}}}, nil, `table.columns[0].type: unknown type "timestamp-ntz"`},
		{Config{Columns: []Column{{Name: "t", Type: "TIMESTAMP_NTZ"}}}, nil, `table.columns[0].type: unknown type "TIMESTAMP_NTZ"`},
	} {
		if _, err := New(c.cfg, c.parts); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("New: %v, want %s", err, c.want)
		}
	}
}

// TestTimestampNTZDoesNotAllocate: mapping a timestamp_ntz column, in
// both modes, with good and refused values, allocates nothing.
func TestTimestampNTZDoesNotAllocate(t *testing.T) {
	for _, mode := range []Mode{Strict, Permissive} {
		m := ntzMapper(t, mode, false)
		if allocs := recordAllocs(t, m, &Record{Value: []byte(`{"t": " 2026-06-22 10:15:30.1234567 ", "n": 7}`)}); allocs != 0 {
			t.Errorf("%s: Map allocates %.1f times per record", mode, allocs)
		}
	}
	m := ntzMapper(t, Permissive, false)
	if allocs := recordAllocs(t, m, &Record{Value: []byte(`{"t": "2026-06-22T10:15:30+02:00", "n": 7}`)}); allocs != 0 {
		t.Errorf("permissive, a refused value: Map allocates %.1f times per record", allocs)
	}
}

// localSchema has every Avro local timestamp and a timestamp, for
// derived columns and for explicit ones of either timestamp type.
const localSchema = `{"type": "record", "name": "L", "fields": [
	{"name": "ms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
	{"name": "us", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}]},
	{"name": "ns", "type": {"type": "long", "logicalType": "local-timestamp-nanos"}},
	{"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
	{"name": "day", "type": {"type": "int", "logicalType": "date"}},
	{"name": "s", "type": "string"}
]}`

// TestAvroLocalTimestamps: local-timestamp-millis, -micros (from_avro's
// TimestampNTZType) and -nanos (which Spark 3.5's from_avro reads as a
// long: deltaflow takes it as the other two, nanoseconds cut as for
// timestamp-nanos) make timestamp_ntz columns holding the wall clock the
// producer wrote, whatever its time.Time's zone. Declared columns cast:
// a local timestamp into a timestamp column is that wall clock in UTC (as
// before timestamp_ntz columns were); a timestamp into a timestamp_ntz
// column its UTC wall clock; a date into either, its midnight.
func TestAvroLocalTimestamps(t *testing.T) {
	m, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, localSchema)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkColumns := func(got *delta.StructType, want string) {
		t.Helper()
		var cols []string
		for _, f := range got.Fields {
			cols = append(cols, f.Name+" "+f.Type.String()+map[bool]string{true: " null", false: ""}[f.Nullable])
		}
		if strings.Join(cols, ", ") != want {
			t.Errorf("columns %s, want %s", strings.Join(cols, ", "), want)
		}
	}
	checkColumns(m.Schema(), "ms timestamp_ntz, us timestamp_ntz null, ns timestamp_ntz, at timestamp, day date, s string")

	paris := time.FixedZone("CEST", 2*3600)
	wall := time.Date(2026, 6, 22, 10, 15, 30, 123_456_789, paris)
	wallUTC := func(ns int) int64 { return time.Date(2026, 6, 22, 10, 15, 30, ns, time.UTC).UnixMicro() }
	early := time.Date(1969, 12, 31, 23, 59, 59, 999_999_999, time.UTC) // nanoseconds cut (floored), not rounded
	rec := map[string]any{"ms": wall, "us": wall, "ns": early, "at": wall, "day": time.Date(2026, 6, 22, 0, 0, 0, 0, time.UTC), "s": "x"}
	var row Row
	if err := m.Map(&Record{Value: encodeAvro(t, localSchema, rec)}, &row); err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 6, 22, 0, 0, 0, 0, time.UTC)
	checkValues(t, row.Values, []parquet.Value{parquet.Int64Value(wallUTC(123_000_000)), parquet.Int64Value(wallUTC(123_456_000)),
		parquet.Int64Value(early.Truncate(time.Microsecond).UnixMicro()), parquet.Int64Value(wall.Truncate(time.Microsecond).UnixMicro()),
		parquet.Int32Value(int32(day.Unix() / 86400)), parquet.ByteArrayValue([]byte("x"))})

	declared, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, localSchema), Columns: []Column{
		{Name: "local_as_instant", Type: "timestamp", Source: "us"}, {Name: "instant_as_local", Type: "timestamp_ntz", Source: "at"},
		{Name: "day_as_local", Type: "timestamp_ntz", Source: "day"}, {Name: "local_day", Type: "date", Source: "us"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := declared.Map(&Record{Value: encodeAvro(t, localSchema, rec)}, &row); err != nil {
		t.Fatal(err)
	}
	checkValues(t, row.Values, []parquet.Value{parquet.Int64Value(wallUTC(123_456_000)),
		parquet.Int64Value(time.Date(2026, 6, 22, 8, 15, 30, 123_456_000, time.UTC).UnixMicro()),
		parquet.Int64Value(day.UnixMicro()), parquet.Int32Value(int32(day.Unix() / 86400))})

	// What no timestamp_ntz holds: a string, a year past 9999.
	for _, c := range []struct {
		cols []Column
		rec  map[string]any
		want string
	}{
		{[]Column{{Name: "t", Type: "timestamp_ntz", Source: "s"}}, rec, "t: expected timestamp, got string"},
		{[]Column{{Name: "t", Type: "timestamp_ntz", Source: "ms"}}, map[string]any{"ms": int64(253402300800000), "us": nil, "ns": int64(0),
			"at": int64(0), "day": int32(0), "s": ""}, "t: timestamp out of range (years 0001-9999)"},
	} {
		m, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, localSchema), Columns: c.cols}, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = m.Map(&Record{Value: encodeAvro(t, localSchema, c.rec)}, &row)
		if me, isMapErr := errors.AsType[*MapError](err); !isMapErr || me.Reason != c.want {
			t.Errorf("Map: %v, want a MapError %q", err, c.want)
		}
	}
}

// TestMapRegistryAvroRefusesTimestampKindChange: a writer schema that
// turns a derived timestamp column's field into a local timestamp, or a
// timestamp_ntz column's into an instant, makes its records dead letters
// naming the field and both types: each would be read as the other's
// wall clock in UTC. Declared columns take the cast they ask for.
func TestMapRegistryAvroRefusesTimestampKindChange(t *testing.T) {
	const (
		instant = `{"type":"record","name":"R","fields":[{"name":"t","type":{"type":"long","logicalType":"timestamp-micros"}}]}`
		local   = `{"type":"record","name":"R","fields":[{"name":"t","type":{"type":"long","logicalType":"local-timestamp-micros"}}]}`
	)
	schemas := &schemaMap{schemas: map[int]string{1: instant, 2: local}}
	at := time.Date(2026, 6, 22, 10, 15, 30, 0, time.UTC)
	var row Row
	for _, c := range []struct {
		first, then int
		want        string
	}{
		{1, 2, "field t: the writer schema's timestamp_ntz is not the table's timestamp column t"},
		{2, 1, "field t: the writer schema's timestamp is not the table's timestamp_ntz column t"},
	} {
		m, err := New(Config{Format: Avro, Registry: schemas, Schema: schemas.schemas[c.first], Evolve: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Map(&Record{Value: wire(c.first, encodeAvro(t, schemas.schemas[c.first], map[string]any{"t": at}))}, &row); err != nil {
			t.Fatal(err)
		}
		err = m.Map(&Record{Value: wire(c.then, encodeAvro(t, schemas.schemas[c.then], map[string]any{"t": at}))}, &row)
		if me, isMapErr := errors.AsType[*MapError](err); !isMapErr || !strings.Contains(me.Error(), c.want) {
			t.Errorf("schema id %d after %d: %v, want a dead letter saying %q", c.then, c.first, err, c.want)
		}
	}
	declared, err := New(Config{Format: Avro, Registry: schemas, Schema: instant, Columns: []Column{{Name: "t", Type: "timestamp"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := declared.Map(&Record{Value: wire(2, encodeAvro(t, local, map[string]any{"t": at}))}, &row); err != nil {
		t.Errorf("a declared timestamp column of a local timestamp: %v, want it cast", err)
	}
}

// TestProtobufTimestampIntoTimestampNTZ: a google.protobuf.Timestamp
// into a declared timestamp_ntz column is its UTC wall clock.
func TestProtobufTimestampIntoTimestampNTZ(t *testing.T) {
	v1 := readingProto(t)
	schemas := &schemaMap{format: Protobuf, schemas: map[int]string{1: v1}}
	m, err := New(Config{Format: Protobuf, Registry: schemas, Schema: v1, Columns: []Column{{Name: "at", Type: "timestamp_ntz"},
		{Name: "id", Type: "timestamp_ntz"}}, Mode: Permissive}, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 5, 7, 30, 0, 123456789, time.FixedZone("", -3600))
	value := encodeProto(t, v1, 1, 0, func(r *dynamicpb.Message, f protoreflect.FieldDescriptors) {
		setMsg(r, f, "id", protoreflect.ValueOfString("2026-12-05T08:30:00"))
		setMsg(r, f, "at", protoreflect.ValueOfMessage(timestamppb.New(at).ProtoReflect()))
	})
	var row Row
	if err := m.Map(&Record{Value: value}, &row); err != nil {
		t.Fatal(err)
	}
	// A Protobuf string is no timestamp: null in permissive mode.
	checkValues(t, row.Values, []parquet.Value{parquet.Int64Value(time.Date(2026, 12, 5, 8, 30, 0, 123456000, time.UTC).UnixMicro()),
		parquet.NullValue()})
}

// TestWhereTimestampNTZ: a route's filter compares a timestamp_ntz column
// with a literal's wall clock.
func TestWhereTimestampNTZ(t *testing.T) {
	m := ntzMapper(t, Strict, false)
	row, _ := mustMap(t, m, &Record{Value: []byte(`{"t": "2026-06-22T10:15:30", "n": 7}`)})
	for where, want := range map[string]bool{
		"t = '2026-06-22 10:15:30'":  true,
		"t > '2026-06-22T10:15:29'":  true,
		"t >= '2026-06-22'":          true,
		"t < '2026-06-22T10:15:30'":  false,
		"t != '2026-06-22 10:15:30'": false,
		"t = null":                   false,
	} {
		w, err := m.Where(where)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if got := w.Match(row); got != want {
			t.Errorf("%s: %v, want %v", where, got, want)
		}
	}
}
