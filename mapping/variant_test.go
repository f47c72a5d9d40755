package mapping

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/variant"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/storage"
)

// variantMapper maps {"id": N, "v": ...} to an id and a variant column.
func variantMapper(t testing.TB, mode Mode) *Mapper {
	t.Helper()
	m, err := New(Config{Mode: mode, Columns: []Column{{Name: "id", Type: "long"}, {Name: "v", Type: "variant"}, {Name: "after", Type: "string"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// decodeVariant decodes a variant for comparison.
func decodeVariant(t *testing.T, v delta.VariantValue) variant.Value {
	t.Helper()
	md, err := variant.DecodeMetadata(v.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	val, err := variant.Decode(md, v.Value)
	if err != nil {
		t.Fatal(err)
	}
	return val
}

// TestVariantAsSparkParsesJSON: a variant column holds, for each JSON text
// of delta-spark 4's variant fixtures, the same variant (types included:
// int8..int64, decimals of their own precision and scale, trailing zeros
// kept, doubles, short and long strings, objects, arrays, nulls) as Spark's
// parse_json wrote into the fixture's files; the row writes into a data
// file of the mapper's data schema and reads back, with the column after
// the variant in place.
func TestVariantAsSparkParsesJSON(t *testing.T) {
	for _, name := range []string{"variant", "variant-types"} {
		t.Run(name, func(t *testing.T) { checkParsesAsSpark(t, name) })
	}
}

// checkParsesAsSpark is TestVariantAsSparkParsesJSON on one fixture.
func checkParsesAsSpark(t *testing.T, fixture string) {
	dir := filepath.Join("..", "delta", "testdata", "spark4-features", fixture)
	data, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		JSON map[string]string `json:"json"`
	}
	if err := json.Unmarshal(data, &exp); err != nil || len(exp.JSON) == 0 {
		t.Fatalf("expected.json: %v, %d texts", err, len(exp.JSON))
	}
	store, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	tbl := delta.NewTable(store)
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := s.Schema()
	spark := map[string]delta.VariantValue{}
	for _, a := range s.Files() {
		rows, err := delta.ReadDataFile(t.Context(), store, schema, s.PartitionColumns(), a)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if v, ok := r[schema.Index("v")].(delta.VariantValue); ok {
				spark[strconv.FormatInt(r[0].(int64), 10)] = v
			}
		}
	}
	m := variantMapper(t, Strict)
	var buf bytes.Buffer
	w, err := delta.NewFileWriter(&buf, m.DataSchema(), delta.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{}
	for id, text := range exp.JSON {
		value, _ := json.Marshal(text) // a JSON string holding the JSON, as payload is
		var row Row
		if err := m.Map(rec(`{"id":`+id+`,"v":`+string(value)+`,"after":"x"}`), &row); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		got := delta.VariantValue{Metadata: row.Values[1].ByteArray(), Value: row.Values[2].ByteArray()}
		if g, s := decodeVariant(t, got), decodeVariant(t, spark[id]); !reflect.DeepEqual(g, s) {
			t.Errorf("%s:\nours  %#v\nSpark %#v", text, g, s)
		}
		if _, err := w.WriteRows([]parquet.Row{row.AppendValues(nil, new(Arena))}); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		n, _ := strconv.ParseInt(id, 10, 64)
		want[n] = got.String()
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fs, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Put(t.Context(), "f.parquet", buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	rows, err := delta.ReadDataFile(t.Context(), fs, m.Schema(), nil, &delta.Add{Path: "f.parquet"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if v, ok := r[1].(delta.VariantValue); !ok || v.String() != want[r[0].(int64)] || r[2] != "x" {
			t.Errorf("read back %v, want id %v: %s, after x", r, r[0], want[r[0].(int64)])
		}
	}
}

// TestVariantFailures: text that is not JSON, duplicate keys and invalid
// UTF-8 send the record to the DLQ with the reason, or make the column null
// in permissive mode; JSON null is SQL NULL.
func TestVariantFailures(t *testing.T) {
	for value, reason := range map[string]string{
		`"{not json"`:         `v: not a variant: "{not json"`,
		`"{\"a\":1,\"a\":2}"`: `v: not a variant: duplicate object field "a"`,
		"{\"k\":\"\xff\"}":    "v: invalid UTF-8",
	} {
		var row Row
		err := variantMapper(t, Strict).Map(rec(`{"id":1,"v":`+value+`}`), &row)
		if err == nil || !strings.Contains(err.Error(), reason) {
			t.Errorf("%s: got %v, want %s", value, err, reason)
		}
		if !strings.Contains(reason, "UTF-8") {
			if err := variantMapper(t, Permissive).Map(rec(`{"id":1,"v":`+value+`}`), &row); err != nil || !row.Values[1].IsNull() || !row.Values[2].IsNull() {
				t.Errorf("permissive %s: %v, %v", value, err, row.Values)
			}
		}
	}
	var row Row
	if err := variantMapper(t, Strict).Map(rec(`{"id":1,"v":null}`), &row); err != nil || !row.Values[1].IsNull() {
		t.Errorf("null: %v, %v", err, row.Values)
	}
}

// TestMapVariantDoesNotAllocate: raw_payload as a variant keeps the hot
// path free of allocations.
func TestMapVariantDoesNotAllocate(t *testing.T) {
	cfg := DefaultConfig()
	for i, c := range cfg.Columns {
		if c.Name == "raw_payload" {
			cfg.Columns[i].Type = "variant"
		}
	}
	m, err := New(cfg, DefaultPartitionColumns)
	if err != nil {
		t.Fatal(err)
	}
	if allocs := mapAllocs(t, m); allocs != 0 {
		t.Errorf("Map allocates %.1f times per record", allocs)
	}
}
