package runtime

import (
	"errors"
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/actors/mapping"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/storage"
)

// TestRunRefusesColumnMappedTables: run writes files by display name, so
// it refuses a table with column mapping, naming the feature and append.
func TestRunRefusesColumnMappedTables(t *testing.T) {
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tbl := delta.NewTable(store)
	m := newMapper(t, mapping.DefaultConfig().Columns, mapping.DefaultPartitionColumns)
	s, err := prepareTable(t.Context(), tbl, m, 10, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	meta := s.Metadata()
	schema, _ := s.Schema()
	conf := map[string]string{"delta.columnMapping.mode": "name"}
	mapped, conf, err := delta.AssignColumnMapping(schema, conf)
	if err != nil {
		t.Fatal(err)
	}
	meta.SchemaString, meta.Configuration = mapped.SchemaString(), conf
	p := &delta.Protocol{MinReaderVersion: 2, MinWriterVersion: 5}
	if _, err := tbl.Commit(t.Context(), s, []delta.Action{{Protocol: p}, {MetaData: &meta}}, delta.Operation{Name: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}
	_, err = prepareTable(t.Context(), tbl, m, 10, testLogger())
	var ue *delta.UnsupportedError
	if !errors.As(err, &ue) || ue.Op != delta.OpAppend || !strings.Contains(err.Error(), "columnMapping") {
		t.Fatalf("got %v, want a refusal naming columnMapping and append", err)
	}
}
