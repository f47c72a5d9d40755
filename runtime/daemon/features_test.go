package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/storage"
)

// TestRunColumnMappedTable: run appends to a table with column mapping
// (name mode) writing physical column names, column ids and physical
// partition values; a column added by schema evolution gets its own
// physical name and id; the rows read back by display name.
func TestRunColumnMappedTable(t *testing.T) {
	cluster := newCluster(t)
	brokers := cluster.ListenAddrs()
	produce(t, brokers, 500, 1)
	cfg := testConfig(t, brokers)
	store, err := storage.NewLocal(cfg.Table.URI)
	if err != nil {
		t.Fatal(err)
	}
	tbl := delta.NewTable(store)
	// Create the table, then turn column mapping on as Spark would.
	s, err := ensureTable(t.Context(), tbl, newMapper(t, cfg.Table.Columns, cfg.Table.PartitionColumns), TableConfig{CheckpointInterval: 10}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	meta := s.Metadata()
	schema, _ := s.Schema()
	mapped, conf, err := delta.AssignColumnMapping(schema, map[string]string{"delta.columnMapping.mode": "name"})
	if err != nil {
		t.Fatal(err)
	}
	meta.SchemaString, meta.Configuration = mapped.SchemaString(), conf
	p := &delta.Protocol{MinReaderVersion: 2, MinWriterVersion: 5}
	if _, err := tbl.Commit(t.Context(), s, []delta.Action{{Protocol: p}, {MetaData: &meta}}, delta.Operation{Name: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}
	cfg.Table.Columns = append(slices.Clone(cfg.Table.Columns), mapping.Column{Name: "kafka_offset", Type: "long", Source: "kafka.offset"})

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := Run(ctx, cfg, RunOptions{UntilLatest: true, LogOutput: logOutput()}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	s, err = tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	schema, _ = s.Schema()
	for _, f := range schema.Fields {
		if !strings.HasPrefix(delta.PhysicalName(&f), "col-") {
			t.Errorf("column %s has no physical name", f.Name)
		}
	}
	var rows int
	for _, a := range s.Files() {
		for k := range a.PartitionValues {
			if !strings.HasPrefix(k, "col-") {
				t.Errorf("%s: partition value keyed %q", a.Path, k)
			}
		}
		key, _ := delta.DecodePath(a.Path)
		f, err := os.Open(filepath.Join(cfg.Table.URI, key))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		pf, err := parquet.OpenFile(f, st.Size())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range pf.Schema().Fields() {
			if !strings.HasPrefix(c.Name(), "col-") || c.ID() == 0 {
				t.Errorf("%s: column %q, field id %d", a.Path, c.Name(), c.ID())
			}
		}
		f.Close()
		rs, err := delta.ReadDataFile(t.Context(), store, schema, s.PartitionColumns(), a)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			for i, v := range r {
				if v == nil && !schema.Fields[i].Nullable {
					t.Fatalf("%s: required column %s read as null", a.Path, schema.Fields[i].Name)
				}
			}
			if r[schema.Index("kafka_offset")] == nil {
				t.Fatalf("%s: kafka_offset read as null", a.Path)
			}
		}
		rows += len(rs)
	}
	if rows != 500 {
		t.Errorf("read %d rows, produced 500", rows)
	}
	// delta-rs (DataFusion, which honours column mapping) reads them too.
	// (DuckDB 1.5.5's delta extension reads the partition columns of a
	// column-mapped table as null, Spark's own tables too: it is checked on
	// the evolved table of TestRunEvolvedSchema instead.)
	var view struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(testenv.DeltaRS(t, nil, "read", cfg.Table.URI, "--rows", "--query"), &view); err != nil {
		t.Fatal(err)
	}
	if len(view.Rows) != 500 {
		t.Fatalf("delta-rs read %d rows", len(view.Rows))
	}
	for _, r := range view.Rows {
		if r["kafka_offset"] == nil || r["device_id"] == nil {
			t.Fatalf("delta-rs read nulls: %v", r)
		}
	}
}

// TestRunEvolvedSchema: a column added to the configuration between two
// runs is added to the table's schema (schema evolution); delta-rs and
// DuckDB read every row, the new column null in the rows written before.
func TestRunEvolvedSchema(t *testing.T) {
	cluster := newCluster(t)
	brokers := cluster.ListenAddrs()
	cfg := testConfig(t, brokers)
	run := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		if err := Run(ctx, cfg, RunOptions{UntilLatest: true, LogOutput: logOutput()}); err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	produce(t, brokers, 300, 1)
	run()
	cfg.Table.Columns = append(slices.Clone(cfg.Table.Columns), mapping.Column{Name: "kafka_offset", Type: "long", Source: "kafka.offset"})
	produce(t, brokers, 200, 2)
	run()
	raw := testenv.DeltaRS(t, nil, "read", cfg.Table.URI, "--rows", "--duckdb")
	testenv.CheckDuckDB(t, raw)
	var view struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(raw, &view); err != nil {
		t.Fatal(err)
	}
	var withOffset int
	for _, r := range view.Rows {
		if _, ok := r["kafka_offset"]; !ok {
			t.Fatalf("row without the evolved column: %v", r)
		}
		if r["kafka_offset"] != nil {
			withOffset++
		}
	}
	if len(view.Rows) != 500 || withOffset != 200 {
		t.Fatalf("read %d rows, %d with kafka_offset; want 500 and 200", len(view.Rows), withOffset)
	}
}

// TestOpenTableTypeWidening: the mapper OpenTable gives a registry table
// widens a derived column (a SchemaChangeError) once the table allows type
// widening, and before that makes the record a dead letter saying how to
// allow it.
func TestOpenTableTypeWidening(t *testing.T) {
	fake := srfake.New()
	defer fake.Close()
	// The subject's latest schema has n int; another subject's, n long.
	var wideID int
	for _, typ := range []string{"int", "long"} {
		id, _, err := fake.RegisterSchema(map[string]string{"int": "readings-value", "long": "other-value"}[typ],
			sr.Schema{Schema: `{"type":"record","name":"R","fields":[{"name":"n","type":"` + typ + `"}]}`})
		if err != nil {
			t.Fatal(err)
		}
		wideID = id
	}
	cfg := DefaultConfig()
	cfg.Table.URI = filepath.Join(t.TempDir(), "readings")
	cfg.Kafka.Topic = "readings"
	cfg.Table.Format, cfg.Table.Columns, cfg.Table.PartitionColumns = mapping.Avro, nil, nil
	cfg.SchemaRegistry.URL = []string{fake.URL()}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	reg, err := cfg.ResolveSchemas(t.Context(), testLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Fetch(t.Context(), wideID, nil); err != nil {
		t.Fatal(err)
	}
	wide := &mapping.Record{Value: []byte{0, 0, 0, 0, byte(wideID), 0x0a}} // n = 5
	tbl, _, m, err := OpenTable(t.Context(), &cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var row mapping.Row
	if err := m.Map(wide, &row); err == nil || !strings.Contains(err.Error(), "'delta.enableTypeWidening' = 'true'") {
		t.Fatalf("a wider n before the table allows it: %v, want a dead letter saying how to allow it", err)
	}
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	meta := s.Metadata()
	meta.Configuration = map[string]string{"delta.enableTypeWidening": "true"}
	if _, err := tbl.Commit(t.Context(), s, []delta.Action{{MetaData: &meta}}, delta.Operation{Name: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}
	if _, _, m, err = OpenTable(t.Context(), &cfg, nil); err != nil {
		t.Fatal(err)
	}
	err = m.Map(wide, &row)
	if change, ok := errors.AsType[*mapping.SchemaChangeError](err); !ok || len(change.Add) != 1 || change.Add[0].Name != "n" || change.Add[0].Type != "long" {
		t.Fatalf("a wider n once the table allows it: %v, want a SchemaChangeError widening n", err)
	}
}
