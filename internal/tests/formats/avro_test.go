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

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// wantTypes are the Delta types delta-rs reads for reading.avsc's
// columns, with their nullability.
var wantTypes = map[string]string{"id": "string", "kind": "string", "other_kind": "string null", "on": "boolean",
	"count": "integer", "total": "long", "ratio": "float", "power": "double null", "day": "date", "at": "timestamp",
	"at_us": "timestamp null", "tod": "integer", "uid": "string", "price": "decimal(9,2)", "amount": "decimal(18,4) null",
	"balance": "decimal(38,10)", "serial": "decimal(25,0)", "local_at": "timestamp_ntz", "local_us": "timestamp_ntz null"}

// TestAvroTopic: a topic of Avro records written by confluent-kafka with
// fastavro's schemaless writer (no header), read with `format: avro` and
// the schema file and no columns, becomes a table whose columns are the
// schema's fields with from_avro's types, holding exactly the values
// produced, as delta-rs and DuckDB read them; records that are not Avro of
// the schema are dead letters.
func TestAvroTopic(t *testing.T) {
	const count, bad = 300, 3
	// A field of every Avro type a column is derived from.
	schema := filepath.Join(scenario.RepoRoot(t), "mapping", "testdata", "reading.avsc")
	// No columns, no partition_columns: the schema's fields, unpartitioned.
	f := newFormatTopic(t, "avro-readings", "  format: avro\n  schema_file: "+schema+"\n")
	produced := f.produce("avroproduce.py", nil, "--schema", schema, "--count", strconv.Itoa(count), "--seed", "7", "--bad", strconv.Itoa(bad))
	out, err := f.run()
	if err != nil {
		t.Fatalf("run --until-latest: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte(fmt.Sprintf("rows=%d ", count))) || !bytes.Contains(out, []byte(fmt.Sprintf("dead_letters=%d ", bad))) {
		t.Errorf("run --until-latest did not commit %d rows and %d dead letters:\n%s", count, bad, out)
	}

	types, rows := readTable(t, f.s3, f.uri)
	if !maps.Equal(types, wantTypes) {
		t.Errorf("columns as delta-rs reads them:\n got %v\nwant %v", types, wantTypes)
	}
	if g, w := canonical(t, rows), canonical(t, produced); g != w {
		t.Errorf("rows differ from what was produced:\n got %.2000s\nwant %.2000s", g, w)
	}
}

// formatTopic is a topic of three partitions on the real broker, a table
// on MinIO for it, and the deltaflow binary's configuration between them.
type formatTopic struct {
	t            *testing.T
	brokers      []string
	s3           storage.S3Config
	py, bin      string
	topic, group string
	name         string // the table's
	uri, config  string
	servers      scenario.Servers
}

// newFormatTopic makes a topic named after prefix and the configuration
// of a table of it whose table section has table's keys (indented), with
// more sections after it (extra). It skips the test with -short.
func newFormatTopic(t *testing.T, prefix, table string, extra ...string) *formatTopic {
	t.Helper()
	if testing.Short() {
		t.Skip("real servers; skipped with -short")
	}
	f := &formatTopic{t: t, brokers: testenv.Kafka(t), s3: testenv.MinIO(t), py: testenv.Python(t), bin: scenario.Binary(t),
		topic: scenario.Unique(prefix), group: scenario.Unique(prefix + "-group")}
	kcfg := kafka.DefaultConfig()
	kcfg.Brokers = f.brokers
	if err := kafka.CreateTopic(t.Context(), kcfg, f.topic, 3, -1); err != nil {
		t.Fatal(err)
	}
	name := strings.ReplaceAll(f.topic, "-", "_")
	f.name = name
	f.uri = "s3://" + f.s3.Bucket + "/" + name
	f.config = filepath.Join(t.TempDir(), "deltaflow.yaml")
	yaml := "table:\n  name: " + name + "\n" + table + "flush:\n  interval: 1s\nlog:\n  format: text\nnats:\n  dlq_max_bytes: 16MiB\n" +
		strings.Join(extra, "")
	if err := os.WriteFile(f.config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	f.servers = scenario.Servers{Brokers: f.brokers, NATSURL: testenv.NATS(t), S3: f.s3}
	return f
}

// produce runs the producer script (avroproduce.py, jsonschemaproduce.py)
// on the topic with args, env added to its environment, and returns what
// it printed.
func (f *formatTopic) produce(script string, env []string, args ...string) []byte {
	f.t.Helper()
	return pythonEnv(f.t, f.py, env, filepath.Join(scenario.RepoRoot(f.t), "scripts", script),
		append([]string{"--brokers", strings.Join(f.brokers, ","), "--topic", f.topic}, args...)...)
}

// run runs `deltaflow run --until-latest` on the topic, env added to its
// environment.
func (f *formatTopic) run(env ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(f.t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.bin, "run", "--config", f.config, "--until-latest")
	cmd.Env = append(f.servers.Env(f.topic, f.group, f.uri, "127.0.0.1:0"), env...)
	return cmd.CombinedOutput()
}

// deadLetters are the reasons of the table's dead letters.
func (f *formatTopic) deadLetters() []string {
	f.t.Helper()
	var reasons []string
	err := scenario.Letters(f.t.Context(), f.servers.NATSURL, f.name, func(msg jetstream.Msg) error {
		reasons = append(reasons, msg.Headers().Get(bridge.HeaderError))
		return nil
	})
	if err != nil {
		f.t.Fatalf("dead letters of %s: %v", f.name, err)
	}
	return reasons
}

// readTable reads the table at uri with delta-rs (and DuckDB, which must
// agree): each column's type (" null" after a nullable one's) and the rows
// as JSON, rendered by scripts/deltars.py, called with args added
// (--query: through delta-rs's query engine, which applies deletion vectors).
func readTable(t *testing.T, s3 storage.S3Config, uri string, args ...string) (map[string]string, json.RawMessage) {
	t.Helper()
	read := testenv.DeltaRS(t, append(os.Environ(), testenv.EnvMinIOEndpoint+"="+s3.Endpoint,
		testenv.EnvMinIOAccessKey+"="+s3.AccessKey, testenv.EnvMinIOSecretKey+"="+string(s3.SecretKey)),
		append([]string{"read", uri, "--rows", "--duckdb"}, args...)...)
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
	types := map[string]string{}
	for _, f := range table.Schema.Fields {
		types[f.Name] = nestedDDL(f.Type)
		if f.Nullable {
			types[f.Name] += " null"
		}
	}
	return types, table.Rows
}

// pythonEnv is python with env added to this process's environment.
func pythonEnv(t *testing.T, py string, env []string, script string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), env...)
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
