package formats

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/deltaflow/deltaflow/internal/tests/scenario"
)

// TestProtoFileTopic: a topic of plain Protobuf bodies (no registry
// header) that the protobuf package of Python wrote with
// SerializeToString, read with `format: protobuf`, the .proto file as
// schema_file and its message: columns with paths read a nested message,
// one of the file the schema imports, an enum (its name), a Timestamp,
// a oneof's members (the one set, the others null), a repeated field into
// an array column and the nested message into a struct one too (read from
// the wire: packed or not, unset, empty), and delta-rs and DuckDB read
// exactly what was produced;
// records that are not the message are dead letters with the decoder's
// error. Spark reads such a table in TestAvroTypesMatchFromAvro's JVM
// (sparkReadTopics).
func TestProtoFileTopic(t *testing.T) {
	newProtoFileTopic(t, "")
}

// newProtoFileTopic produces TestProtoFileTopic's records, runs deltaflow
// on them into the table at uri (the test's S3 table if ""), checks it
// with delta-rs and DuckDB and the dead letters, and returns the topic
// with the rows the table holds.
func newProtoFileTopic(t *testing.T, uri string) *registryTopic {
	t.Helper()
	const count, bad = 200, 3
	dir := filepath.Join(scenario.RepoRoot(t), "mapping", "testdata", "protofile")
	f := newFormatTopic(t, "proto-orders", "  format: protobuf\n  schema_file: "+filepath.Join(dir, "order.proto")+
		"\n  message: shop.Order\n  partition_columns: []\n  columns:\n"+
		"    - {name: id, type: string}\n    - {name: status, type: string}\n    - {name: placed, type: timestamp}\n"+
		"    - {name: total_currency, type: string, source: total.currency}\n    - {name: total_units, type: long, source: total.units}\n"+
		"    - {name: email, type: string}\n    - {name: phone, type: long}\n"+
		"    - {name: line_sku, type: string, source: line.sku}\n    - {name: line_qty, type: integer, source: line.qty}\n"+
		"    - {name: tags, type: \"array<string>\"}\n    - {name: line, type: \"struct<sku: string, qty: integer>\"}\n")
	if uri != "" {
		f.uri = uri
	}
	produced := decodeRows(t, f.produce("protoproduce.py", nil, "--root", dir, "--proto", "order.proto", "--message", "shop.Order",
		"--plain", "--count", strconv.Itoa(count), "--seed", "5", "--bad", strconv.Itoa(bad)))
	out, err := f.run()
	if err != nil {
		t.Fatalf("run --until-latest: %v\n%s", err, out)
	}
	if !bytes.Contains(out, fmt.Appendf(nil, "rows=%d ", count)) || !bytes.Contains(out, fmt.Appendf(nil, "dead_letters=%d ", bad)) {
		t.Errorf("run --until-latest did not commit %d rows and %d dead letters:\n%s", count, bad, out)
	}
	types := map[string]string{"id": "string null", "status": "string null", "placed": "timestamp null",
		"total_currency": "string null", "total_units": "long null", "email": "string null", "phone": "long null",
		"line_sku": "string null", "line_qty": "integer null", "tags": "array<string null> null", "line": "struct<sku: string null, qty: integer null> null"}
	for _, row := range produced { // the line message whole: null when unset (its fields, which have no presence, are then null)
		row["line"] = nil
		if row["line_sku"] != nil {
			row["line"] = map[string]any{"sku": row["line_sku"], "qty": row["line_qty"]}
		}
	}
	checkTable(t, f.s3, f.uri, types, produced)
	letters := f.deadLetters()
	for _, l := range letters {
		if want := "mapping: not Protobuf of the schema file's shop.Order: cannot parse reserved wire type"; l != want {
			t.Errorf("dead letter %q, want %q", l, want)
		}
	}
	if len(letters) != bad {
		t.Errorf("%d dead letters, want %d", len(letters), bad)
	}
	return &registryTopic{formatTopic: f, want: produced}
}

// TestProtoFileMapKeys: a topic of plain Protobuf bodies of a message
// with a map<int32, string> (trip.proto's shop.Codes) that the protobuf
// package of Python wrote, its columns derived: the map is a
// map<integer, string> column, and delta-rs and DuckDB read exactly the
// entries produced (in any order). Spark reads the table in
// TestAvroTypesMatchFromAvro's JVM (sparkReadTopics).
func TestProtoFileMapKeys(t *testing.T) {
	newProtoMapKeysTopic(t, "")
}

// newProtoMapKeysTopic produces TestProtoFileMapKeys' records, runs
// deltaflow on them into the table at uri (the test's S3 table if ""),
// checks it with delta-rs and DuckDB and the dead letters, and returns the
// topic with the rows the table holds.
func newProtoMapKeysTopic(t *testing.T, uri string) *registryTopic {
	t.Helper()
	const count = 60
	dir := filepath.Join(scenario.RepoRoot(t), "mapping", "testdata", "protofile")
	f := newFormatTopic(t, "proto-codes", "  format: protobuf\n  schema_file: "+filepath.Join(dir, "trip.proto")+
		"\n  message: shop.Codes\n  partition_columns: []\n")
	if uri != "" {
		f.uri = uri
	}
	produced := decodeRows(t, f.produce("protoproduce.py", nil, "--root", dir, "--proto", "trip.proto", "--message", "shop.Codes",
		"--plain", "--count", strconv.Itoa(count), "--seed", "11"))
	// A message with every field at its default is an empty body: a dead
	// letter, as every empty value is.
	kept := slices.DeleteFunc(produced, func(r map[string]any) bool { return r["id"] == "" && len(r["by_code"].([]any)) == 0 })
	rows := len(kept)
	out, err := f.run()
	if err != nil {
		t.Fatalf("run --until-latest: %v\n%s", err, out)
	}
	if !bytes.Contains(out, fmt.Appendf(nil, "rows=%d ", rows)) {
		t.Errorf("run --until-latest did not commit %d rows:\n%s", rows, out)
	}
	if letters := f.deadLetters(); len(letters) != count-rows || slices.ContainsFunc(letters, func(l string) bool { return l != "mapping: empty value" }) {
		t.Errorf("dead letters %q, want %d empty values", letters, count-rows)
	}
	// A map's entries are in the order the body has them, which Python's
	// serializer picks: compared in key order.
	types, got := readTable(t, f.s3, f.uri)
	if want := map[string]string{"id": "string null", "by_code": "map<integer, string null> null"}; !maps.Equal(types, want) {
		t.Errorf("columns as delta-rs reads them:\n got %v\nwant %v", types, want)
	}
	have, want := rowSet(t, sortEntries(decodeRows(t, got), "by_code"), nil), rowSet(t, sortEntries(kept, "by_code"), nil)
	if !slices.Equal(have, want) {
		t.Errorf("rows differ from what was produced:\n got %s\nwant %s", have, want)
	}
	return &registryTopic{formatTopic: f, want: kept}
}

// sortEntries sorts the [key, value] entries of map column col of rows by
// their numeric key.
func sortEntries(rows []map[string]any, col string) []map[string]any {
	for _, r := range rows {
		entries, _ := r[col].([]any)
		slices.SortFunc(entries, func(a, b any) int {
			x, _ := a.([]any)[0].(json.Number).Int64()
			y, _ := b.([]any)[0].(json.Number).Int64()
			return cmp.Compare(x, y)
		})
	}
	return rows
}
