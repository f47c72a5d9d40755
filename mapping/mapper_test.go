package mapping

import (
	"bytes"
	"errors"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"go.yaml.in/yaml/v3"

	"github.com/deltaflow/deltaflow/delta"
)

const (
	plugSample = `{"device_id":"smart-plug-01","device_type":"smart_plug","ingested_at":"2026-06-22T09:15:30.123456+00:00","payload":"{\"power\": 84.3, \"voltage\": 230.1, \"current\": 0.37, \"energy\": 12.4, \"state\": \"ON\", \"linkquality\": 248}"}`
	doorSample = `{"device_id":"door-sensor-01","device_type":"door_window","ingested_at":"2026-06-22T09:15:31.004512+00:00","payload":"{\"contact\": false, \"battery\": 97, \"linkquality\": 159}"}`
)

var fixedNow = time.Date(2026, 6, 22, 10, 0, 0, 123456789, time.UTC)

func newDefault(t testing.TB, mode Mode) *Mapper {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Mode = mode
	m, err := New(cfg, DefaultPartitionColumns)
	if err != nil {
		t.Fatal(err)
	}
	m.SetClock(func() time.Time { return fixedNow })
	return m
}

func rec(value string) *Record {
	return &Record{Topic: "sensor-events", Partition: 3, Offset: 42, Timestamp: fixedNow, Key: []byte("k"), Value: []byte(value)}
}

// decoded is a row read back as Go values, by data column name.
func decoded(t testing.TB, m *Mapper, r *Row) map[string]any {
	t.Helper()
	ds := m.DataSchema()
	if len(r.Values) != len(ds.Fields) {
		t.Fatalf("row has %d values, data schema %d columns", len(r.Values), len(ds.Fields))
	}
	out := map[string]any{}
	for i, v := range r.Values {
		f := ds.Fields[i]
		if v.Column() != i {
			t.Fatalf("value %d (%s) has column index %d", i, f.Name, v.Column())
		}
		if v.IsNull() {
			if v.DefinitionLevel() != 0 {
				t.Fatalf("%s: null with definition level %d", f.Name, v.DefinitionLevel())
			}
			out[f.Name] = nil
			continue
		}
		if want := map[bool]int{true: 1, false: 0}[f.Nullable]; v.DefinitionLevel() != want {
			t.Fatalf("%s: definition level %d, want %d", f.Name, v.DefinitionLevel(), want)
		}
		switch f.Type {
		case delta.String:
			out[f.Name] = string(v.ByteArray())
		case delta.Boolean:
			out[f.Name] = v.Boolean()
		case delta.Integer:
			out[f.Name] = v.Int32()
		case delta.Long:
			out[f.Name] = v.Int64()
		case delta.Double:
			out[f.Name] = v.Double()
		case delta.Float:
			out[f.Name] = v.Float()
		case delta.Timestamp:
			out[f.Name] = time.UnixMicro(v.Int64()).UTC()
		case delta.Date:
			out[f.Name] = time.Unix(int64(v.Int32())*86400, 0).UTC().Format(time.DateOnly)
		}
	}
	return out
}

func partitions(r *Row) []any {
	var out []any
	for _, p := range r.PartitionValues {
		if p == nil {
			out = append(out, nil)
		} else {
			out = append(out, *p)
		}
	}
	return out
}

func mustMap(t testing.TB, m *Mapper, r *Record) (*Row, map[string]any) {
	t.Helper()
	var row Row
	if err := m.Map(r, &row); err != nil {
		t.Fatalf("Map(%.80q): %v", r.Value, err)
	}
	return &row, decoded(t, m, &row)
}

func TestDefaultConfigSchema(t *testing.T) {
	m := newDefault(t, Strict)
	want := `{"type":"struct","fields":[` +
		`{"name":"device_id","type":"string","nullable":true,"metadata":{}},` +
		`{"name":"device_type","type":"string","nullable":true,"metadata":{}},` +
		`{"name":"event_time","type":"timestamp","nullable":true,"metadata":{}},` +
		`{"name":"linkquality","type":"integer","nullable":true,"metadata":{}},` +
		`{"name":"contact","type":"boolean","nullable":true,"metadata":{}},` +
		`{"name":"battery","type":"integer","nullable":true,"metadata":{}},` +
		`{"name":"power","type":"double","nullable":true,"metadata":{}},` +
		`{"name":"voltage","type":"double","nullable":true,"metadata":{}},` +
		`{"name":"current","type":"double","nullable":true,"metadata":{}},` +
		`{"name":"energy","type":"double","nullable":true,"metadata":{}},` +
		`{"name":"plug_state","type":"string","nullable":true,"metadata":{}},` +
		`{"name":"raw_payload","type":"string","nullable":true,"metadata":{}},` +
		`{"name":"processed_at","type":"timestamp","nullable":true,"metadata":{}},` +
		`{"name":"event_date","type":"date","nullable":true,"metadata":{}}]}`
	if got := m.Schema().SchemaString(); got != want {
		t.Errorf("schema\n got %s\nwant %s", got, want)
	}
	ds := m.DataSchema()
	if len(ds.Fields) != 12 || ds.Index("device_type") >= 0 || ds.Index("event_date") >= 0 || ds.Fields[0].Name != "device_id" || ds.Fields[1].Name != "event_time" {
		t.Errorf("data schema %s", ds.SchemaString())
	}
	if got := m.PartitionColumns(); strings.Join(got, ",") != "device_type,event_date" {
		t.Errorf("partition columns %v", got)
	}
}

func TestMapSamples(t *testing.T) {
	m := newDefault(t, Strict)
	row, got := mustMap(t, m, rec(plugSample))
	want := map[string]any{
		"device_id": "smart-plug-01", "event_time": time.Date(2026, 6, 22, 9, 15, 30, 123456000, time.UTC),
		"linkquality": int32(248), "contact": nil, "battery": nil, "power": 84.3, "voltage": 230.1,
		"current": 0.37, "energy": 12.4, "plug_state": "ON",
		"raw_payload":  `{"power": 84.3, "voltage": 230.1, "current": 0.37, "energy": 12.4, "state": "ON", "linkquality": 248}`,
		"processed_at": fixedNow.Truncate(time.Microsecond),
	}
	checkRow(t, got, want)
	if p := partitions(row); p[0] != "smart_plug" || p[1] != "2026-06-22" {
		t.Errorf("partition values %v", p)
	}
	if string(row.Key) != "device_type=smart_plug/event_date=2026-06-22" {
		t.Errorf("key %q", row.Key)
	}
	if row.Size < 12*valueSize+len("smart-plug-01") {
		t.Errorf("size %d", row.Size)
	}

	row, got = mustMap(t, m, rec(doorSample))
	checkRow(t, got, map[string]any{
		"device_id": "door-sensor-01", "event_time": time.Date(2026, 6, 22, 9, 15, 31, 4512000, time.UTC),
		"linkquality": int32(159), "contact": false, "battery": int32(97), "power": nil, "voltage": nil,
		"current": nil, "energy": nil, "plug_state": nil,
		"raw_payload":  `{"contact": false, "battery": 97, "linkquality": 159}`,
		"processed_at": fixedNow.Truncate(time.Microsecond),
	})
	if string(row.Key) != "device_type=door_window/event_date=2026-06-22" {
		t.Errorf("key %q", row.Key)
	}
}

func checkRow(t *testing.T, got, want map[string]any) {
	t.Helper()
	for k, w := range want {
		g := got[k]
		if gt, ok := g.(time.Time); ok {
			if wt, ok := w.(time.Time); !ok || !gt.Equal(wt) {
				t.Errorf("%s = %v, want %v", k, g, w)
			}
			continue
		}
		if g != w {
			t.Errorf("%s = %#v, want %#v", k, g, w)
		}
	}
}

// The data-loss trap: zero values of optional columns must stay non-null,
// also through a real Parquet file.
func TestZeroValuesStayNonNull(t *testing.T) {
	m := newDefault(t, Strict)
	v := `{"device_id":"","device_type":"smart_plug","ingested_at":"1970-01-01T00:00:00Z","payload":"{\"power\":0.0,\"voltage\":0,\"current\":-0.0,\"energy\":0e0,\"state\":\"\",\"linkquality\":0,\"battery\":0,\"contact\":false}"}`
	row, got := mustMap(t, m, rec(v))
	checkRow(t, got, map[string]any{
		"device_id": "", "event_time": time.Unix(0, 0), "linkquality": int32(0), "contact": false,
		"battery": int32(0), "power": 0.0, "voltage": 0.0, "current": math.Copysign(0, -1), "energy": 0.0, "plug_state": "",
	})
	for i, v := range row.Values {
		if v.IsNull() {
			t.Errorf("column %d (%s) is null", i, m.DataSchema().Fields[i].Name)
		}
	}
	// Round trip through parquet-go; parquet.Group sorts its fields, so the
	// test remaps the column indexes to that order.
	ds := m.DataSchema()
	group := parquet.Group{}
	names := make([]string, len(ds.Fields))
	for i, f := range ds.Fields {
		names[i] = f.Name
		var leaf parquet.Node
		switch f.Type {
		case delta.String:
			leaf = parquet.String()
		case delta.Boolean:
			leaf = parquet.Leaf(parquet.BooleanType)
		case delta.Integer:
			leaf = parquet.Leaf(parquet.Int32Type)
		case delta.Double:
			leaf = parquet.Leaf(parquet.DoubleType)
		case delta.Timestamp:
			leaf = parquet.Timestamp(parquet.Microsecond)
		}
		group[f.Name] = parquet.Optional(leaf)
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	pos := map[string]int{}
	for i, n := range sorted {
		pos[n] = i
	}
	remap := func(r parquet.Row) parquet.Row {
		out := make(parquet.Row, len(r))
		for i, v := range r {
			j := pos[names[i]]
			out[j] = v.Level(0, v.DefinitionLevel(), j)
		}
		return out
	}
	_, nullRow := mustMap(t, m, rec(`{"device_id":"x","device_type":"smart_plug","ingested_at":"2026-06-22T00:00:00Z"}`))
	var nullValues Row
	_ = m.Map(rec(`{"device_id":"x","device_type":"smart_plug","ingested_at":"2026-06-22T00:00:00Z"}`), &nullValues)
	var buf bytes.Buffer
	schema := parquet.NewSchema("spark_schema", group)
	w := parquet.NewWriter(&buf, schema)
	if _, err := w.WriteRows([]parquet.Row{remap(row.Values), remap(nullValues.Values)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := parquet.NewReader(bytes.NewReader(buf.Bytes()), schema)
	rows := make([]parquet.Row, 2)
	if n, _ := r.ReadRows(rows); n != 2 {
		t.Fatalf("read %d rows", n)
	}
	for _, name := range names {
		if got := rows[0][pos[name]]; got.IsNull() {
			t.Errorf("zero %s read back as null", name)
		}
		wantNull := nullRow[name] == nil
		if got := rows[1][pos[name]]; got.IsNull() != wantNull {
			t.Errorf("%s read back null=%v, want %v", name, got.IsNull(), wantNull)
		}
	}
	if got := rows[0][pos["power"]].Double(); got != 0 {
		t.Errorf("power read back %v", got)
	}
}

// Rows must not alias the record or the parser: later records and changes
// to the input leave an earlier row's strings intact.
func TestRowOwnsItsStrings(t *testing.T) {
	m := newDefault(t, Strict)
	r := rec(plugSample)
	var first, second Row
	first.Arena = new(Arena)
	second.Arena = first.Arena
	if err := m.Map(r, &first); err != nil {
		t.Fatal(err)
	}
	saved := append(parquet.Row(nil), first.Values...)
	for i := range r.Value {
		r.Value[i] = 'X'
	}
	if err := m.Map(rec(doorSample), &second); err != nil {
		t.Fatal(err)
	}
	got := decoded(t, m, &Row{Values: saved})
	if got["device_id"] != "smart-plug-01" || !strings.Contains(got["raw_payload"].(string), `"power": 84.3`) {
		t.Errorf("row changed after the input did: %v", got)
	}
	// AppendValues copies into another arena that outlives the first.
	var other Arena
	copied := first.AppendValues(nil, &other)
	first.Arena.Reset()
	_ = m.Map(rec(doorSample), &first) // overwrites the reset arena
	if got := decoded(t, m, &Row{Values: copied}); got["device_id"] != "smart-plug-01" {
		t.Errorf("AppendValues copy aliases the old arena: %v", got["device_id"])
	}
}

// mapAllocs is how often m allocates mapping a plug and a door record in
// turn, its arena reset now and then as the buffers reset theirs.
func mapAllocs(t *testing.T, m *Mapper) float64 {
	t.Helper()
	recs := []*Record{rec(plugSample), rec(doorSample)}
	var row Row
	row.Arena = new(Arena)
	i := 0
	return testing.AllocsPerRun(1000, func() {
		if err := m.Map(recs[i%2], &row); err != nil {
			t.Fatal(err)
		}
		if i++; i%200 == 0 {
			row.Arena.Reset()
		}
	})
}

func TestMapDoesNotAllocate(t *testing.T) {
	if allocs := mapAllocs(t, newDefault(t, Strict)); allocs != 0 {
		t.Errorf("Map allocates %.1f times per record", allocs)
	}
	// Permissive null-on-failure must not allocate either.
	var row Row
	row.Arena = new(Arena)
	p := newDefault(t, Permissive)
	bad := rec(`{"device_id":"d","device_type":"smart_plug","ingested_at":"2026-06-22T09:15:30Z","payload":"{\"power\":\"abc\",\"battery\":1.5,\"contact\":3}"}`)
	if err := p.Map(bad, &row); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := p.Map(bad, &row); err != nil {
			t.Fatal(err)
		}
		row.Arena.Reset()
	})
	if allocs != 0 {
		t.Errorf("permissive Map allocates %.1f times per record", allocs)
	}
}

func TestRowPreparedByCaller(t *testing.T) {
	m := newDefault(t, Strict)
	row := Row{Values: make(parquet.Row, 0, 64)} // partition slices left nil
	if err := m.Map(rec(plugSample), &row); err != nil {
		t.Fatal(err)
	}
	if len(row.PartitionValues) != 2 || string(row.Key) != "device_type=smart_plug/event_date=2026-06-22" {
		t.Errorf("key %q", row.Key)
	}
}

func TestCloneIsIndependent(t *testing.T) {
	m := newDefault(t, Strict)
	c := m.Clone()
	var a, b Row
	if err := m.Map(rec(plugSample), &a); err != nil {
		t.Fatal(err)
	}
	if err := c.Map(rec(doorSample), &b); err != nil {
		t.Fatal(err)
	}
	if got := decoded(t, m, &a)["device_id"]; got != "smart-plug-01" {
		t.Errorf("clone disturbed the original: %v", got)
	}
	if got := decoded(t, c, &b)["processed_at"].(time.Time); !got.Equal(fixedNow.Truncate(time.Microsecond)) {
		t.Errorf("clone lost the clock: %v", got)
	}
}

// TestStartBatchFixesNow: after StartBatch every record gets the clock
// read then (Spark's per-micro-batch current_timestamp); without it each
// record reads the clock.
func TestStartBatchFixesNow(t *testing.T) {
	m := newDefault(t, Strict)
	tick := fixedNow
	m.SetClock(func() time.Time { tick = tick.Add(time.Second); return tick })
	processedAt := func() time.Time {
		t.Helper()
		var r Row
		if err := m.Map(rec(plugSample), &r); err != nil {
			t.Fatal(err)
		}
		return decoded(t, m, &r)["processed_at"].(time.Time)
	}
	if a, b := processedAt(), processedAt(); !b.After(a) {
		t.Errorf("without StartBatch: processed_at %v then %v, want the clock read per record", a, b)
	}
	m.StartBatch()
	batch := tick.Truncate(time.Microsecond)
	for range 3 {
		if got := processedAt(); !got.Equal(batch) {
			t.Errorf("in a batch: processed_at %v, want %v", got, batch)
		}
	}
	m.StartBatch()
	if got := processedAt(); !got.After(batch) {
		t.Errorf("next batch: processed_at %v, want after %v", got, batch)
	}
}

func TestKafkaMetadataAndSources(t *testing.T) {
	f := false
	cfg := Config{Columns: []Column{
		{Name: "part", Type: "integer", Source: "kafka.partition"},
		{Name: "off", Type: "long", Source: "kafka.offset"},
		{Name: "ts", Type: "timestamp", Source: "kafka.timestamp"},
		{Name: "key", Type: "string", Source: "kafka.key"},
		{Name: "topic", Type: "string", Source: "kafka.topic"},
		{Name: "day", Type: "date", Source: "date(ts)", Nullable: &f},
		{Name: "deep", Type: "long", Source: "a.b.c"},
		{Name: "f32", Type: "float", Source: "a.f"},
		{Name: "id"},
	}}
	cfg.Columns[8].Type = "string"
	m, err := New(cfg, []string{"part", "day"})
	if err != nil {
		t.Fatal(err)
	}
	r := &Record{Topic: "t", Partition: 7, Offset: 1 << 40, Timestamp: time.Date(2026, 1, 2, 23, 59, 59, 0, time.FixedZone("x", -3600)),
		Key: nil, Value: []byte(`{"a":{"b":"{\"c\":9007199254740993}","f":1.5},"id":"x"}`)}
	row, got := mustMap(t, m, r)
	checkRow(t, got, map[string]any{"off": int64(1 << 40), "ts": r.Timestamp, "key": nil, "topic": "t",
		"deep": int64(9007199254740993), "f32": float32(1.5), "id": "x"})
	if p := partitions(row); p[0] != "7" || p[1] != "2026-01-03" {
		t.Errorf("partitions %v", p)
	}
	if string(row.Key) != "part=7/day=2026-01-03" {
		t.Errorf("key %q", row.Key)
	}
	if pm := m.PartitionMap(row); *pm["part"] != "7" || *pm["day"] != "2026-01-03" {
		t.Errorf("partition map %v", pm)
	}
	if !m.DataSchema().Fields[0].Nullable || m.Schema().Field("day").Nullable {
		t.Error("nullability not carried into the schema")
	}
	// A non-nullable column is required.
	r.Timestamp = time.Time{}
	var row2 Row
	if err := m.Map(r, &row2); err == nil || err.(*MapError).Reason != "missing required field day" {
		t.Errorf("null in non-nullable column: %v", err)
	}
}

func TestBooleanAndIntegerPartitions(t *testing.T) {
	cfg := Config{Columns: []Column{
		{Name: "on", Type: "boolean"}, {Name: "n", Type: "long"}, {Name: "s", Type: "string"}, {Name: "v", Type: "double"},
	}}
	m, err := New(cfg, []string{"on", "n", "s"})
	if err != nil {
		t.Fatal(err)
	}
	row, _ := mustMap(t, m, &Record{Value: []byte(`{"on":false,"n":-12,"s":"","v":0}`)})
	if string(row.Key) != "on=false/n=-12/s=__HIVE_DEFAULT_PARTITION__" {
		t.Errorf("key %q", row.Key)
	}
	if p := partitions(row); p[0] != "false" || p[1] != "-12" || p[2] != nil {
		t.Errorf("partitions %v", p)
	}
	row, _ = mustMap(t, m, &Record{Value: []byte(`{"v":1}`)})
	if string(row.Key) != "on=__HIVE_DEFAULT_PARTITION__/n=__HIVE_DEFAULT_PARTITION__/s=__HIVE_DEFAULT_PARTITION__" {
		t.Errorf("key %q", row.Key)
	}
}

func TestValidate(t *testing.T) {
	base := func(edit func(*Config)) Config {
		c := DefaultConfig()
		c.Columns = append([]Column(nil), c.Columns...)
		edit(&c)
		return c
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{base(func(c *Config) { c.Columns[3].Type = "varchar" }), `table.columns[3].type: unknown type "varchar"`},
		{base(func(c *Config) { c.Columns[5].Source = "date(x)" }), `table.columns[5].source: date(x) refers to unknown column "x"`},
		{base(func(c *Config) { c.Columns[2].Source = "date(event_date)" }), `table.columns[2].source: date(event_date) refers to unknown column "event_date"`},
		{base(func(c *Config) { c.Columns[13].Source = "date(device_id)" }), `table.columns[13].source: date(device_id): column "device_id" is string, not timestamp`},
		{base(func(c *Config) { c.Columns[4].Name = "device_id" }), `table.columns[4].name: duplicate column "device_id"`},
		{base(func(c *Config) { c.Columns[1].Name = "" }), `table.columns[1].name: empty column name`},
		{base(func(c *Config) { c.Columns[1].Source = "payload..x" }), `table.columns[1].source: JSON path "payload..x" has an empty segment`},
		{base(func(c *Config) { c.Columns[1].Source = "kafka.headers" }), `table.columns[1].source: unknown Kafka metadata "kafka.headers"`},
		{base(func(c *Config) { c.Columns[1].Source = "upper(x)" }), `table.columns[1].source: unknown function in "upper(x)"`},
		{base(func(c *Config) { c.Columns[1].Source = "kafka.offset" }), `table.columns[1].type: source "kafka.offset" cannot fill a string column`},
		{base(func(c *Config) { c.Mode = "lenient" }), `table.mode: unknown mode "lenient"`},
		{base(func(c *Config) { c.MaxRecordBytes = -1 }), `table.max_record_bytes: must not be negative`},
		{Config{}, `table.columns: no columns`},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want %s", err, tc.want)
		}
		if _, err := New(tc.cfg, nil); err == nil {
			t.Errorf("New accepted what Validate refused: %s", tc.want)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
	for _, tc := range []struct {
		parts []string
		want  string
	}{
		{[]string{"device_type", "nope"}, `table.partition_columns[1]: unknown column "nope"`},
		{[]string{"power"}, `table.partition_columns[0]: column "power" is double; partition columns must be`},
		{[]string{"event_time"}, `table.partition_columns[0]: column "event_time" is timestamp`},
		{[]string{"device_type", "device_type"}, `table.partition_columns[1]: duplicate partition column "device_type"`},
	} {
		if _, err := New(DefaultConfig(), tc.parts); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("New(%v) = %v, want %s", tc.parts, err, tc.want)
		}
	}
}

func TestConfigYAML(t *testing.T) {
	var doc struct {
		Table Config `yaml:"table"`
	}
	src := `
table:
  mode: permissive
  max_record_bytes: 4096
  columns:
    - {name: device_id, type: string, required: true}
    - {name: power, type: double, source: payload.power, nullable: false}
    - {name: seen, type: timestamp, source: now()}
`
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	c := doc.Table
	if c.Mode != Permissive || c.MaxRecordBytes != 4096 || len(c.Columns) != 3 || !c.Columns[0].Required ||
		!c.Columns[0].IsNullable() || c.Columns[1].IsNullable() || c.Columns[1].Source != "payload.power" {
		t.Fatalf("parsed %+v", c)
	}
	m, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	err = m.Map(&Record{Value: []byte(`{"device_id":"a"}`)}, &row)
	var me *MapError
	if !errors.As(err, &me) || me.Reason != "missing required field power" || me.Column != "power" || me.Path != "payload.power" {
		t.Errorf("err %v", err)
	}
}
