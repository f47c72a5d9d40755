package formats

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/storage"
)

// nestedSparkTable writes a local table of struct, array and map columns
// (nested in each other, with a decimal, a timestamp and a date inside,
// nulls and empties at every level) for Spark 3.5 to read in the oracle's
// JVM, and returns it with the rows Spark must find, rendered as
// scripts/rowjson.py renders pyspark's: structs as lists, maps as objects.
func nestedSparkTable(t *testing.T) (uri, want string) {
	uri = filepath.Join(t.TempDir(), "nested")
	store, err := storage.NewLocal(uri)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := delta.ParseSchema(`{"type":"struct","fields":[` +
		`{"name":"id","type":"long","nullable":false,"metadata":{}},` +
		`{"name":"s","type":{"type":"struct","fields":[` +
		`{"name":"a","type":"long","nullable":true,"metadata":{}},` +
		`{"name":"d","type":"decimal(10,2)","nullable":true,"metadata":{}},` +
		`{"name":"ts","type":"timestamp","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},` +
		`{"name":"arr","type":{"type":"array","elementType":{"type":"struct","fields":[` +
		`{"name":"k","type":"string","nullable":true,"metadata":{}},` +
		`{"name":"v","type":{"type":"array","elementType":"long","containsNull":true},"nullable":true,"metadata":{}}]},"containsNull":true},"nullable":true,"metadata":{}},` +
		`{"name":"m","type":{"type":"map","keyType":"string","valueType":{"type":"array","elementType":"long","containsNull":false},"valueContainsNull":true},"nullable":true,"metadata":{}},` +
		`{"name":"mi","type":{"type":"map","keyType":"integer","valueType":"date","valueContainsNull":true},"nullable":true,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	rows := []delta.Row{
		{int64(1),
			map[string]any{"a": int64(7), "d": "-12.30", "ts": time.Date(2024, 6, 15, 19, 30, 45, 123456000, time.UTC)},
			[]any{map[string]any{"k": "p", "v": []any{int64(1), nil}}, nil},
			map[string]any{"a": []any{int64(1), int64(2)}, "b": nil},
			map[string]any{"-5": time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), "3": nil}},
		{int64(2), map[string]any{"a": nil, "d": nil, "ts": nil}, []any{}, map[string]any{}, map[string]any{}},
		{int64(3), nil, nil, nil, nil},
	}
	tbl := delta.NewTable(store)
	snap, err := tbl.Create(t.Context(), schema, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	add, err := delta.WriteDataFile(t.Context(), store, schema, nil, nil, rows, delta.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(t.Context(), snap, []delta.Action{{Add: add}}, delta.Operation{Name: "WRITE"}); err != nil {
		t.Fatal(err)
	}
	return uri, `[{"id":1,"s":[7,"-12.30","2024-06-15T19:30:45.123456"],"arr":[["p",[1,null]],null],"m":{"a":[1,2],"b":null},"mi":{"-5":"2024-02-29","3":null}},
{"id":2,"s":[null,null,null],"arr":[],"m":{},"mi":{}},
{"id":3,"s":null,"arr":null,"m":null,"mi":null}]`
}
