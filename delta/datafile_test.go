package delta

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/parquet-go/parquet-go/format"

	"github.com/deltaflow/deltaflow/storage"
)

func allTypesSchema() *StructType {
	f := func(name string, t DataType, nullable bool) StructField {
		return StructField{Name: name, Type: t, Nullable: nullable}
	}
	// Deliberately not in alphabetical order.
	return &StructType{Fields: []StructField{
		f("z_string", String, true),
		f("long", Long, true),
		f("integer", Integer, true),
		f("short", Short, true),
		f("byte", Byte, true),
		f("float", Float, true),
		f("double", Double, true),
		f("boolean", Boolean, true),
		f("binary", Binary, true),
		f("date", Date, true),
		f("ts", Timestamp, true),
		f("ts_ntz", TimestampNTZ, true),
		f("a_required", Long, false),
	}}
}

func allTypesRows() []Row {
	ts := time.Date(2023, 6, 15, 12, 30, 0, 123456000, time.UTC)
	day := time.Date(2023, 1, 15, 0, 0, 0, 0, time.UTC)
	return []Row{
		{"héllo <&>", int64(-5), int32(7), int16(-300), int8(-128), float32(1.5), 2.25, true, []byte{0, 1, 2},
			day, ts, ts.Add(time.Hour), int64(1)},
		// Zeros must stay non-null (the map[string]any data-loss trap).
		{"", int64(0), int32(0), int16(0), int8(0), float32(0), 0.0, false, []byte{},
			time.Unix(0, 0).UTC(), time.Unix(0, 0).UTC(), time.Unix(0, 0).UTC(), int64(0)},
		{nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, int64(2)},
		{"zzz", int64(math.MaxInt64), int32(math.MinInt32), int16(math.MaxInt16), int8(math.MaxInt8), float32(-3.25), math.Inf(1), true, []byte("x"),
			time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC),
			time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), int64(-3)},
	}
}

func TestRoundTripAllTypes(t *testing.T) {
	ctx := context.Background()
	store := localStore(t, t.TempDir())
	schema := allTypesSchema()
	rows := allTypesRows()
	add, err := WriteDataFile(ctx, store, schema, nil, nil, rows, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(add.Path, ".c000.snappy.parquet") || !strings.HasPrefix(add.Path, "part-00000-") || !add.DataChange || add.Size <= 0 {
		t.Errorf("add = %+v", add)
	}
	got, err := ReadDataFile(ctx, store, schema, nil, add)
	if err != nil {
		t.Fatal(err)
	}
	want := allTypesRows()
	// float32 column holds -3.25 exactly; +Inf double too.
	if !reflect.DeepEqual(got, want) {
		for i := range want {
			for j := range want[i] {
				if !reflect.DeepEqual(got[i][j], want[i][j]) {
					t.Errorf("row %d col %s: got %#v, want %#v", i, schema.Fields[j].Name, got[i][j], want[i][j])
				}
			}
		}
	}

	// The file's columns are in declared order with the Delta mapping.
	f := openParquet(t, store, add)
	var names []string
	for _, fld := range f.Schema().Fields() {
		names = append(names, fld.Name())
	}
	var wantNames []string
	for _, fld := range schema.Fields {
		wantNames = append(wantNames, fld.Name)
	}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("file columns %v, want %v", names, wantNames)
	}
	wantSchema := `message spark_schema {
	optional binary z_string (STRING);
	optional int64 long (INT(64,true));
	optional int32 integer (INT(32,true));
	optional int32 short (INT(16,true));
	optional int32 byte (INT(8,true));
	optional float float;
	optional double double;
	optional boolean boolean;
	optional binary binary;
	optional int32 date (DATE);
	optional int64 ts (TIMESTAMP(isAdjustedToUTC=true,unit=MICROS));
	optional int64 ts_ntz (TIMESTAMP(isAdjustedToUTC=false,unit=MICROS));
	required int64 a_required (INT(64,true));
}`
	if s := f.Schema().String(); s != wantSchema {
		t.Errorf("file schema:\n%s\nwant:\n%s", s, wantSchema)
	}
	md := f.Metadata()
	for _, cc := range md.RowGroups[0].Columns {
		if cc.MetaData.Codec != format.Snappy {
			t.Errorf("column %v codec %v", cc.MetaData.PathInSchema, cc.MetaData.Codec)
		}
	}
}

func openParquet(t *testing.T, store storage.Store, add *Add) *parquet.File {
	t.Helper()
	key, err := DecodePath(add.Path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestDataPageV1(t *testing.T) {
	ctx := context.Background()
	store := localStore(t, t.TempDir())
	add, err := WriteDataFile(ctx, store, allTypesSchema(), nil, nil, allTypesRows(), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := openParquet(t, store, add)
	for _, cc := range f.Metadata().RowGroups[0].Columns {
		if len(cc.MetaData.EncodingStats) == 0 {
			t.Fatalf("column %v has no encoding stats", cc.MetaData.PathInSchema)
		}
		for _, e := range cc.MetaData.EncodingStats {
			if e.PageType == format.DataPageV2 {
				t.Errorf("column %v has a V2 data page", cc.MetaData.PathInSchema)
			}
		}
	}
}

func TestPartitionedWriteAndRead(t *testing.T) {
	ctx := context.Background()
	store := localStore(t, t.TempDir())
	schema := &StructType{Fields: []StructField{
		{Name: "device_id", Type: String, Nullable: true},
		{Name: "device_type", Type: String, Nullable: true},
		{Name: "power", Type: Double, Nullable: true},
		{Name: "event_date", Type: Date, Nullable: true},
	}}
	parts := []string{"device_type", "event_date"}
	dt, ed := "smart plug:1", "2026-06-22"
	pv := map[string]*string{"device_type": &dt, "event_date": &ed}
	rows := []Row{
		{"p1", "ignored", 84.3, nil},
		{"p2", nil, 0.0, nil},
	}
	add, err := WriteDataFile(ctx, store, schema, parts, pv, rows, WriterOptions{Compression: Zstd})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(add.Path, "device_type=smart%20plug%253A1/event_date=2026-06-22/part-00000-") ||
		!strings.HasSuffix(add.Path, ".c000.zstd.parquet") {
		t.Errorf("path %q", add.Path)
	}
	if *add.PartitionValues["device_type"] != dt {
		t.Errorf("partition values %v", add.PartitionValues)
	}
	got, err := ReadDataFile(ctx, store, schema, parts, add)
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 6, 22, 0, 0, 0, 0, time.UTC)
	want := []Row{{"p1", dt, 84.3, day}, {"p2", dt, 0.0, day}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	f := openParquet(t, store, add)
	if n := len(f.Schema().Fields()); n != 2 {
		t.Errorf("file has %d columns, want 2 (no partition columns)", n)
	}
	if c := f.Metadata().RowGroups[0].Columns[0].MetaData.Codec; c != format.Zstd {
		t.Errorf("codec %v", c)
	}
	want1 := `{"numRecords":2,"minValues":{"device_id":"p1","power":0.0},"maxValues":{"device_id":"p2","power":84.3},"nullCount":{"device_id":0,"power":0}}`
	if add.Stats != want1 {
		t.Errorf("stats %s\nwant  %s", add.Stats, want1)
	}

	// Schema evolution: a column the file lacks reads as null.
	evolved := &StructType{Fields: append(append([]StructField{}, schema.Fields...), StructField{Name: "new_col", Type: Long, Nullable: true})}
	got, err = ReadDataFile(ctx, store, evolved, parts, add)
	if err != nil {
		t.Fatal(err)
	}
	if len(got[0]) != 5 || got[0][4] != nil {
		t.Errorf("evolved row %v", got[0])
	}
}

func TestRowGroupsBounded(t *testing.T) {
	ctx := context.Background()
	store := localStore(t, t.TempDir())
	schema := &StructType{Fields: []StructField{{Name: "id", Type: Long, Nullable: false}, {Name: "s", Type: String, Nullable: true}}}
	var rows []Row
	for i := range 3500 {
		rows = append(rows, Row{int64(i), strings.Repeat("x", i%50)})
	}
	add, err := WriteDataFile(ctx, store, schema, nil, nil, rows, WriterOptions{RowGroupRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	f := openParquet(t, store, add)
	var sizes []int64
	for _, rg := range f.RowGroups() {
		sizes = append(sizes, rg.NumRows())
	}
	if !reflect.DeepEqual(sizes, []int64{1000, 1000, 1000, 500}) {
		t.Errorf("row groups %v", sizes)
	}
	got, err := ReadDataFile(ctx, store, schema, nil, add)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rows) {
		t.Errorf("read back %d rows, differ", len(got))
	}
}

func TestCompressionCodecs(t *testing.T) {
	ctx := context.Background()
	schema := &StructType{Fields: []StructField{{Name: "s", Type: String, Nullable: true}}}
	var rows []Row
	for i := range 5000 {
		rows = append(rows, Row{strings.Repeat("abc", i%7) + "-device"})
	}
	sizes := map[Compression]int64{}
	for _, c := range []Compression{Snappy, Zstd, Uncompressed} {
		store := localStore(t, t.TempDir())
		add, err := WriteDataFile(ctx, store, schema, nil, nil, rows, WriterOptions{Compression: c})
		if err != nil {
			t.Fatal(c, err)
		}
		got, err := ReadDataFile(ctx, store, schema, nil, add)
		if err != nil || !reflect.DeepEqual(got, rows) {
			t.Fatalf("%v: read back err=%v equal=%v", c, err, reflect.DeepEqual(got, rows))
		}
		sizes[c] = add.Size
	}
	if !(sizes[Zstd] < sizes[Snappy] && sizes[Snappy] < sizes[Uncompressed]) {
		t.Errorf("sizes %v", sizes)
	}
}

func TestWriteRowsRejectsBadRows(t *testing.T) {
	schema := &StructType{Fields: []StructField{{Name: "a", Type: Long, Nullable: false}, {Name: "d", Type: Date, Nullable: true}}}
	var buf bytes.Buffer
	w, err := NewFileWriter(&buf, schema, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps := w.Schema()
	good := parquet.Row{ps.Int64(0, 1), ps.Date(1, time.Now())}
	for name, row := range map[string]parquet.Row{
		"short row":          {ps.Int64(0, 1)},
		"null in required":   {ps.Null(0), ps.Null(1)},
		"wrong kind":         {ps.Int32(0, 1), ps.Null(1)},
		"wrong column index": {ps.Int64(1, 1), ps.Null(1)},
		"time as int64 date": {ps.Int64(0, 1), ps.Int64(1, 5)},
	} {
		n, err := w.WriteRows([]parquet.Row{good, row})
		if err == nil || n != 1 {
			t.Errorf("%s: n=%d err=%v", name, n, err)
		}
	}
	if _, err := ps.AppendValue(nil, 1, "2023-01-01"); err == nil {
		t.Error("a string was accepted for a date")
	}
	if _, err := ps.AppendValue(nil, 0, nil); err == nil {
		t.Error("nil was accepted for a required column")
	}
	st, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if st.NumRecords != 5 {
		t.Errorf("NumRecords %d", st.NumRecords)
	}
	// Struct columns are written (nested_test.go), not a variant inside one.
	nested := &StructType{Fields: []StructField{{Name: "a", Type: Long}, {Name: "v", Type: Variant, Nullable: true}}}
	if _, err := NewFileWriter(&buf, &StructType{Fields: []StructField{{Name: "s", Type: nested}}}, WriterOptions{}); err == nil ||
		!strings.Contains(err.Error(), `column "s"`) || !strings.Contains(err.Error(), "variant") {
		t.Errorf("struct column with a variant: %v", err)
	}
}

func TestAbortLeavesNoFile(t *testing.T) {
	ctx := context.Background()
	store := localStore(t, t.TempDir())
	schema := &StructType{Fields: []StructField{{Name: "a", Type: Long, Nullable: true}}}
	w, err := CreateDataFile(ctx, store, "x/part-0.parquet", schema, nil, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Row{int64(1)}); err != nil {
		t.Fatal(err)
	}
	w.Abort(nil)
	if _, err := store.Stat(ctx, "x/part-0.parquet"); err == nil {
		t.Error("aborted file exists")
	}
}

// goldenAdds returns the table's schema, partition columns and adds from its
// first commit (snapshot replay lives elsewhere).
func goldenAdds(t *testing.T, table string) (storage.Store, *StructType, []string, []*Add) {
	t.Helper()
	dir := filepath.Join(goldenDir, table)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("golden table missing: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "_delta_log", "00000000000000000000.json"))
	if err != nil {
		t.Fatal(err)
	}
	actions, err := ParseActions("00000000000000000000.json", data)
	if err != nil {
		t.Fatal(err)
	}
	var schema *StructType
	var parts []string
	var adds []*Add
	for _, a := range actions {
		if a.MetaData != nil {
			if schema, err = a.MetaData.Schema(); err != nil {
				t.Fatal(err)
			}
			parts = a.MetaData.PartitionColumns
		}
		if a.Add != nil {
			adds = append(adds, a.Add)
		}
	}
	return localStore(t, dir), schema, parts, adds
}

// readGolden reads every add of the table, keyed by the add's path.
func readGolden(t *testing.T, table string) (*StructType, map[string][]Row) {
	store, schema, parts, adds := goldenAdds(t, table)
	out := map[string][]Row{}
	for _, add := range adds {
		rows, err := ReadDataFile(context.Background(), store, schema, parts, add)
		if err != nil {
			t.Fatal(err)
		}
		out[add.Path] = rows
	}
	return schema, out
}

func allRows(m map[string][]Row) []Row {
	var rows []Row
	for _, r := range m {
		rows = append(rows, r...)
	}
	return rows
}

func rowByFirst(rows []Row, first any) Row {
	for _, r := range rows {
		if reflect.DeepEqual(r[0], first) {
			return r
		}
	}
	return nil
}

// Expected values below were read with delta-rs (deltalake 1.x, pyarrow).
func TestGoldenTimestamps(t *testing.T) {
	utc := func(y int, mo time.Month, d, h, mi, s, ms int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ms*1e6, time.UTC)
	}
	want := []Row{
		{int32(0), utc(2020, 1, 1, 8, 9, 10, 1), utc(2020, 2, 1, 8, 9, 10, 0)},
		{int32(1), utc(2021, 10, 1, 8, 9, 20, 0), utc(1999, 1, 1, 9, 0, 0, 0)},
		{int32(2), utc(2021, 10, 1, 8, 9, 20, 0), utc(2000, 1, 1, 9, 0, 0, 0)},
		{int32(3), utc(1969, 1, 1, 0, 0, 0, 0), utc(1969, 1, 1, 0, 0, 0, 0)},
		{int32(4), nil, nil},
	}
	for _, table := range []string{"spark-kernel-timestamp-INT96", "spark-kernel-timestamp-TIMESTAMP_MICROS"} {
		t.Run(table, func(t *testing.T) {
			_, files := readGolden(t, table)
			rows := allRows(files)
			if len(rows) != len(want) {
				t.Fatalf("%d rows", len(rows))
			}
			for _, w := range want {
				if got := rowByFirst(rows, w[0]); !reflect.DeepEqual(got, w) {
					t.Errorf("got %v, want %v", got, w)
				}
			}
		})
	}
}

func TestGoldenPartitionValues(t *testing.T) {
	_, files := readGolden(t, "spark-data-reader-partition-values")
	rows := allRows(files)
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	day := time.Date(2021, 9, 8, 0, 0, 0, 0, time.UTC)
	ts := time.Date(2021, 9, 8, 11, 11, 11, 0, time.UTC)
	list := func(v int32) []any {
		return []any{map[string]any{"val": v}, map[string]any{"val": v}, map[string]any{"val": v}}
	}
	nested := func(s string, v int32) map[string]any {
		return map[string]any{"aa": s, "ab": s, "ac": map[string]any{"aca": v, "acb": int64(v)}}
	}
	want := []Row{
		{int32(0), int64(0), int8(0), int16(0), true, float32(0), 0.0, "0", "null", day, ts, "0", list(0), nested("0", 0), "0"},
		{int32(1), int64(1), int8(1), int16(1), false, float32(1), 1.0, "1", "null", day, ts, "1", list(1), nested("1", 1), "1"},
		{nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, list(2), nested("2", 2), "2"},
	}
	for _, w := range want {
		var got Row
		for _, r := range rows {
			if r[14] == w[14] {
				got = r
			}
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("got  %#v\nwant %#v", got, w)
		}
	}
}

func TestGoldenPartitionedTypes(t *testing.T) {
	_, files := readGolden(t, "rs-delta-2.2.0-partitioned-types")
	want := []Row{{int32(4), "c", int32(5)}, {int32(5), "b", int32(6)}, {int32(6), "a", int32(4)}}
	rows := allRows(files)
	for _, w := range want {
		if got := rowByFirst(rows, w[0]); !reflect.DeepEqual(got, w) {
			t.Errorf("got %v, want %v", got, w)
		}
	}
	if len(rows) != 3 {
		t.Errorf("%d rows", len(rows))
	}
}

func TestGoldenAllTypesInt96Decimal(t *testing.T) {
	_, files := readGolden(t, "spark-data-skipping-basic-stats-all-types-checkpoint")
	rows := allRows(files)
	want := Row{int32(0), int64(0), int8(0), int16(0), float32(0), 0.0, "0",
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2000, 1, 1, 8, 0, 0, 0, time.UTC), "0"}
	if len(rows) != 1 || !reflect.DeepEqual(rows[0], want) {
		t.Errorf("got %#v\nwant %#v", rows, want)
	}
}

// TestDeltaRSReadsAllTypes: every type this library writes (timestamp_ntz
// included) reads back in delta-rs with the same values.
func TestDeltaRSReadsAllTypes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := localStore(t, dir)
	schema := allTypesSchema()
	schema.Fields = append(schema.Fields, StructField{Name: "part", Type: String, Nullable: true})
	parts := []string{"part"}
	var actions []Action
	md := &Metadata{ID: "00000000-0000-0000-0000-000000000001", Format: Format{Provider: "parquet"},
		SchemaString: schema.SchemaString(), PartitionColumns: parts}
	actions = append(actions,
		Action{Protocol: &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz"}, WriterFeatures: []string{"timestampNtz"}}},
		Action{MetaData: md})
	for _, p := range []string{"a", "b/c"} {
		var rows []Row
		for _, r := range allTypesRows() {
			rows = append(rows, append(append(Row{}, r...), nil))
		}
		pv := p
		add, err := WriteDataFile(ctx, store, schema, parts, map[string]*string{"part": &pv}, rows, WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		actions = append(actions, Action{Add: add})
	}
	b, err := EncodeActions(actions)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, "_delta_log/00000000000000000000.json", b); err != nil {
		t.Fatal(err)
	}
	compareWithDeltaRS(t, NewTable(store), dir, true)
}

// TestDecimalRoundTrip: decimals are written as Spark writes them (INT32 up
// to 9 digits, INT64 up to 18, FIXED_LEN_BYTE_ARRAY beyond) and read back
// at the column's scale; a value with too many digits is refused.
func TestDecimalRoundTrip(t *testing.T) {
	schema := &StructType{Fields: []StructField{
		{Name: "a", Type: DecimalType{Precision: 5, Scale: 2}, Nullable: true},
		{Name: "b", Type: DecimalType{Precision: 12, Scale: 3}, Nullable: true},
		{Name: "c", Type: DecimalType{Precision: 30, Scale: 5}, Nullable: true},
	}}
	rows := []Row{
		{"1.5", "-0.001", "-1234567890123456789012.5"},
		{"-999.99", "999999999.999", "99999999999999999999999.99999"},
		{nil, "0", "-0.00001"},
	}
	want := []Row{
		{"1.50", "-0.001", "-1234567890123456789012.50000"},
		{"-999.99", "999999999.999", "99999999999999999999999.99999"},
		{nil, "0.000", "-0.00001"},
	}
	store := localStore(t, t.TempDir())
	add, err := WriteDataFile(t.Context(), store, schema, nil, nil, rows, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadDataFile(t.Context(), store, schema, nil, add)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read %v, want %v", got, want)
	}
	for _, bad := range []Row{{"1.234", "0", "0"}, {"1000", "0", "0"}, {"x", "0", "0"}} {
		if _, err := WriteDataFile(t.Context(), store, schema, nil, nil, []Row{bad}, WriterOptions{}); err == nil || !strings.Contains(err.Error(), `column "a"`) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// TestDecimalParquetBounds: the Parquet statistics of a decimal stored as a
// FIXED_LEN_BYTE_ARRAY order its values as signed integers, as the Parquet
// spec has them (parquet-go alone orders them as unsigned bytes: a chunk of
// -1 and 1 said min 1, max -1, and Spark's filter pushdown skipped the row
// group for `c = 1`): in the column chunk and the column index, whose
// boundary order is left unordered.
func TestDecimalParquetBounds(t *testing.T) {
	schema := &StructType{Fields: []StructField{
		{Name: "c", Type: DecimalType{Precision: 30, Scale: 2}, Nullable: true},
		{Name: "r", Type: DecimalType{Precision: 38, Scale: 0}, Nullable: false},
	}}
	var buf bytes.Buffer
	w, err := NewFileWriter(&buf, schema, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Row{{"-1.00", "7"}, {"1.00", "-99999999999999999999999999999999999999"}, {"5.00", "-5"}, {nil, "99999999999999999999999999999999999999"}} {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	text := func(col int, b []byte) string { return decimalText(schema.Fields[col].Type.(DecimalType), b) }
	want := [][2]string{{"-1.00", "5.00"}, {"-99999999999999999999999999999999999999", "99999999999999999999999999999999999999"}}
	for col, chunk := range f.RowGroups()[0].ColumnChunks() {
		st := f.Metadata().RowGroups[0].Columns[col].MetaData.Statistics
		if got := [2]string{text(col, st.MinValue), text(col, st.MaxValue)}; got != want[col] {
			t.Errorf("column %d: chunk bounds %v, want %v", col, got, want[col])
		}
		ci, err := chunk.ColumnIndex()
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]string{text(col, ci.MinValue(0).ByteArray()), text(col, ci.MaxValue(0).ByteArray())}; ci.NumPages() != 1 || got != want[col] {
			t.Errorf("column %d: column index of %d pages, bounds %v, want %v", col, ci.NumPages(), got, want[col])
		}
		if ci.IsAscending() || ci.IsDescending() {
			t.Errorf("column %d: the column index says its bounds are ordered", col)
		}
	}
}

// decimalText renders the unscaled value b (big-endian two's complement)
// of a decimal d.
func decimalText(d DecimalType, b []byte) string {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	r := new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale)), nil))
	return r.FloatString(d.Scale)
}
