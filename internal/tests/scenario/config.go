package scenario

import (
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/deltaflow/deltaflow/mapping"
)

// Column names the scenario config adds for exact accounting.
const (
	PartitionColumn = "kafka_partition"
	OffsetColumn    = "kafka_offset"
)

// Columns are the default sensor mapping plus the Kafka partition and offset
// of each record, so the table itself says which records it holds.
func Columns() []mapping.Column {
	cols := mapping.DefaultConfig().Columns
	return append(cols,
		mapping.Column{Name: PartitionColumn, Type: "integer", Source: "kafka.partition", Required: true},
		mapping.Column{Name: OffsetColumn, Type: "long", Source: "kafka.offset", Required: true},
	)
}

// WriteConfig writes a deltaflow config file for table name (partitioned
// like the Spark job's, columns from Columns) into the test's temp dir and
// returns its path. sections are extra top-level YAML sections merged over
// the defaults here (e.g. {"flush": {"interval": "1s"}}); servers come from
// the environment (Servers.Env).
func WriteConfig(t testing.TB, name string, sections map[string]any) string {
	t.Helper()
	doc := map[string]any{
		"table": map[string]any{
			"name":                name,
			"partition_columns":   mapping.DefaultPartitionColumns,
			"checkpoint_interval": 10,
			"columns":             Columns(),
		},
		"flush": map[string]any{"interval": "1s"},
		"log":   map[string]any{"level": "info", "format": "json"},
		// The stall watchdog after 5 minutes, not 10 flush intervals: the
		// outage scenarios keep a server down for a minute and expect the
		// process to ride it out (the stall scenario sets its own).
		"watchdog": map[string]any{"stall_intervals": 300},
		// Every scenario's table has its DLQ stream on the one test server,
		// and each stream reserves its bound of the server's store.
		"nats": map[string]any{"dlq_max_bytes": "64MiB"},
	}
	for k, v := range sections {
		if base, ok := doc[k].(map[string]any); ok {
			if over, ok := v.(map[string]any); ok {
				for kk, vv := range over {
					base[kk] = vv
				}
				continue
			}
		}
		doc[k] = v
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatalf("scenario: config: %v", err)
	}
	path := filepath.Join(t.TempDir(), "deltaflow.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("scenario: config: %v", err)
	}
	return path
}
