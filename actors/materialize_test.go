package actors

import (
	"fmt"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta"
)

// TestMaterializedPartitionColumns: on a table with the writer feature
// materializePartitionColumns, the engine writes each file's partition
// values into it too, behind the data columns, with the engine's writer
// options set from the table (Snapshot.ApplyWriterOptions, as the daemon
// does), and every record lands once.
func TestMaterializedPartitionColumns(t *testing.T) {
	h := newHarness(t, nil)
	s, err := h.table.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p := &delta.Protocol{MinReaderVersion: 1, MinWriterVersion: 7,
		WriterFeatures: []string{"appendOnly", "invariants", "materializePartitionColumns"}}
	if _, err := h.table.Commit(t.Context(), s, []delta.Action{{Protocol: p}}, delta.Operation{Name: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}
	var cfg Config
	if err := s.ApplyWriterOptions(&cfg.Writer); err != nil {
		t.Fatal(err)
	}
	h.produce(2_000, 0, 7)
	r := h.start(cfg, nil)
	h.waitCommitted(r, 60*time.Second)
	r.stop(t)
	h.checkExactlyOnce()
	if s, err = h.table.Snapshot(t.Context()); err != nil {
		t.Fatal(err)
	}
	schema, _ := s.Schema()
	for _, a := range s.Files() {
		// Read as if unpartitioned: the partition columns come from the file.
		rows, err := delta.ReadDataFile(t.Context(), h.store, schema, nil, a)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range s.PartitionColumns() {
			i := schema.Index(c)
			want, err := delta.ParsePartitionValue(schema.Fields[i].Type, a.PartitionValues[c])
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if fmt.Sprint(r[i]) != fmt.Sprint(want) {
					t.Fatalf("%s: %s is %v in the file, %v in the log", a.Path, c, r[i], want)
				}
			}
		}
	}
}
