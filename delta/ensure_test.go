package delta

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/storage"
)

// TestEnsureSchema: a missing table is created, the same schema commits
// nothing, an added nullable column is one ADD COLUMNS commit, and a changed
// type or other partition columns are refused without committing.
func TestEnsureSchema(t *testing.T) {
	tbl := NewTable(storage.NewMem())
	parts := []string{"device_type", "event_date"}
	base := &StructType{Fields: []StructField{
		{Name: "device_id", Type: String},
		{Name: "battery", Type: Integer, Nullable: true},
		{Name: "device_type", Type: String},
		{Name: "event_date", Type: Date},
	}}
	conf := map[string]string{"delta.checkpointInterval": "10"}
	s, done, err := tbl.EnsureSchema(t.Context(), base, parts, conf)
	if err != nil {
		t.Fatal(err)
	}
	if !done.Created || done.Evolved || s.Version() != 0 || s.Metadata().Configuration["delta.checkpointInterval"] != "10" {
		t.Fatalf("created table: %+v, version %d, configuration %v", done, s.Version(), s.Metadata().Configuration)
	}

	// Same columns: nothing to commit.
	if s, done, err = tbl.EnsureSchema(t.Context(), base, parts, conf); err != nil || s.Version() != 0 || done.Created || done.Evolved {
		t.Fatalf("unchanged columns: version %d, %+v, %v", s.Version(), done, err)
	}

	// An extra nullable column: one metaData commit, the column appended.
	extra := &StructType{Fields: append(slices.Clone(base.Fields), StructField{Name: "kafka_offset", Type: Long, Nullable: true})}
	s, done, err = tbl.EnsureSchema(t.Context(), extra, parts, conf)
	if err != nil {
		t.Fatal(err)
	}
	if !done.Evolved || done.Version != 1 || !slices.Equal(done.Added, []string{"kafka_offset"}) {
		t.Fatalf("evolution: %+v", done)
	}
	schema, _ := s.Schema()
	if s.Version() != 1 || schema.Field("kafka_offset") == nil || schema.Fields[len(schema.Fields)-1].Name != "kafka_offset" {
		t.Fatalf("after evolution: version %d, schema %s", s.Version(), schema.SchemaString())
	}
	hist, err := tbl.History(t.Context(), 1)
	if err != nil || hist[0].Operation != "ADD COLUMNS" {
		t.Fatalf("history: %v %+v", err, hist)
	}
	// Reloaded from storage, the table has the new column too.
	if s, _ = tbl.Snapshot(t.Context()); !strings.Contains(s.Metadata().SchemaString, `"kafka_offset"`) {
		t.Fatalf("schema on disk: %s", s.Metadata().SchemaString)
	}

	// A changed type is refused, naming the column and both types.
	changed := &StructType{Fields: slices.Clone(extra.Fields)}
	changed.Fields[1].Type = Long
	_, _, err = tbl.EnsureSchema(t.Context(), changed, parts, conf)
	var sce *SchemaChangeError
	if !errors.As(err, &sce) || sce.Column != "battery" || sce.OldType != "integer" || sce.NewType != "long" {
		t.Fatalf("type change: %v", err)
	}
	if s, _ = tbl.Snapshot(t.Context()); s.Version() != 1 {
		t.Fatalf("a refused change committed version %d", s.Version())
	}

	// Other partition columns are refused too.
	_, _, err = tbl.EnsureSchema(t.Context(), extra, []string{"device_type"}, conf)
	var pe *PartitioningError
	if !errors.As(err, &pe) || !slices.Equal(pe.Table, parts) || !slices.Equal(pe.Want, []string{"device_type"}) {
		t.Fatalf("partition change: %v", err)
	}
}

// TestEnsureSchemaColumnMapping: under column mapping an added column gets
// a physical name and the next column id.
func TestEnsureSchemaColumnMapping(t *testing.T) {
	tbl := NewTable(storage.NewMem())
	base := &StructType{Fields: []StructField{{Name: "id", Type: String}, {Name: "p", Type: String}}}
	mapped, conf, err := AssignColumnMapping(base, map[string]string{"delta.columnMapping.mode": "name"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Create(t.Context(), mapped, []string{"p"}, conf); err != nil {
		t.Fatal(err)
	}
	extra := &StructType{Fields: append(slices.Clone(base.Fields), StructField{Name: "n", Type: Long, Nullable: true})}
	s, done, err := tbl.EnsureSchema(t.Context(), extra, []string{"p"}, nil)
	if err != nil || !done.Evolved {
		t.Fatalf("evolve: %+v %v", done, err)
	}
	schema, _ := s.Schema()
	f := schema.Field("n")
	if f == nil || PhysicalName(f) == "n" || !strings.Contains(string(f.Metadata), `"delta.columnMapping.id":3`) {
		t.Fatalf("added column without its own physical name and id 3: %+v", f)
	}
	if got := s.Metadata().Configuration["delta.columnMapping.maxColumnId"]; got != "3" {
		t.Fatalf("maxColumnId %q, want 3", got)
	}
}
