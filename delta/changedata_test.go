package delta

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/delta/schema"
	"github.com/deltaflow/deltaflow/storage"
)

// A change data file of a partition lies in its directory under
// _change_data and holds the data columns, without the partition's, then
// _change_type; its action carries the partition values.
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
}

// Under column mapping a change data file is laid out as the table's data
// files are: its data columns by physical name with their column ids as
// field ids, then _change_type by its own name and with no id (Spark's
// DeltaColumnMapping.DELTA_INTERNAL_COLUMNS: read by name in every mode);
// its action's partition values keyed by physical name, as adds hold them,
// its directory named as the data files' are.
func TestChangeDataFileColumnMapping(t *testing.T) {
	dir := t.TempDir()
	store := localStore(t, dir)
	table := &StructType{Fields: []StructField{{Name: "id", Type: Long, Nullable: true}, {Name: "p", Type: String, Nullable: true}}}
	mapped, _, err := AssignColumnMapping(table, map[string]string{"delta.columnMapping.mode": "name"})
	if err != nil {
		t.Fatal(err)
	}
	x := "x"
	w, err := CreateChangeDataFile(t.Context(), store, mapped, []string{"p"}, map[string]*string{"p": &x}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Row{int64(7), "x"}, ChangeDelete); err != nil {
		t.Fatal(err)
	}
	cdc, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	physP := PhysicalName(&mapped.Fields[1])
	if !strings.HasPrefix(cdc.Path, "_change_data/p=x/cdc-00000-") || len(cdc.PartitionValues) != 1 || *cdc.PartitionValues[physP] != "x" {
		t.Errorf("cdc action %+v, want it in p=x, its partition values by %s", cdc, physP)
	}
	fields := parquetFields(t, dir, &Add{Path: cdc.Path})
	id, _ := schema.FieldID(&mapped.Fields[0])
	if len(fields) != 2 || fields[0].Name() != PhysicalName(&mapped.Fields[0]) || fields[0].ID() != id ||
		fields[1].Name() != ChangeTypeColumn || fields[1].ID() != 0 {
		var got []string
		for _, f := range fields {
			got = append(got, fmt.Sprintf("%s (id %d)", f.Name(), f.ID()))
		}
		t.Errorf("the file's columns %v, want %s (id %d) and %s (no id)", got, PhysicalName(&mapped.Fields[0]), id, ChangeTypeColumn)
	}
	file := &StructType{Fields: []StructField{mapped.Fields[0], {Name: ChangeTypeColumn, Type: String, Nullable: true}, mapped.Fields[1]}}
	rows, err := ReadDataFile(t.Context(), store, file, []string{"p"}, &Add{Path: cdc.Path, PartitionValues: cdc.PartitionValues})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Row{{int64(7), "delete", "x"}}; !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("rows %v, want %v", rows, want)
	}
}
