package delta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta/schema"
)

func statsOf(t *testing.T, schema *StructType, opts WriterOptions, rows ...Row) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewFileWriter(&buf, schema, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	st, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if st.NumRecords != int64(len(rows)) || st.Size != int64(buf.Len()) {
		t.Errorf("FileStats %+v, buffer %d bytes", st, buf.Len())
	}
	if !json.Valid([]byte(st.Stats)) {
		t.Errorf("invalid JSON %s", st.Stats)
	}
	return st.Stats
}

func TestStatsVectors(t *testing.T) {
	fields := func(f ...StructField) *StructType { return &StructType{Fields: f} }
	col := func(name string, typ DataType) StructField { return StructField{Name: name, Type: typ, Nullable: true} }
	ts := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	long := strings.Repeat("x", 40)
	cases := []struct {
		name   string
		schema *StructType
		opts   WriterOptions
		rows   []Row
		want   string
	}{
		{"all types, key order is schema order",
			fields(col("s", String), col("l", Long), col("i", Integer), col("sh", Short), col("b", Byte),
				col("f", Float), col("d", Double), col("bo", Boolean), col("bin", Binary), col("dt", Date),
				col("ts", Timestamp), col("ntz", TimestampNTZ)),
			WriterOptions{},
			[]Row{
				{"b<&>", int64(-1), int32(5), int16(3), int8(-2), float32(0.1), 1.0, true, []byte("x"),
					time.Date(2023, 1, 15, 0, 0, 0, 0, time.UTC), ts("2023-06-15T12:30:00.999999Z"), ts("2023-06-15T12:30:00.5Z")},
				{"a", int64(7), int32(-5), int16(-3), int8(2), float32(-2.5), -1e-7, false, nil,
					time.Date(1969, 7, 20, 0, 0, 0, 0, time.UTC), ts("1969-12-31T23:59:59.9995Z"), ts("2023-06-15T14:30:00+02:00")},
			},
			`{"numRecords":2,"minValues":{"s":"a","l":-1,"i":-5,"sh":-3,"b":-2,"f":-2.5,"d":-1e-07,"dt":"1969-07-20","ts":"1969-12-31T23:59:59.999Z","ntz":"2023-06-15T12:30:00.500"},` +
				`"maxValues":{"s":"b<&>","l":7,"i":5,"sh":3,"b":2,"f":0.1,"d":1.0,"dt":"2023-01-15","ts":"2023-06-15T12:30:00.999Z","ntz":"2023-06-15T14:30:00.000"},` +
				`"nullCount":{"s":0,"l":0,"i":0,"sh":0,"b":0,"f":0,"d":0,"bo":0,"bin":1,"dt":0,"ts":0,"ntz":0}}`},
		// What Spark 3.5.1 with Delta 3.2.0 wrote for these values (its
		// stats JSON writes a decimal as Java's BigDecimal.toString).
		{"decimals as Spark writes them",
			fields(col("a", DecimalType{Precision: 10, Scale: 8}), col("b", DecimalType{Precision: 5, Scale: 2}),
				col("c", DecimalType{Precision: 38, Scale: 10})),
			WriterOptions{},
			[]Row{{"0", "1.5", "-12345678901234567890.1234567890"}, {"0.00000001", "-99.25", "0.0000000001"},
				{"-0.00000123", "0.01", "0.0000000001"}},
			`{"numRecords":3,"minValues":{"a":-0.00000123,"b":-99.25,"c":-12345678901234567890.1234567890},` +
				`"maxValues":{"a":1E-8,"b":1.50,"c":1E-10},"nullCount":{"a":0,"b":0,"c":0}}`},
		{"decimal bounds in scientific and plain notation, as Spark writes them",
			fields(col("z", DecimalType{Precision: 10, Scale: 8}), col("e7", DecimalType{Precision: 10, Scale: 8}),
				col("e6", DecimalType{Precision: 10, Scale: 8}), col("p38", DecimalType{Precision: 38, Scale: 0}),
				col("s38", DecimalType{Precision: 38, Scale: 38}), col("s3", DecimalType{Precision: 3, Scale: 3}),
				col("n", DecimalType{Precision: 10, Scale: 8})),
			WriterOptions{},
			[]Row{{"0", "0.0000001", "0.000001", "99999999999999999999999999999999999999", "0.00000000000000000000000000000000000001", "0", "-0.00000012"},
				{"0", "0.0000001", "0.000001", "-99999999999999999999999999999999999999", "-0.99999999999999999999999999999999999999", "-0.5", "-0.00000012"}},
			`{"numRecords":2,"minValues":{"z":0E-8,"e7":1.0E-7,"e6":0.00000100,"p38":-99999999999999999999999999999999999999,` +
				`"s38":-0.99999999999999999999999999999999999999,"s3":-0.500,"n":-1.2E-7},` +
				`"maxValues":{"z":0E-8,"e7":1.0E-7,"e6":0.00000100,"p38":99999999999999999999999999999999999999,"s38":1E-38,"s3":0.000,"n":-1.2E-7},` +
				`"nullCount":{"z":0,"e7":0,"e6":0,"p38":0,"s38":0,"s3":0,"n":0}}`},
		{"all-null column, zeros",
			fields(col("a", Double), col("n", Long), col("s", String)),
			WriterOptions{},
			[]Row{{0.0, nil, long}, {nil, nil, "y"}},
			`{"numRecords":2,"minValues":{"a":0.0,"s":"` + long[:32] + `"},"maxValues":{"a":0.0,"s":"y"},"nullCount":{"a":1,"n":2,"s":0}}`},
		{"string max tie-breaker",
			fields(col("s", String)),
			WriterOptions{},
			[]Row{{long}, {"a"}},
			`{"numRecords":2,"minValues":{"s":"a"},"maxValues":{"s":"` + long[:32] + "\x7f" + `"},"nullCount":{"s":0}}`},
		{"NaN and Inf leave min/max out",
			fields(col("nan", Double), col("inf", Float), col("ok", Double)),
			WriterOptions{},
			[]Row{{math.NaN(), float32(math.Inf(-1)), 1.5}, {1.0, float32(2), 2.5}},
			`{"numRecords":2,"minValues":{"ok":1.5},"maxValues":{"ok":2.5},"nullCount":{"nan":0,"inf":0,"ok":0}}`},
		{"no eligible column",
			fields(col("b", Boolean)),
			WriterOptions{},
			[]Row{{true}},
			`{"numRecords":1,"nullCount":{"b":0}}`},
		{"all eligible columns null",
			fields(col("l", Long)),
			WriterOptions{},
			[]Row{{nil}},
			`{"numRecords":1,"minValues":{},"maxValues":{},"nullCount":{"l":1}}`},
		{"numIndexedCols 1",
			fields(col("a", Long), col("b", Long)),
			WriterOptions{NumIndexedCols: 1},
			[]Row{{int64(1), int64(2)}},
			`{"numRecords":1,"minValues":{"a":1},"maxValues":{"a":1},"nullCount":{"a":0}}`},
		{"no column stats",
			fields(col("a", Long)),
			WriterOptions{NoColumnStats: true},
			[]Row{{int64(1)}},
			`{"numRecords":1}`},
		{"empty file",
			fields(col("a", Long)),
			WriterOptions{},
			nil,
			`{"numRecords":0,"minValues":{},"maxValues":{},"nullCount":{"a":0}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := statsOf(t, c.schema, c.opts, c.rows...); got != c.want {
				t.Errorf("stats\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestStatsFirst32Columns(t *testing.T) {
	schema := &StructType{}
	row := Row{}
	for i := range 40 {
		schema.Fields = append(schema.Fields, StructField{Name: fmt.Sprintf("c%02d", i), Type: Long, Nullable: true})
		row = append(row, int64(i))
	}
	st, err := ParseStats(statsOf(t, schema, WriterOptions{}, row))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.MinValues) != 32 || len(st.MaxValues) != 32 || len(st.NullCount) != 32 {
		t.Fatalf("%d/%d/%d columns", len(st.MinValues), len(st.MaxValues), len(st.NullCount))
	}
	if _, ok := st.NullCount["c31"]; !ok {
		t.Error("c31 missing")
	}
	if _, ok := st.NullCount["c32"]; ok {
		t.Error("c32 present")
	}
	all, _ := ParseStats(statsOf(t, schema, WriterOptions{NumIndexedCols: -1}, row))
	if len(all.NullCount) != 40 {
		t.Errorf("NumIndexedCols -1: %d columns", len(all.NullCount))
	}
	var o WriterOptions
	if err := o.ApplyTableConfig(map[string]string{"delta.dataSkippingNumIndexedCols": "0"}); err != nil || !o.NoColumnStats {
		t.Errorf("config 0: %+v %v", o, err)
	}
	if err := o.ApplyTableConfig(map[string]string{"delta.dataSkippingNumIndexedCols": "5"}); err != nil || o.NoColumnStats || o.NumIndexedCols != 5 {
		t.Errorf("config 5: %+v %v", o, err)
	}
	if err := o.ApplyTableConfig(map[string]string{"delta.dataSkippingNumIndexedCols": "x"}); err == nil {
		t.Error("bad config accepted")
	}
}

func TestParseStats(t *testing.T) {
	// Spark (session time zone offset), nested struct, tightBounds, extra fields.
	s := `{"numRecords":3,"minValues":{"id":1,"ts":"2000-01-01T00:00:00.000-08:00","a":{"b":"x","c":{"d":1.5}}},` +
		`"maxValues":{"id":9,"ts":"2000-01-01T00:00:00.000-08:00","a":{"b":"y"}},` +
		`"nullCount":{"id":0,"ts":1,"a":{"b":2,"c":{"d":0}},"arr":3},"tightBounds":true,"other":[1]}`
	st, err := ParseStats(s)
	if err != nil {
		t.Fatal(err)
	}
	if st.NumRecords != 3 || st.TightBounds == nil || !*st.TightBounds {
		t.Errorf("%+v", st)
	}
	if st.MinValues["id"] != json.Number("1") || st.MinValues["a.b"] != "x" || st.MinValues["a.c.d"] != json.Number("1.5") {
		t.Errorf("min %v", st.MinValues)
	}
	wantNulls := map[string]int64{"id": 0, "ts": 1, "a.b": 2, "a.c.d": 0, "arr": 3}
	if !reflect.DeepEqual(st.NullCount, wantNulls) {
		t.Errorf("nullCount %v", st.NullCount)
	}
	v, err := StatValue(Timestamp, st.MinValues["ts"])
	if err != nil || !v.(time.Time).Equal(time.Date(2000, 1, 1, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("ts %v %v", v, err)
	}
	for _, c := range []struct {
		t    DataType
		in   any
		want any
	}{
		{Integer, json.Number("5"), int32(5)}, {Long, json.Number("-5"), int64(-5)}, {Short, json.Number("5"), int16(5)},
		{Byte, json.Number("5"), int8(5)}, {Double, json.Number("1.0"), 1.0}, {Float, json.Number("0.1"), float32(0.1)},
		{Date, "2023-01-15", time.Date(2023, 1, 15, 0, 0, 0, 0, time.UTC)},
		{TimestampNTZ, "2023-06-15T12:30:00.000", time.Date(2023, 6, 15, 12, 30, 0, 0, time.UTC)},
		{String, "abc", "abc"}, {DecimalType{Precision: 5, Scale: 2}, json.Number("1.25"), "1.25"},
	} {
		got, err := StatValue(c.t, c.in)
		if err != nil || got != c.want {
			t.Errorf("StatValue(%s, %v) = %v %v, want %v", c.t, c.in, got, err, c.want)
		}
	}

	// Minimal stats and empty objects from other writers.
	st, err = ParseStats(`{"numRecords":0}`)
	if err != nil || st.NumRecords != 0 || len(st.MinValues) != 0 || st.NullCount == nil {
		t.Errorf("%+v %v", st, err)
	}
	st, err = ParseStats(`{}`)
	if err != nil || st.NumRecords != -1 {
		t.Errorf("%+v %v", st, err)
	}
	if _, err := ParseStats(`{"numRecords":`); err == nil {
		t.Error("truncated stats accepted")
	}
	// Round trip with our own writer's output.
	ours := statsOf(t, &StructType{Fields: []StructField{{Name: "x", Type: Long, Nullable: true}}}, WriterOptions{}, Row{int64(4)}, Row{nil})
	st, err = ParseStats(ours)
	if err != nil || st.NumRecords != 2 || st.NullCount["x"] != 1 || st.MaxValues["x"] != json.Number("4") {
		t.Errorf("%+v %v", st, err)
	}
}

// TestGoldenStatsMatchSpark recomputes stats of Spark-written files with our
// writer and compares with what Spark logged (time zone aside).
func TestGoldenStatsMatchSpark(t *testing.T) {
	store, table, parts, adds := goldenAdds(t, "rs-delta-2.2.0-partitioned-types")
	for _, add := range adds {
		rows, err := ReadDataFile(t.Context(), store, table, parts, add)
		if err != nil {
			t.Fatal(err)
		}
		var dataRows []Row
		for _, r := range rows {
			dataRows = append(dataRows, Row{r[2]})
		}
		got := statsOf(t, schema.DataSchema(table, parts), WriterOptions{}, dataRows...)
		if got != add.Stats {
			t.Errorf("stats %s, Spark %s", got, add.Stats)
		}
	}
}
