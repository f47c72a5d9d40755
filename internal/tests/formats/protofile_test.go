package formats

import (
	"bytes"
	"fmt"
	"path/filepath"
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
