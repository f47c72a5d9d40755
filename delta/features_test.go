package delta

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// featureSnapshot builds a snapshot with the protocol, table properties and
// column metadata (a JSON object for column "c", "" for none).
func featureSnapshot(p Protocol, conf map[string]string, columnMetadata string) *Snapshot {
	s := newSnapshot(newTableRoot("/t"))
	s.version = 1
	s.protocol = &p
	md := "{}"
	if columnMetadata != "" {
		md = columnMetadata
	}
	s.metadata = &Metadata{ID: "t", SchemaString: `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},` +
		`{"name":"c","type":"long","nullable":true,"metadata":` + md + `}]}`, Configuration: conf}
	return s
}

func features7(names ...string) Protocol {
	return Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: names}
}

func features37(reader []string, writer ...string) Protocol {
	return Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: reader, WriterFeatures: append(slices.Clone(reader), writer...)}
}

// TestFeatureGating: features are refused by operation, and only while
// active ("supported does not imply active"); each refusal names the
// feature and the operation.
func TestFeatureGating(t *testing.T) {
	type want map[Op]string // refused feature per op; missing: allowed
	refusedAll := func(f string) want { return want{OpAppend: f, OpOptimize: f, OpVacuum: f} }
	for _, tc := range []struct {
		name   string
		p      Protocol
		conf   map[string]string
		colMD  string
		refuse want
	}{
		{"plain 1/2", Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, nil, "", want{}},
		{"appendOnly supported, not active", features7("appendOnly"), nil, "", want{}},
		{"appendOnly active", features7("appendOnly"), map[string]string{"delta.appendOnly": "true"}, "", want{}},
		{"invariants present", Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, nil,
			`{"delta.invariants":"{\"expression\":{\"expression\":\"c > 0\"}}"}`, want{OpAppend: "invariants"}},
		{"checkConstraints supported only", features7("checkConstraints"), nil, "", want{}},
		{"checkConstraints active", features7("checkConstraints"), map[string]string{"delta.constraints.positive": "c > 0"}, "",
			want{OpAppend: "checkConstraints"}},
		{"legacy writer 3 with a constraint", Protocol{MinReaderVersion: 1, MinWriterVersion: 3},
			map[string]string{"delta.constraints.positive": "c > 0"}, "", want{OpAppend: "checkConstraints"}},
		{"generatedColumns supported only", features7("generatedColumns"), nil, "", want{}},
		{"generatedColumns active", features7("generatedColumns"), nil, `{"delta.generationExpression":"id * 2"}`,
			want{OpAppend: "generatedColumns"}},
		{"legacy writer 4 with a generated column", Protocol{MinReaderVersion: 1, MinWriterVersion: 4}, nil,
			`{"delta.generationExpression":"id * 2"}`, want{OpAppend: "generatedColumns"}},
		{"changeDataFeed active", features7("changeDataFeed"), map[string]string{"delta.enableChangeDataFeed": "true"}, "", want{}},
		{"domainMetadata", features7("domainMetadata"), nil, "", want{}},
		{"timestampNtz", features37([]string{"timestampNtz"}), nil, "", want{}},
		{"vacuumProtocolCheck", features37([]string{"vacuumProtocolCheck"}), nil, "", want{}},
		{"rowTracking supported", features7("rowTracking", "domainMetadata"), nil, "", want{}},
		{"rowTracking suspended", features7("rowTracking", "domainMetadata"), map[string]string{"delta.rowTrackingSuspended": "true"}, "", want{}},
		{"identityColumns supported only", features7("identityColumns"), nil, "", want{}},
		{"identityColumns active", features7("identityColumns"), nil, `{"delta.identity.start":1,"delta.identity.step":1}`,
			want{OpAppend: "identityColumns"}},
		{"typeWidening active", features37([]string{"typeWidening"}), map[string]string{"delta.enableTypeWidening": "true"}, "",
			want{}},
		{"typeWidening-preview changed a type", features37([]string{"typeWidening-preview"}), nil,
			`{"delta.typeChanges":[{"fromType":"short","toType":"integer"}]}`, want{}},
		{"materializePartitionColumns", features7("materializePartitionColumns"), nil, "", want{}},
		{"catalogManaged", features37([]string{"catalogManaged"}, "inCommitTimestamp"), nil, "",
			want{OpRead: "catalogManaged", OpAppend: "catalogManaged", OpOptimize: "catalogManaged", OpVacuum: "catalogManaged"}},
		{"icebergCompatV2 active", features7("icebergCompatV2", "columnMapping"),
			map[string]string{"delta.enableIcebergCompatV2": "true"}, "", refusedAll("icebergCompatV2")},
		{"clustering", features7("clustering", "domainMetadata"), nil, "", want{}},
		{"unknown writer feature", features7("fancyNewThing"), nil, "", refusedAll("fancyNewThing")},
		{"unknown reader feature", features37([]string{"fancyNewThing"}), nil, "",
			want{OpRead: "fancyNewThing", OpAppend: "fancyNewThing", OpOptimize: "fancyNewThing", OpVacuum: "fancyNewThing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := featureSnapshot(tc.p, tc.conf, tc.colMD)
			for _, op := range []Op{OpRead, OpAppend, OpOptimize, OpVacuum} {
				err := s.Check(op)
				f, refused := tc.refuse[op]
				if !refused {
					if err != nil {
						t.Errorf("%s: refused: %v", op, err)
					}
					continue
				}
				var ue *UnsupportedError
				if !errors.As(err, &ue) {
					t.Fatalf("%s: got %v, want *UnsupportedError naming %s", op, err, f)
				}
				if ue.Op != op || !slices.Contains(ue.Features, f) || ue.Write != (op != OpRead) {
					t.Errorf("%s: got %+v, want feature %s", op, ue, f)
				}
				if msg := err.Error(); !strings.Contains(msg, f) || !strings.Contains(msg, string(op)) {
					t.Errorf("%s: message %q names not both feature and operation", op, msg)
				}
			}
		})
	}
}

// TestFeatureRefusalNamesWhere: the error says why the feature is refused
// and which constraint or column makes it active.
func TestFeatureRefusalNamesWhere(t *testing.T) {
	s := featureSnapshot(features7("checkConstraints"), map[string]string{"delta.constraints.positive": "c > 0"}, "")
	if err := s.CheckWrite(); err == nil || !strings.Contains(err.Error(), "checkConstraints: CHECK constraints are not evaluated (positive)") {
		t.Errorf("got %v", err)
	}
	s = featureSnapshot(features7("generatedColumns"), nil, `{"delta.generationExpression":"id * 2"}`)
	if err := s.CheckWrite(); err == nil || !strings.Contains(err.Error(), "generatedColumns: generation expressions are not evaluated (c)") {
		t.Errorf("got %v", err)
	}
	s = featureSnapshot(features7("fancyNewThing"), nil, "")
	if err := s.CheckWrite(); err == nil || !strings.Contains(err.Error(), "fancyNewThing: "+unknownFeature) {
		t.Errorf("got %v", err)
	}
}

// TestCommitGatedByOperation: Commit gates by the operation it records, so
// an OPTIMIZE commit passes where an append is refused.
func TestCommitGatedByOperation(t *testing.T) {
	for name, want := range map[string]Op{"WRITE": OpAppend, "STREAMING UPDATE": OpAppend, "OPTIMIZE": OpOptimize,
		"VACUUM START": OpVacuum, "VACUUM END": OpVacuum, "CHANGE COLUMN": OpAppend} {
		if got := opOf(name); got != want {
			t.Errorf("opOf(%q) = %s, want %s", name, got, want)
		}
	}
}

// TestActiveFeatures: supported features count only when in use.
func TestActiveFeatures(t *testing.T) {
	p := features37([]string{"columnMapping", "deletionVectors"}, "checkConstraints", "domainMetadata")
	s := featureSnapshot(p, nil, "")
	if got := s.ActiveFeatures(); !slices.Equal(got, []string{"domainMetadata"}) {
		t.Errorf("nothing enabled: %v", got)
	}
	s = featureSnapshot(p, map[string]string{"delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true",
		"delta.constraints.c": "c > 0"}, "")
	if got := s.ActiveFeatures(); !slices.Equal(got, []string{"columnMapping", "deletionVectors", "checkConstraints", "domainMetadata"}) {
		t.Errorf("all enabled: %v", got)
	}
}
