// Package formats runs the deltaflow binary on topics of the binary
// formats, written by producers deltaflow did not write (confluent-kafka
// with fastavro), against the real Kafka broker, MinIO and nats-server, and
// reads the tables with delta-rs and DuckDB.
package formats

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
)

// wantTypes are the Delta types delta-rs reads for reading.avsc's
// columns, with their nullability.
var wantTypes = map[string]string{"id": "string", "kind": "string", "other_kind": "string null", "on": "boolean",
	"count": "integer", "total": "long", "ratio": "float", "power": "double null", "day": "date", "at": "timestamp",
	"at_us": "timestamp null", "tod": "integer", "uid": "string"}

// TestAvroTopic: a topic of Avro records written by confluent-kafka with
// fastavro's schemaless writer (no header), read with `format: avro` and
// the schema file and no columns, becomes a table whose columns are the
// schema's fields with from_avro's types, holding exactly the values
// produced, as delta-rs and DuckDB read them; records that are not Avro of
// the schema are dead letters.
func TestAvroTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers; skipped with -short")
	}
	const count, bad = 300, 3
	brokers, s3 := testenv.Kafka(t), testenv.MinIO(t)
	py := testenv.Python(t)
	bin := scenario.Binary(t)
	dir := t.TempDir()
	// A field of every Avro type a column is derived from.
	schema := filepath.Join(scenario.RepoRoot(t), "mapping", "testdata", "reading.avsc")
	topic := scenario.Unique("avro-readings")
	kcfg := kafka.DefaultConfig()
	kcfg.Brokers = brokers
	if err := kafka.CreateTopic(t.Context(), kcfg, topic, 3, -1); err != nil {
		t.Fatal(err)
	}

	produced := python(t, py, filepath.Join(scenario.RepoRoot(t), "scripts", "avroproduce.py"), "--brokers", strings.Join(brokers, ","),
		"--topic", topic, "--schema", schema, "--count", strconv.Itoa(count), "--seed", "7", "--bad", strconv.Itoa(bad))

	name := strings.ReplaceAll(topic, "-", "_")
	uri := "s3://" + s3.Bucket + "/" + name
	// No columns, no partition_columns: the schema's fields, unpartitioned.
	config := filepath.Join(dir, "deltaflow.yaml")
	yaml := fmt.Sprintf("table:\n  name: %s\n  format: avro\n  schema_file: %s\nflush:\n  interval: 1s\nlog:\n  format: text\n"+
		"nats:\n  dlq_max_bytes: 16MiB\n", name, schema)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	servers := scenario.Servers{Brokers: brokers, NATSURL: testenv.NATS(t), S3: s3}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, bin, "run", "--config", config, "--until-latest")
	run.Env = servers.Env(topic, scenario.Unique("avro-group"), uri, "127.0.0.1:0")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("run --until-latest: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte(fmt.Sprintf("rows=%d ", count))) || !bytes.Contains(out, []byte(fmt.Sprintf("dead_letters=%d ", bad))) {
		t.Errorf("run --until-latest did not commit %d rows and %d dead letters:\n%s", count, bad, out)
	}

	read := testenv.DeltaRS(t, append(os.Environ(), testenv.EnvMinIOEndpoint+"="+s3.Endpoint,
		testenv.EnvMinIOAccessKey+"="+s3.AccessKey, testenv.EnvMinIOSecretKey+"="+string(s3.SecretKey)),
		"read", uri, "--rows", "--duckdb")
	testenv.CheckDuckDB(t, read)
	var table struct {
		Schema struct {
			Fields []struct {
				Name     string `json:"name"`
				Type     any    `json:"type"`
				Nullable bool   `json:"nullable"`
			} `json:"fields"`
		} `json:"schema"`
		Rows json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(read, &table); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range table.Schema.Fields {
		got[f.Name], _ = f.Type.(string)
		if f.Nullable {
			got[f.Name] += " null"
		}
	}
	if !maps.Equal(got, wantTypes) {
		t.Errorf("columns as delta-rs reads them:\n got %v\nwant %v", got, wantTypes)
	}
	if g, w := canonical(t, table.Rows), canonical(t, produced); g != w {
		t.Errorf("rows differ from what was produced:\n got %.2000s\nwant %.2000s", g, w)
	}
}

// python runs a script with the test's Python and returns its stdout.
func python(t *testing.T, py, script string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{script}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(script), err, stderr.String())
	}
	return out
}

// canonical re-encodes JSON rows with their numbers as written (a long
// keeps all its digits).
func canonical(t *testing.T, rows []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(rows))
	dec.UseNumber()
	var v []map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("rows %.200s: %v", rows, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
