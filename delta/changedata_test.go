package delta

import (
	"slices"
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/storage"
)

// A change data file of a partition lies in its directory under
// _change_data and holds the data columns, without the partition's, then
// _change_type; its action carries the partition values. Column mapping
// is refused.
func TestChangeDataFilePartitioned(t *testing.T) {
	store := storage.NewMem()
	table := &StructType{Fields: []StructField{{Name: "id", Type: Long, Nullable: true}, {Name: "p", Type: String, Nullable: true}}}
	x := "x"
	w, err := CreateChangeDataFile(t.Context(), store, table, []string{"p"}, map[string]*string{"p": &x}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []ChangeType{ChangeUpdatePreimage, ChangeUpdatePostimage, ChangeDelete} {
		if err := w.Write(Row{int64(i), "x"}, c); err != nil {
			t.Fatal(err)
		}
	}
	cdc, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cdc.Path, "_change_data/p=x/cdc-00000-") || cdc.DataChange || *cdc.PartitionValues["p"] != "x" {
		t.Errorf("cdc action %+v", cdc)
	}
	file := &StructType{Fields: []StructField{table.Fields[0], {Name: ChangeTypeColumn, Type: String, Nullable: true}, table.Fields[1]}}
	rows, err := ReadDataFile(t.Context(), store, file, []string{"p"}, &Add{Path: cdc.Path, PartitionValues: cdc.PartitionValues})
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{{int64(0), "update_preimage", "x"}, {int64(1), "update_postimage", "x"}, {int64(2), "delete", "x"}}
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("rows %v, want %v", rows, want)
	}
	mapped, _, err := AssignColumnMapping(table, map[string]string{"delta.columnMapping.mode": "name"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CreateChangeDataFile(t.Context(), store, mapped, nil, nil, WriterOptions{}); err == nil || !strings.Contains(err.Error(), "column mapping") {
		t.Errorf("a column-mapped table's change data file: %v", err)
	}
}
