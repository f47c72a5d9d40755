package delta

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/storage"
)

// ntzSchema is testSchema plus a timestamp_ntz column.
func ntzSchema() *StructType {
	s := testSchema()
	s.Fields = append(s.Fields, StructField{Name: "local_time", Type: TimestampNTZ, Nullable: true})
	return s
}

// TestRequiredProtocol pins the upgrades PROTOCOL.md "Table Features for New
// and Existing Tables" asks for: an existing table keeps every feature its
// legacy versions implied; a new one gets only what its metadata uses.
func TestRequiredProtocol(t *testing.T) {
	ntz := &Metadata{SchemaString: ntzSchema().SchemaString()}
	plain := &Metadata{SchemaString: testSchema().SchemaString()}
	nullable := ntzSchema()
	nullable.Fields[0].Nullable = true
	nullableNTZ := &Metadata{SchemaString: nullable.SchemaString()}
	nested := &Metadata{SchemaString: (&StructType{Fields: []StructField{{Name: "times", Nullable: true,
		Type: &ArrayType{ElementType: TimestampNTZ, ContainsNull: true}}}}).SchemaString()}
	appendOnly := &Metadata{SchemaString: testSchema().SchemaString(), Configuration: map[string]string{"delta.appendOnly": "true"}}
	features := func(r, w int32, rf, wf []string) *Protocol {
		return &Protocol{MinReaderVersion: r, MinWriterVersion: w, ReaderFeatures: rf, WriterFeatures: wf}
	}
	for _, tc := range []struct {
		name    string
		cur     *Protocol
		meta    *Metadata
		history bool
		want    *Protocol // nil: unchanged
	}{
		{"plain table stays", features(1, 2, nil, nil), plain, true, nil},
		// testSchema's id is NOT NULL: an invariant, for Spark.
		{"new table with ntz", features(1, 2, nil, nil), ntz, false,
			features(3, 7, []string{"timestampNtz"}, []string{"invariants", "timestampNtz"})},
		{"new table with ntz, every column nullable", features(1, 2, nil, nil), nullableNTZ, false,
			features(3, 7, []string{"timestampNtz"}, []string{"timestampNtz"})},
		{"writer 2 keeps appendOnly and invariants", features(1, 2, nil, nil), ntz, true,
			features(3, 7, []string{"timestampNtz"}, []string{"appendOnly", "invariants", "timestampNtz"})},
		{"writer 1 implies nothing", features(1, 1, nil, nil), nullableNTZ, true,
			features(3, 7, []string{"timestampNtz"}, []string{"timestampNtz"})},
		{"writer 1 with a NOT NULL column", features(1, 1, nil, nil), ntz, true,
			features(3, 7, []string{"timestampNtz"}, []string{"invariants", "timestampNtz"})},
		{"writer 3 adds checkConstraints", features(1, 3, nil, nil), ntz, true,
			features(3, 7, []string{"timestampNtz"}, []string{"appendOnly", "checkConstraints", "invariants", "timestampNtz"})},
		{"writer 4 adds changeDataFeed and generatedColumns", features(1, 4, nil, nil), ntz, true,
			features(3, 7, []string{"timestampNtz"}, []string{"appendOnly", "changeDataFeed", "checkConstraints", "generatedColumns", "invariants", "timestampNtz"})},
		{"reader 2 writer 5 adds columnMapping", features(2, 5, nil, nil), ntz, true,
			features(3, 7, []string{"columnMapping", "timestampNtz"}, []string{"appendOnly", "changeDataFeed", "checkConstraints", "columnMapping", "generatedColumns", "invariants", "timestampNtz"})},
		{"writer 6 adds identityColumns", features(2, 6, nil, nil), ntz, true,
			features(3, 7, []string{"columnMapping", "timestampNtz"}, []string{"appendOnly", "changeDataFeed", "checkConstraints", "columnMapping", "generatedColumns", "identityColumns", "invariants", "timestampNtz"})},
		{"features kept", features(3, 7, []string{"deletionVectors"}, []string{"deletionVectors", "domainMetadata"}), nullableNTZ, true,
			features(3, 7, []string{"deletionVectors", "timestampNtz"}, []string{"deletionVectors", "domainMetadata", "timestampNtz"})},
		{"NOT NULL at writer 7 adds invariants", features(3, 7, []string{"deletionVectors"}, []string{"deletionVectors"}), plain, true,
			features(3, 7, []string{"deletionVectors"}, []string{"deletionVectors", "invariants"})},
		{"ntz inside an array", features(1, 2, nil, nil), nested, false,
			features(3, 7, []string{"timestampNtz"}, []string{"timestampNtz"})},
		{"ntz already supported", features(3, 7, []string{"timestampNtz"}, []string{"invariants", "timestampNtz"}), ntz, true, nil},
		{"writer feature at reader 1", features(1, 7, nil, nil), appendOnly, true, features(1, 7, nil, []string{"appendOnly", "invariants"})},
		{"appendOnly at writer 2", features(1, 2, nil, nil), appendOnly, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed, err := requiredProtocol(tc.cur, tc.meta, tc.history)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == nil {
				want = tc.cur
			}
			if changed != (tc.want != nil) || !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v (changed %v), want %+v", got, changed, want)
			}
		})
	}
}

// TestSchemaEvolutionUpgradesProtocol: adding a timestamp_ntz column to a
// reader 1 / writer 2 table commits the upgraded protocol with the
// metaData, and delta-rs then reads the table, rows of both schemas.
// Before, the commit held only metaData and delta-rs refused the table.
func TestSchemaEvolutionUpgradesProtocol(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	store, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	tbl, s := newTestTable(t, store)
	pv := map[string]*string{"part": str("a")}
	add, err := WriteDataFile(ctx, store, testSchema(), []string{"part"}, pv, []Row{{int64(1), nil, 1.5}}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, s, []Action{{Add: add}}, Operation{Name: "WRITE"}); err != nil {
		t.Fatal(err)
	}

	meta := s.Metadata()
	meta.SchemaString = ntzSchema().SchemaString()
	v, err := tbl.Commit(ctx, s, []Action{{MetaData: &meta}}, Operation{Name: "ADD COLUMNS"})
	if err != nil {
		t.Fatal(err)
	}
	data, err := store.Get(ctx, CommitKey(v))
	if err != nil {
		t.Fatal(err)
	}
	actions, err := ParseActions(CommitKey(v), data)
	if err != nil {
		t.Fatal(err)
	}
	want := Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz"},
		WriterFeatures: []string{"appendOnly", "invariants", "timestampNtz"}}
	var got *Protocol
	for _, a := range actions {
		if a.Protocol != nil {
			got = a.Protocol
		}
	}
	if got == nil || !reflect.DeepEqual(*got, want) {
		t.Fatalf("commit %d protocol = %+v, want %+v\n%s", v, got, want, data)
	}
	if !reflect.DeepEqual(s.Protocol(), want) {
		t.Errorf("in-memory protocol = %+v, want %+v", s.Protocol(), want)
	}

	local := time.Date(2026, 6, 22, 9, 15, 30, 0, time.UTC)
	add, err = WriteDataFile(ctx, store, ntzSchema(), []string{"part"}, pv, []Row{{int64(2), nil, 2.5, local}}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, s, []Action{{Add: add}}, Operation{Name: "WRITE"}); err != nil {
		t.Fatal(err)
	}
	view := deltaRS(t, dir, "--rows")
	if view.RowsError != "" || len(view.Rows) != 2 {
		t.Fatalf("delta-rs read %d rows (error %q), want 2", len(view.Rows), view.RowsError)
	}
	compareWithDeltaRS(t, tbl, dir, true)
}

// TestCreateProtocol: a new table gets Spark's default protocol, or just
// the features its schema needs, as Spark 3.5 writes it.
func TestCreateProtocol(t *testing.T) {
	for _, tc := range []struct {
		schema *StructType
		want   string
	}{
		{testSchema(), `{"minReaderVersion":1,"minWriterVersion":2}`},
		// As Spark 3.5.1 (Delta 3.2.0) creates (i BIGINT NOT NULL, t TIMESTAMP_NTZ), and (i BIGINT, t TIMESTAMP_NTZ).
		{ntzSchema(), `{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["timestampNtz"],"writerFeatures":["invariants","timestampNtz"]}`},
		{&StructType{Fields: []StructField{{Name: "i", Type: Long, Nullable: true}, {Name: "t", Type: TimestampNTZ, Nullable: true}}},
			`{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["timestampNtz"],"writerFeatures":["timestampNtz"]}`},
	} {
		s, err := NewTable(storage.NewMem()).Create(t.Context(), tc.schema, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(s.Protocol())
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("protocol %s, want %s", got, tc.want)
		}
	}
}

// TestMetadataNeedingUnwritableFeatureRefused: a metaData change that
// activates a feature this library cannot append under (a CHECK constraint
// it does not evaluate) is refused rather than committed.
func TestMetadataNeedingUnwritableFeatureRefused(t *testing.T) {
	tbl, s := newTestTable(t, storage.NewMem())
	meta := s.Metadata()
	meta.Configuration = map[string]string{"delta.constraints.positive": "id > 0"}
	meta.SchemaString = ntzSchema().SchemaString()
	_, err := tbl.Commit(t.Context(), s, []Action{{MetaData: &meta}}, Operation{Name: "SET TBLPROPERTIES"})
	var ue *UnsupportedError
	if !errors.As(err, &ue) || !reflect.DeepEqual(ue.Features, []string{"checkConstraints"}) {
		t.Fatalf("err = %v, want an UnsupportedError naming checkConstraints", err)
	}
	if s.Version() != 0 {
		t.Errorf("version %d: something was committed", s.Version())
	}
}

// TestMetadataEnablingChangeDataFeed: change data feed asks nothing of an
// append, so a metaData change turning it on upgrades the protocol and is
// committed.
func TestMetadataEnablingChangeDataFeed(t *testing.T) {
	tbl, s := newTestTable(t, storage.NewMem())
	meta := s.Metadata()
	meta.Configuration = map[string]string{"delta.enableChangeDataFeed": "true"}
	if _, err := tbl.Commit(t.Context(), s, []Action{{MetaData: &meta}}, Operation{Name: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}
	if p := s.Protocol(); p.MinWriterVersion != 7 || !slices.Contains(p.WriterFeatures, "changeDataFeed") {
		t.Errorf("protocol %+v does not list changeDataFeed", p)
	}
}
