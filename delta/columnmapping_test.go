package delta

import (
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/delta/schema"
	"github.com/deltaflow/deltaflow/storage"
)

// TestAssignColumnMapping: new columns get a fresh physical name and the
// next id; mapped columns keep theirs; maxColumnId follows.
func TestAssignColumnMapping(t *testing.T) {
	table, err := ParseSchema(`{"type":"struct","fields":[` +
		`{"name":"a","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":3,"delta.columnMapping.physicalName":"col-a"}},` +
		`{"name":"b","type":"string","nullable":true,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	out, conf, err := AssignColumnMapping(table, map[string]string{"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "3"})
	if err != nil {
		t.Fatal(err)
	}
	if PhysicalName(&out.Fields[0]) != "col-a" || !strings.HasPrefix(PhysicalName(&out.Fields[1]), "col-") {
		t.Errorf("physical names %q, %q", PhysicalName(&out.Fields[0]), PhysicalName(&out.Fields[1]))
	}
	if id, ok := schema.FieldID(&out.Fields[1]); !ok || id != 4 || conf["delta.columnMapping.maxColumnId"] != "4" {
		t.Errorf("new column id %d (%v), maxColumnId %s", id, ok, conf["delta.columnMapping.maxColumnId"])
	}
	if PhysicalName(&table.Fields[1]) != "b" {
		t.Error("the input table was changed")
	}
	ps := PhysicalSchema(out)
	if ps.Fields[0].Name != "col-a" || out.Fields[0].Name != "a" {
		t.Errorf("PhysicalSchema: %s", ps.SchemaString())
	}
	same, conf2, _ := AssignColumnMapping(table, map[string]string{})
	if same != table || len(conf2) != 0 {
		t.Error("mode none changed the schema")
	}
}

// TestReadByFieldID: a file whose column names are not the physical names
// (written by another engine in id mode) is read by its field ids.
func TestReadByFieldID(t *testing.T) {
	store := storage.NewMem()
	written, err := ParseSchema(`{"type":"struct","fields":[{"name":"original","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":5}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	add, err := WriteDataFile(t.Context(), store, written, nil, nil, []Row{{int64(42)}}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	table, err := ParseSchema(`{"type":"struct","fields":[{"name":"renamed","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":5,"delta.columnMapping.physicalName":"col-x"}},` +
		`{"name":"other","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":6,"delta.columnMapping.physicalName":"col-y"}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ReadDataFile(t.Context(), store, table, nil, add)
	if err != nil || len(rows) != 1 || rows[0][0] != int64(42) || rows[0][1] != nil {
		t.Fatalf("got %v, %v; want [[42 <nil>]]", rows, err)
	}
}
