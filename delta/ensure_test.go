package delta

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
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

// TestEnsureSchemaTimestampNTZ: a table created with a timestamp_ntz
// column gets the timestampNtz feature (reader 3 / writer 7, in
// readerFeatures and writerFeatures); an existing table whose protocol
// lacks it is refused, naming the column, whether the column is new (as
// Spark refuses: DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT) or already in
// a table some other writer left without the feature; once the feature is
// enabled, the column is added.
func TestEnsureSchemaTimestampNTZ(t *testing.T) {
	ctx := t.Context()
	store := storage.NewMem()
	tbl := NewTable(store)
	s, done, err := tbl.EnsureSchema(ctx, ntzSchema(), []string{"part"}, nil)
	if err != nil || !done.Created {
		t.Fatalf("create: %+v, %v", done, err)
	}
	// And invariants: testSchema's id is NOT NULL, an invariant for Spark.
	want := Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz"},
		WriterFeatures: []string{"invariants", "timestampNtz"}}
	if !reflect.DeepEqual(s.Protocol(), want) {
		t.Fatalf("created with protocol %+v, want %+v", s.Protocol(), want)
	}
	if s, done, err = tbl.EnsureSchema(ctx, ntzSchema(), []string{"part"}, nil); err != nil || done.Evolved || s.Version() != 0 {
		t.Fatalf("again: version %d, %+v, %v", s.Version(), done, err)
	}

	// An existing table without the feature: the new column is refused.
	plain := NewTable(storage.NewMem())
	if _, _, err := plain.EnsureSchema(ctx, testSchema(), []string{"part"}, nil); err != nil {
		t.Fatal(err)
	}
	_, _, err = plain.EnsureSchema(ctx, ntzSchema(), []string{"part"}, nil)
	var fe *FeatureNotEnabledError
	if !errors.As(err, &fe) || fe.Column != "local_time" || fe.Feature != "timestampNtz" || fe.Type != TimestampNTZ ||
		!strings.Contains(err.Error(), `column "local_time" is timestamp_ntz, which needs table feature timestampNtz`) ||
		!strings.Contains(err.Error(), "'delta.feature.timestampNtz' = 'supported'") {
		t.Fatalf("a new timestamp_ntz column of a reader 1 / writer 2 table: %v", err)
	}
	if s, _ := plain.Snapshot(ctx); s.Version() != 0 {
		t.Fatalf("a refused column committed version %d", s.Version())
	}

	// Enabled (as ALTER TABLE ... SET TBLPROPERTIES ('delta.feature.timestampNtz' = 'supported') does): added.
	s, err = plain.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	enabled := Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz"},
		WriterFeatures: []string{"appendOnly", "invariants", "timestampNtz"}}
	if _, err := plain.Commit(ctx, s, []Action{{Protocol: &enabled}}, Operation{Name: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}
	if _, done, err = plain.EnsureSchema(ctx, ntzSchema(), []string{"part"}, nil); err != nil || !slices.Equal(done.Added, []string{"local_time"}) {
		t.Fatalf("with the feature enabled: %+v, %v", done, err)
	}

	// A table some writer left with a timestamp_ntz column and no feature.
	broken := storage.NewMem()
	meta, _ := json.Marshal(Metadata{ID: "x", Format: Format{Provider: "parquet", Options: map[string]string{}},
		SchemaString: ntzSchema().SchemaString(), PartitionColumns: []string{"part"}, Configuration: map[string]string{}})
	commit := `{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}` + "\n" + `{"metaData":` + string(meta) + "}\n"
	if err := broken.PutIfAbsent(ctx, CommitKey(0), []byte(commit)); err != nil {
		t.Fatal(err)
	}
	_, _, err = NewTable(broken).EnsureSchema(ctx, testSchema(), []string{"part"}, nil)
	if !errors.As(err, &fe) || fe.Column != "local_time" {
		t.Fatalf("a timestamp_ntz column already in a table without the feature: %v", err)
	}
}

// widenedLikeSpark replays in dir, through EnsureSchema, what the Spark 4
// fixture typewidening did with ALTER COLUMN TYPE: a table created with
// delta.enableTypeWidening and the fixture's first schema, its three rows
// written in the old types, every column widened to Spark's new type in one
// schema evolution, then its fourth row in the new types. It returns the
// table, Spark's table after its last type change (version 7) and the rows
// Spark read from its table.
func widenedLikeSpark(t *testing.T, dir string) (*Table, *Snapshot, []map[string]any) {
	t.Helper()
	ctx := t.Context()
	sdir, exp := copyFixture(t, t.TempDir(), "spark4-features", "typewidening")
	spark := NewTable(localStore(t, sdir))
	created, err := spark.SnapshotAt(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	widened, err := spark.SnapshotAt(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := created.Schema()
	after, _ := widened.Schema()
	tbl := NewTable(localStore(t, dir))
	s, done, err := tbl.EnsureSchema(ctx, before, created.PartitionColumns(), created.Metadata().Configuration)
	if err != nil || !done.Created {
		t.Fatalf("create: %+v, %v", done, err)
	}
	want := Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"typeWidening"}, WriterFeatures: []string{"typeWidening"}}
	if !reflect.DeepEqual(s.Protocol(), want) {
		t.Fatalf("created with delta.enableTypeWidening: protocol %+v, want %+v", s.Protocol(), want)
	}
	if _, err := appendRows(t, tbl, s, []Row{
		{int64(1), "a", float32(0.8), int16(2), int32(7), int32(5), "1.25", int32(9)},
		{int64(2), "a", float32(0.1), int16(-3), int32(-7), int32(-5), "-1.50", int32(-9)},
		{int64(3), "b", float32(2.5), int16(300), int32(70000), int32(6), "999.99", int32(2147483647)},
	}); err != nil {
		t.Fatal(err)
	}
	// The schema a mapper gives: the new types, no type change metadata.
	next := &StructType{Fields: slices.Clone(after.Fields)}
	for i := range next.Fields {
		next.Fields[i].Metadata = json.RawMessage("{}")
	}
	if s, err = tbl.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if s, done, err = tbl.EnsureSchema(ctx, next, s.PartitionColumns(), nil); err != nil {
		t.Fatal(err)
	}
	if !done.Evolved || len(done.Added) > 0 || !slices.Equal(done.Widened, []string{"ratio", "small", "mid", "n", "dec", "i2"}) {
		t.Fatalf("widening: %+v", done)
	}
	if s, err = tbl.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := appendRows(t, tbl, s, []Row{{int64(4), "a", 0.9, int32(100000), int64(3000000000), 2.5, "12345.678", "1234567890.12"}}); err != nil {
		t.Fatal(err)
	}
	return tbl, widened, exp.Rows
}

// TestEnsureSchemaTypeWidening: on a table that allows type widening, a
// schema with wider types commits them with the delta.typeChanges Delta
// Spark writes (the schema is the one Spark's ALTER COLUMN TYPE left,
// byte for byte), and the table reads as Spark read its own: old files'
// INT32, FLOAT and narrower decimals as the new types, through OPTIMIZE and
// a checkpoint. A second widening appends to a column's changes. Without
// the property, a widening is refused saying how to allow it; a change no
// widening makes, or a partition column's, is refused as before; a table
// that lists the preview feature keeps it.
func TestEnsureSchemaTypeWidening(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	tbl, spark, rows := widenedLikeSpark(t, dir)
	s, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Metadata().SchemaString, spark.Metadata().SchemaString; got != want {
		t.Errorf("widened schema:\n%s\nSpark's:\n%s", got, want)
	}
	checkRows(t, tbl, s, rows)
	// The old files' stats hold as bounds of the new types.
	for _, a := range s.Files() {
		st, err := s.FileStats(a)
		if err != nil {
			t.Fatal(err)
		}
		if s.PartitionValues(a)["part"] != nil && *s.PartitionValues(a)["part"] == "b" && fmt.Sprintf("%v %v", st.MaxValues["mid"], st.MaxValues["i2"]) != "70000 2147483647" {
			t.Errorf("%s: max mid, i2 %v %v, want 70000 2147483647", a.Path, st.MaxValues["mid"], st.MaxValues["i2"])
		}
	}
	if _, err := tbl.Optimize(ctx, s, OptimizeOptions{TargetSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if s, err = tbl.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Checkpoint(ctx, s); err != nil {
		t.Fatal(err)
	}
	if s, err = NewTable(localStore(t, dir)).Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	checkRows(t, tbl, s, rows)

	// Again: small, short → integer, becomes long.
	schema, _ := s.Schema()
	next := &StructType{Fields: slices.Clone(schema.Fields)}
	next.Fields[schema.Index("small")].Type = Long
	if _, done, err := tbl.EnsureSchema(ctx, next, s.PartitionColumns(), nil); err != nil || !slices.Equal(done.Widened, []string{"small"}) {
		t.Fatalf("widen small again: %+v, %v", done, err)
	}
	s, _ = tbl.Snapshot(ctx)
	schema, _ = s.Schema()
	if got := string(schema.Field("small").Metadata); got != `{"delta.typeChanges":[{"toType":"integer","fromType":"short"},{"toType":"long","fromType":"integer"}]}` {
		t.Errorf("small's metadata after two widenings: %s", got)
	}

	// A table without delta.enableTypeWidening refuses, saying how.
	plain := NewTable(storage.NewMem())
	base := &StructType{Fields: []StructField{{Name: "n", Type: Integer, Nullable: true}, {Name: "d", Type: DecimalType{Precision: 5, Scale: 2}, Nullable: true},
		{Name: "p", Type: Integer, Nullable: true}}}
	if _, _, err := plain.EnsureSchema(ctx, base, []string{"p"}, nil); err != nil {
		t.Fatal(err)
	}
	var sce *SchemaChangeError
	for _, c := range []struct {
		col    string
		typ    DataType
		reason string
	}{
		{"n", Long, TypeWideningHint},
		{"d", DecimalType{Precision: 5, Scale: 3}, "column types differ"},
		{"p", Long, "deltaflow does not widen a partition column's type"},
	} {
		next := &StructType{Fields: slices.Clone(base.Fields)}
		next.Fields[next.Index(c.col)].Type = c.typ
		_, _, err := plain.EnsureSchema(ctx, next, []string{"p"}, nil)
		if !errors.As(err, &sce) || sce.Column != c.col || sce.NewType != c.typ.String() || !strings.Contains(sce.Reason, c.reason) {
			t.Errorf("%s to %s: %v, want a refusal saying %q", c.col, c.typ, err, c.reason)
		}
	}
	if !strings.Contains(TypeWideningHint, "ALTER TABLE ... SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')") {
		t.Errorf("hint %q does not say how to allow type widening", TypeWideningHint)
	}

	// A table Delta 3.2 enabled lists typeWidening-preview, and keeps it.
	s, _ = plain.Snapshot(ctx)
	meta := s.Metadata()
	meta.Configuration = map[string]string{"delta.enableTypeWidening": "true"}
	preview := Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"typeWidening-preview"},
		WriterFeatures: []string{"appendOnly", "invariants", "typeWidening-preview"}}
	if _, err := plain.Commit(ctx, s, []Action{{Protocol: &preview}, {MetaData: &meta}}, Operation{Name: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}
	next = &StructType{Fields: slices.Clone(base.Fields)}
	next.Fields[0].Type = Long
	if _, done, err := plain.EnsureSchema(ctx, next, []string{"p"}, nil); err != nil || !slices.Equal(done.Widened, []string{"n"}) {
		t.Fatalf("widen on a preview table: %+v, %v", done, err)
	}
	if s, _ = plain.Snapshot(ctx); !reflect.DeepEqual(s.Protocol(), preview) {
		t.Errorf("preview table's protocol became %+v", s.Protocol())
	}
}
