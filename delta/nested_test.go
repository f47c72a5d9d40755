package delta

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta/schema"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// nestedSchema has struct, array and map columns, nested in each other,
// with decimals, dates, timestamps and binaries inside.
const nestedSchema = `{"type":"struct","fields":[` +
	`{"name":"id","type":"long","nullable":false,"metadata":{}},` +
	`{"name":"s","type":{"type":"struct","fields":[` +
	`{"name":"a","type":"long","nullable":true,"metadata":{}},` +
	`{"name":"b","type":"string","nullable":true,"metadata":{}},` +
	`{"name":"inner","type":{"type":"struct","fields":[` +
	`{"name":"x","type":"double","nullable":true,"metadata":{}},` +
	`{"name":"d","type":"decimal(10,2)","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},` +
	`{"name":"arr","type":{"type":"array","elementType":"long","containsNull":true},"nullable":true,"metadata":{}},` +
	`{"name":"arrs","type":{"type":"array","elementType":{"type":"struct","fields":[` +
	`{"name":"k","type":"string","nullable":true,"metadata":{}},` +
	`{"name":"ts","type":"timestamp","nullable":true,"metadata":{}}]},"containsNull":true},"nullable":true,"metadata":{}},` +
	`{"name":"m","type":{"type":"map","keyType":"string","valueType":{"type":"array","elementType":"long","containsNull":false},"valueContainsNull":true},"nullable":true,"metadata":{}},` +
	`{"name":"mi","type":{"type":"map","keyType":"integer","valueType":"string","valueContainsNull":true},"nullable":true,"metadata":{}},` +
	`{"name":"t","type":{"type":"struct","fields":[` +
	`{"name":"d1","type":"decimal(5,2)","nullable":true,"metadata":{}},` +
	`{"name":"d2","type":"decimal(25,3)","nullable":true,"metadata":{}},` +
	`{"name":"dt","type":"date","nullable":true,"metadata":{}},` +
	`{"name":"tn","type":"timestamp_ntz","nullable":true,"metadata":{}},` +
	`{"name":"bin","type":"binary","nullable":true,"metadata":{}},` +
	`{"name":"f","type":"float","nullable":true,"metadata":{}},` +
	`{"name":"req","type":"integer","nullable":false,"metadata":{}}]},"nullable":true,"metadata":{}}]}`

// nestedRows cover a null at every level: a null column, struct, field,
// element and map value, empty and null arrays and maps.
func nestedRows() []Row {
	ts := time.Date(2024, 6, 15, 19, 30, 45, 123456000, time.UTC)
	day := time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)
	return []Row{
		{int64(1),
			map[string]any{"a": int64(7), "b": "x", "inner": map[string]any{"x": 1.5, "d": "-12.30"}},
			[]any{int64(1), nil, int64(3)},
			[]any{map[string]any{"k": "p", "ts": ts}, nil, map[string]any{"k": nil, "ts": nil}},
			map[string]any{"a": []any{int64(1), int64(2)}, "b": nil, "c": []any{}},
			map[string]any{"-5": "neg", "10": nil},
			map[string]any{"d1": "-999.99", "d2": "1234567890123456789012.345", "dt": day, "tn": ts, "bin": []byte{0, 0xff}, "f": float32(2.5), "req": int32(-1)},
		},
		{int64(2),
			map[string]any{"a": nil, "b": nil, "inner": nil},
			[]any{},
			[]any{},
			map[string]any{},
			map[string]any{},
			map[string]any{"d1": nil, "d2": "-0.001", "dt": nil, "tn": nil, "bin": []byte{}, "f": nil, "req": int32(0)},
		},
		{int64(3), nil, nil, nil, nil, nil, nil},
		{int64(4),
			map[string]any{"a": int64(-3), "b": "yy", "inner": map[string]any{"x": nil, "d": nil}},
			[]any{nil},
			[]any{nil},
			map[string]any{"z": []any{int64(9)}},
			map[string]any{"0": ""},
			map[string]any{"d1": "0.01", "d2": nil, "dt": time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), "tn": nil, "bin": nil, "f": float32(-1.25), "req": int32(5)},
		},
	}
}

// TestNestedRoundTrip: struct, array and map columns are written and read
// back value for value, nulls at every level included.
func TestNestedRoundTrip(t *testing.T) {
	table, err := ParseSchema(nestedSchema)
	if err != nil {
		t.Fatal(err)
	}
	store := storage.NewMem()
	rows := nestedRows()
	add, err := WriteDataFile(t.Context(), store, table, nil, nil, rows, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadDataFile(t.Context(), store, table, nil, add)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Fatalf("%d rows read, %d written", len(got), len(rows))
	}
	for i := range rows {
		for c := range rows[i] {
			if !reflect.DeepEqual(got[i][c], rows[i][c]) {
				t.Errorf("row %d column %s: read %s, wrote %s", i, table.Fields[c].Name, dump(got[i][c]), dump(rows[i][c]))
			}
		}
	}
	// As Spark's StatisticsCollection: struct fields nested, min/max of
	// eligible leaves, nullCount of every field but none inside arrays and
	// maps (a null struct makes its fields null).
	const wantStats = `{"numRecords":4,` +
		`"minValues":{"id":1,"s":{"a":-3,"b":"x","inner":{"x":1.5,"d":-12.30}},"t":{"d1":-999.99,"d2":-0.001,"dt":"1969-12-31","tn":"2024-06-15T19:30:45.123","f":-1.25,"req":-1}},` +
		`"maxValues":{"id":4,"s":{"a":7,"b":"yy","inner":{"x":1.5,"d":-12.30}},"t":{"d1":0.01,"d2":1234567890123456789012.345,"dt":"2024-02-29","tn":"2024-06-15T19:30:45.123","f":2.5,"req":5}},` +
		`"nullCount":{"id":0,"s":{"a":2,"b":2,"inner":{"x":3,"d":3}},"arr":1,"arrs":1,"m":1,"mi":1,"t":{"d1":2,"d2":2,"dt":2,"tn":3,"bin":2,"f":2,"req":1}}}`
	if add.Stats != wantStats {
		t.Errorf("stats\n%s\nwant\n%s", add.Stats, wantStats)
	}
	// dataSkippingNumIndexedCols counts struct fields one by one: 3 are
	// id, s.a, s.b.
	add, err = WriteDataFile(t.Context(), store, table, nil, nil, rows, WriterOptions{NumIndexedCols: 3})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"numRecords":4,"minValues":{"id":1,"s":{"a":-3,"b":"x"}},"maxValues":{"id":4,"s":{"a":7,"b":"yy"}},"nullCount":{"id":0,"s":{"a":2,"b":2}}}`; add.Stats != want {
		t.Errorf("3 indexed columns: stats\n%s\nwant\n%s", add.Stats, want)
	}
}

func dump(v any) string { return fmt.Sprintf("%#v", v) }

// pyRender renders a value of type t as scripts/rowjson.py renders what
// pyarrow reads: structs as objects, arrays as lists, maps as lists of
// [key, value] pairs in file order (AppendValue writes them in the order
// of their keys' text), decimals as text at their scale, binaries in
// base64, times as UTC wall clock text.
func pyRender(t DataType, v any) any {
	if v == nil {
		return nil
	}
	switch t := t.(type) {
	case *StructType:
		m := v.(map[string]any)
		out := map[string]any{}
		for _, f := range t.Fields {
			out[f.Name] = pyRender(f.Type, m[f.Name])
		}
		return out
	case *ArrayType:
		out := []any{}
		for _, e := range v.([]any) {
			out = append(out, pyRender(t.ElementType, e))
		}
		return out
	case *MapType:
		m := v.(map[string]any)
		out := []any{}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			key, _ := parseMapKeyForTest(t.KeyType, k)
			out = append(out, []any{pyRender(t.KeyType, key), pyRender(t.ValueType, m[k])})
		}
		return out
	}
	switch x := v.(type) {
	case int64, int32, int16, int8:
		n, _ := schema.AsInt64(x)
		return n
	case float32:
		return float64(x)
	case []byte, time.Time:
		return canon(t, x)
	}
	return v
}

func parseMapKeyForTest(t DataType, s string) (any, error) {
	if t == Integer || t == Long {
		return strconv.ParseInt(s, 10, 64)
	}
	return s, nil
}

// pyNormalize turns the oracle's JSON (numbers as json.Number) into
// pyRender's values: numbers with a point or exponent as float64, others
// as int64.
func pyNormalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			f, _ := x.Float64()
			return f
		}
		n, _ := x.Int64()
		return n
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = pyNormalize(e)
		}
		return out
	case []any:
		out := []any{}
		for _, e := range x {
			out = append(out, pyNormalize(e))
		}
		return out
	}
	return v
}

// TestDeltaRSReadsNestedColumns: delta-rs and DuckDB read the struct,
// array and map columns of a table deltaflow wrote value for value, nulls
// at every level, nested decimals, dates and timestamps included; and the
// table reads back the same after OPTIMIZE compacts its files (which
// rewrites every value through AppendValue).
func TestDeltaRSReadsNestedColumns(t *testing.T) {
	dir := t.TempDir()
	store := localStore(t, dir)
	table, err := ParseSchema(nestedSchema)
	if err != nil {
		t.Fatal(err)
	}
	rows := nestedRows()
	tbl := NewTable(store)
	snap, err := tbl.Create(t.Context(), table, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var adds []Action
	for _, part := range [][]Row{rows[:2], rows[2:]} {
		add, err := WriteDataFile(t.Context(), store, table, nil, nil, part, WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, Action{Add: add})
	}
	if _, err := tbl.Commit(t.Context(), snap, adds, Operation{Name: "WRITE"}); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		view := deltaRS(t, dir, "--rows", "--duckdb")
		testenv.CheckDuckDB(t, view.raw)
		if view.RowsError != "" {
			t.Fatalf("%s: delta-rs cannot read the rows: %s", what, view.RowsError)
		}
		if len(view.Rows) != len(rows) {
			t.Fatalf("%s: delta-rs reads %d rows, want %d", what, len(view.Rows), len(rows))
		}
		byID := map[int64]map[string]any{}
		for _, r := range view.Rows {
			n := pyNormalize(r).(map[string]any)
			byID[n["id"].(int64)] = n
		}
		for _, r := range rows {
			got := byID[r[0].(int64)]
			for c, f := range table.Fields {
				want := pyRender(f.Type, r[c])
				if !reflect.DeepEqual(got[f.Name], want) {
					g, _ := json.Marshal(got[f.Name])
					w, _ := json.Marshal(want)
					t.Errorf("%s: row %d column %s: delta-rs reads %s, want %s", what, r[0], f.Name, g, w)
				}
			}
		}
	}
	check("written")

	// DuckDB skips files by their nested stats (delta_scan's pushdown):
	// wrong bounds or null counts would lose these rows.
	for filter, want := range map[string][]int64{
		"s.a = 7":                  {1},
		"s.b > 'x'":                {4},
		"s.inner.d = -12.30":       {1},
		"t.d2 < 0":                 {2},
		"t.d2 > 1e21":              {1},
		"t.dt < DATE '2000-01-01'": {4},
		"t.tn = TIMESTAMP '2024-06-15 19:30:45.123456'": {1},
		"t.f < 0":           {4},
		"s.a IS NULL":       {2, 3},
		"s.inner.x IS NULL": {2, 3, 4},
		"arr IS NULL":       {3},
		"t.req IS NULL":     {3},
	} {
		sql := fmt.Sprintf("LOAD delta; SELECT list(id ORDER BY id) AS ids FROM delta_scan('%s') WHERE %s", dir, filter)
		var got []struct{ IDs []int64 }
		if err := json.Unmarshal(testenv.DeltaRS(t, nil, "duckdb-sql", sql), &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !slices.Equal(got[0].IDs, want) {
			t.Errorf("DuckDB WHERE %s: ids %+v, want %v", filter, got, want)
		}
	}

	// OPTIMIZE rewrites the two files as one, through AppendValue.
	if snap, err = tbl.Snapshot(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Optimize(t.Context(), snap, OptimizeOptions{}); err != nil {
		t.Fatal(err)
	}
	snap, err = tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(snap.Files()); n != 1 {
		t.Fatalf("%d files after OPTIMIZE, want 1", n)
	}
	got, err := ReadDataFile(t.Context(), store, table, nil, snap.Files()[0])
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b Row) int { return cmp.Compare(a[0].(int64), b[0].(int64)) })
	if !reflect.DeepEqual(got, rows) {
		t.Errorf("after OPTIMIZE the rows read\n%s\nwant\n%s", dump(got), dump(rows))
	}
	check("optimized")
}

// sparkRender renders a value of type t as scripts/rowjson.py renders what
// pyspark collects: structs (Rows, tuples) as lists of their fields'
// values, maps (dicts) as objects keyed by the keys' text, the rest as
// pyRender.
func sparkRender(t DataType, v any) any {
	if v == nil {
		return nil
	}
	switch t := t.(type) {
	case *StructType:
		m := v.(map[string]any)
		out := []any{}
		for _, f := range t.Fields {
			out = append(out, sparkRender(f.Type, m[f.Name]))
		}
		return out
	case *ArrayType:
		out := []any{}
		for _, e := range v.([]any) {
			out = append(out, sparkRender(t.ElementType, e))
		}
		return out
	case *MapType:
		out := map[string]any{}
		for k, e := range v.(map[string]any) {
			out[k] = sparkRender(t.ValueType, e)
		}
		return out
	}
	return pyRender(t, v)
}

// ourNestedTable is a table of nestedRows for Spark 4 to read.
func ourNestedTable(t *testing.T, root string) *spark4Read {
	dir := filepath.Join(root, "ours-nested")
	tbl := NewTable(localStore(t, dir))
	table, err := ParseSchema(nestedSchema)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tbl.Create(t.Context(), table, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := nestedRows()
	if _, err := appendRows(t, tbl, s, rows); err != nil {
		t.Fatal(err)
	}
	var want []map[string]any
	for _, r := range rows {
		m := map[string]any{}
		for c, f := range table.Fields {
			m[f.Name] = sparkRender(f.Type, r[c])
		}
		want = append(want, m)
	}
	return &spark4Read{Name: "ours/nested", Path: dir, schema: table, want: want}
}

// TestNestedColumnMappingEvolution: under column mapping a struct column's
// fields are written by their physical names with their ids as field ids,
// EnsureSchema adds a nullable field inside the struct (with a physical
// name and the next id), old files read the new field as null, and
// OPTIMIZE (struct values keyed by display name) rewrites both files.
func TestNestedColumnMappingEvolution(t *testing.T) {
	ctx := t.Context()
	store := storage.NewMem()
	tbl := NewTable(store)
	s1 := &StructType{Fields: []StructField{{Name: "id", Type: Long}, {Name: "s", Nullable: true, Type: &StructType{Fields: []StructField{
		{Name: "a", Type: Long, Nullable: true},
		{Name: "l", Nullable: true, Type: &ArrayType{ElementType: &StructType{Fields: []StructField{{Name: "x", Type: String, Nullable: true}}}, ContainsNull: true}},
	}}}}}
	mapped, conf, err := AssignColumnMapping(s1, map[string]string{"delta.columnMapping.mode": "name"})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Create(ctx, mapped, nil, conf)
	if err != nil {
		t.Fatal(err)
	}
	old := Row{int64(1), map[string]any{"a": int64(5), "l": []any{map[string]any{"x": "p"}, nil}}}
	if _, err := appendRows(t, tbl, snap, []Row{old}); err != nil {
		t.Fatal(err)
	}
	// A writer's schema without the mapping metadata and a new field b.
	s2 := &StructType{Fields: []StructField{s1.Fields[0], {Name: "s", Nullable: true, Type: &StructType{Fields: []StructField{
		{Name: "a", Type: Long, Nullable: true},
		{Name: "l", Nullable: true, Type: &ArrayType{ElementType: &StructType{Fields: []StructField{{Name: "x", Type: String, Nullable: true}}}, ContainsNull: true}},
		{Name: "b", Type: Date, Nullable: true},
	}}}}}
	snap, done, err := tbl.EnsureSchema(ctx, s2, nil, nil)
	if err != nil || !done.Evolved || len(done.Added) != 0 || len(done.Widened) != 0 {
		t.Fatalf("evolve: %+v, %v", done, err)
	}
	table, _ := snap.Schema()
	b := &table.Fields[1].Type.(*StructType).Fields[2]
	if id, ok := schema.FieldID(b); b.Name != "b" || !ok || id != 6 || !strings.HasPrefix(PhysicalName(b), "col-") {
		t.Fatalf("new nested field %+v: id %d, want a physical name and id 6", b, id)
	}
	day := time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)
	row := Row{int64(2), map[string]any{"a": nil, "l": []any{}, "b": day}}
	if _, err := appendRows(t, tbl, snap, []Row{row}); err != nil {
		t.Fatal(err)
	}
	old[1].(map[string]any)["b"] = nil
	want := []map[string]any{{"id": "1", "s": old[1]}, {"id": "2", "s": row[1]}}
	read := func(what string) {
		t.Helper()
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []map[string]any
		for _, a := range snap.Files() {
			rows, err := ReadDataFile(ctx, store, table, nil, a)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				got = append(got, map[string]any{"id": fmt.Sprint(r[0]), "s": r[1]})
			}
		}
		slices.SortFunc(got, func(a, b map[string]any) int { return cmp.Compare(a["id"].(string), b["id"].(string)) })
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: read %s, want %s", what, dump(got), dump(want))
		}
	}
	read("appended")
	if _, err := tbl.Optimize(ctx, snap, OptimizeOptions{}); err != nil {
		t.Fatal(err)
	}
	read("optimized")
	// The file's struct fields are the physical names, with the ids.
	snap, _ = tbl.Snapshot(ctx)
	st, err := ParseStats(snap.Files()[0].Stats)
	if err != nil {
		t.Fatal(err)
	}
	sPhys, aPhys := PhysicalName(&table.Fields[1]), PhysicalName(&table.Fields[1].Type.(*StructType).Fields[0])
	if st.MinValues[sPhys+"."+aPhys] == nil || st.NullCount[sPhys+"."+PhysicalName(b)] != 1 {
		t.Errorf("stats by physical names %s.%s: %s", sPhys, aPhys, snap.Files()[0].Stats)
	}
}

// TestNestedReadDroppedFields: struct fields a file holds and the schema
// no longer has (dropped) are passed over, inside arrays too, and the
// other fields read as written.
func TestNestedReadDroppedFields(t *testing.T) {
	table, err := ParseSchema(nestedSchema)
	if err != nil {
		t.Fatal(err)
	}
	store := storage.NewMem()
	rows := nestedRows()
	add, err := WriteDataFile(t.Context(), store, table, nil, nil, rows, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reduced, _ := ParseSchema(nestedSchema)
	s := reduced.Fields[1].Type.(*StructType)
	s.Fields = s.Fields[1:2] // s keeps b only
	elem := reduced.Fields[3].Type.(*ArrayType).ElementType.(*StructType)
	elem.Fields = elem.Fields[1:] // arrs' elements keep ts only
	got, err := ReadDataFile(t.Context(), store, reduced, nil, add)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		want := slices.Clone(r)
		if m, ok := r[1].(map[string]any); ok {
			want[1] = map[string]any{"b": m["b"]}
		}
		if a, ok := r[3].([]any); ok {
			var es []any
			for _, e := range a {
				if m, ok := e.(map[string]any); ok {
					e = map[string]any{"ts": m["ts"]}
				}
				es = append(es, e)
			}
			want[3] = es
			if es == nil {
				want[3] = []any{}
			}
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Errorf("row %d: read\n%s\nwant\n%s", i, dump(got[i]), dump(want))
		}
	}
}
