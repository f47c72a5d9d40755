package formats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// TestRegistryAvroTopic: a topic written by confluent-kafka's
// AvroSerializer (the Confluent wire format) through a schema registry
// (franz-go's srfake, over HTTP, with basic auth), in three schema
// versions (the second adds a nullable field and widens a float to a
// double, the third adds a field), read with `format: avro` and no
// columns: the table's columns are the latest version's at start, each
// record is read with its own writer schema (older versions' rows hold
// null in the newer fields), a version that adds a field while running
// adds its column, and delta-rs and DuckDB read exactly what was produced;
// records without the header are dead letters. The registry is down when
// deltaflow starts (it waits, and goes on once it is back), down for a
// whole second start (the schemas kept in the NATS KV decode the new
// records), and down when the third version first appears (the partition
// waits for it); a wrong password fails the start naming the key.
func TestRegistryAvroTopic(t *testing.T) {
	const count, bad = 150, 3
	registry := testenv.SchemaRegistry(t, "deltaflow", "registry-s3cret")
	f := newFormatTopic(t, "registry-readings", "  format: avro\n",
		"schema_registry:\n  url: "+registry.URL()+"\n  user: deltaflow\n")
	v1 := filepath.Join(scenario.RepoRoot(t), "mapping", "testdata", "reading.avsc")
	// v2 widens ratio from float to double and adds a nullable field; v3
	// adds a field with a default.
	v2 := evolve(t, v1, filepath.Join(t.TempDir(), "reading-v2.avsc"), func(fields []any) []any {
		for _, f := range fields {
			if f := f.(map[string]any); f["name"] == "ratio" {
				f["type"] = "double"
			}
		}
		return append(fields, map[string]any{"name": "note", "type": []any{"null", "string"}, "default": nil})
	})
	v3 := evolve(t, v2, filepath.Join(t.TempDir(), "reading-v3.avsc"), func(fields []any) []any {
		return append(fields, map[string]any{"name": "room", "type": "string", "default": ""})
	})
	// Every column made of a registry's schema is nullable.
	types := map[string]string{}
	for name, typ := range wantTypes {
		types[name] = strings.TrimSuffix(typ, " null") + " null"
	}
	types["ratio"], types["note"] = "double null", "string null"
	produce := func(schema string, seed, bad int) []map[string]any {
		t.Helper()
		return decodeRows(t, f.produce("avroproduce.py", []string{"SCHEMA_REGISTRY_USER_INFO=deltaflow:registry-s3cret"}, "--schema", schema,
			"--count", strconv.Itoa(count), "--seed", strconv.Itoa(seed), "--bad", strconv.Itoa(bad), "--registry", registry.URL()))
	}
	want := append(produce(v1, 7, bad), produce(v2, 8, 0)...)
	run := func(password string) ([]byte, error) { return f.run("DELTAFLOW_SCHEMA_REGISTRY_PASSWORD=" + password) }

	// A wrong password: the start fails, naming the key and the variable.
	out, err := run("wrong")
	if err == nil || !bytes.Contains(out, []byte("DELTAFLOW_SCHEMA_REGISTRY_PASSWORD")) || !bytes.Contains(out, []byte("refused the credentials")) {
		t.Fatalf("run with a wrong password: %v; want a failure naming DELTAFLOW_SCHEMA_REGISTRY_PASSWORD\n%s", err, out)
	}
	if bytes.Contains(out, []byte("wrong")) {
		t.Errorf("the password is in the output:\n%s", out)
	}

	// The registry is down at start: deltaflow waits for it.
	registry.Stop()
	back := time.AfterFunc(4*time.Second, registry.Start)
	defer back.Stop()
	out, err = run("registry-s3cret")
	if err != nil {
		t.Fatalf("run --until-latest: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("waiting for the subject's latest schema")) {
		t.Errorf("no wait for the registry logged:\n%s", out)
	}
	if !bytes.Contains(out, []byte(fmt.Sprintf("rows=%d ", 2*count))) || !bytes.Contains(out, []byte(fmt.Sprintf("dead_letters=%d ", bad))) {
		t.Errorf("run --until-latest did not commit %d rows and %d dead letters:\n%s", 2*count, bad, out)
	}
	checkTable(t, f.s3, f.uri, types, want)

	// More records of both versions, then the registry is down for the
	// whole of a second run: what the KV kept decodes them.
	want = append(want, produce(v1, 9, 0)...)
	want = append(want, produce(v2, 10, 0)...)
	registry.Stop()
	if out, err = run("registry-s3cret"); err != nil {
		t.Fatalf("run --until-latest with the registry down: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("seen before stands in")) || !bytes.Contains(out, []byte(fmt.Sprintf("rows=%d ", 2*count))) {
		t.Errorf("the second run did not decode %d rows with the schemas kept:\n%s", 2*count, out)
	}
	checkTable(t, f.s3, f.uri, types, want)

	// v3 adds a field while deltaflow runs: its start takes v2 from the KV
	// (the registry is down), the first v3 record waits for its schema
	// until the registry is back, and then adds the column.
	registry.Start()
	want = append(want, produce(v3, 11, 0)...)
	registry.Stop()
	back = time.AfterFunc(4*time.Second, registry.Start)
	defer back.Stop()
	if out, err = run("registry-s3cret"); err != nil {
		t.Fatalf("run --until-latest with a new schema: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("fetching a schema from the registry")) || !bytes.Contains(out, []byte("schema evolution: the writer schema adds or widens columns")) ||
		!bytes.Contains(out, []byte(fmt.Sprintf("rows=%d ", count))) {
		t.Errorf("the third run did not wait for schema v3, add its column and commit %d rows:\n%s", count, out)
	}
	types["room"] = "string null"
	checkTable(t, f.s3, f.uri, types, want)
}

// TestRegistryJSONSchemaTopic: a topic written by confluent-kafka's
// JSONSerializer (which validates each record and registers the schema)
// through a schema registry (srfake over HTTP, basic auth), read with
// `format: json_schema` and no columns: the columns are the schema's
// properties with the types docs/configuration.md gives them, records
// framed with the schema's id that it refuses are dead letters naming
// where, a second version that adds a property adds its column while
// running (the first start's schema kept in the KV standing in for the
// registry, down), and delta-rs and DuckDB read exactly what was produced.
func TestRegistryJSONSchemaTopic(t *testing.T) {
	r := newRegistryTopic(t, "registry-alerts", "json_schema")
	v1 := filepath.Join(scenario.RepoRoot(t), "mapping", "testdata", "alert.schema.json")
	v2 := editJSON(t, v1, filepath.Join(t.TempDir(), "alert-v2.schema.json"), func(schema map[string]any) {
		schema["properties"].(map[string]any)["room"] = map[string]any{"type": "string"}
	})
	produce := func(schema string, seed, bad int) []map[string]any {
		return r.produce("jsonschemaproduce.py", seed, bad, "--schema", schema)
	}
	types := map[string]string{"id": "string null", "level": "long null", "count": "long null", "score": "double null",
		"at": "timestamp null", "day": "date null", "acked": "boolean null"}
	r.firstRun(produce(v1, 7, registryBad), types, "mapping: the writer schema refuses the record: at '/level': got string, want integer")
	types["room"] = "string null"
	r.evolveWhileDown(produce(v2, 8, 0), types, "room")
}

// TestRegistryProtobufTopic: a topic written by confluent-kafka's
// ProtobufSerializer (the schema registered as a serialized file
// descriptor, its import of another file as a reference, the well-known
// types' not) through a schema registry (srfake over HTTP, basic auth),
// read with `format: protobuf` and no columns: the columns are the first
// message's fields with the types docs/configuration.md gives them, unset
// fields read their defaults (messages and optional fields null), records
// whose body is not the message are dead letters, a second version that
// adds a field adds its column while running (the registry down at the
// start), and delta-rs and DuckDB read exactly what was produced.
func TestRegistryProtobufTopic(t *testing.T) {
	r := newRegistryTopic(t, "registry-protos", "protobuf")
	v1 := filepath.Join(scenario.RepoRoot(t), "mapping", "testdata", "proto")
	// v2 adds a field to the message.
	v2 := t.TempDir()
	if err := os.CopyFS(v2, os.DirFS(v1)); err != nil {
		t.Fatal(err)
	}
	reading := filepath.Join(v2, "deltaflow", "test", "reading.proto")
	text, err := os.ReadFile(reading)
	if err == nil {
		err = os.WriteFile(reading, bytes.Replace(text, []byte("  Unit unit = 14;\n"), []byte("  Unit unit = 14;\n  string room = 15;\n"), 1), 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
	produce := func(root string, seed, bad int) []map[string]any {
		return r.produce("protoproduce.py", seed, bad, "--root", root,
			"--proto", "deltaflow/test/reading.proto", "--message", "deltaflow.test.Reading")
	}
	types := map[string]string{"id": "string null", "count": "integer null", "total": "long null", "small": "long null",
		"big": "long null", "ratio": "float null", "power": "double null", "on": "boolean null", "kind": "string null",
		"at": "timestamp null", "volts": "double null", "note": "string null", "delta": "long null", "unit": "string null"}
	r.firstRun(produce(v1, 7, registryBad), types, "mapping: not Protobuf of its writer schema's deltaflow.test.Reading: cannot parse reserved wire type")
	types["room"] = "string null"
	r.evolveWhileDown(produce(v2, 8, 0), types, "room")
}

// TestRegistryAvroKeyFields: a topic whose keys and values
// confluent-kafka's AvroSerializer wrote (subjects <T>-key and <T>-value),
// read with `key_format: avro` and columns of both: kafka.key.<field>
// sources hold the key's fields, the value's columns its fields, records
// whose value is not Avro are dead letters, and delta-rs and DuckDB read
// exactly what was produced.
func TestRegistryAvroKeyFields(t *testing.T) {
	r := newRegistryTopic(t, "registry-keyed", "avro", "  key_format: avro\n  partition_columns: []\n  columns:\n"+
		"    - {name: key_id, type: long, source: kafka.key.id}\n    - {name: key_site, type: string, source: kafka.key.site}\n"+
		"    - {name: id, type: string}\n    - {name: count, type: integer}\n")
	rows := r.produce("avroproduce.py", 7, registryBad, "--schema", filepath.Join(scenario.RepoRoot(t), "mapping", "testdata", "reading.avsc"),
		"--key-schema", filepath.Join(scenario.RepoRoot(t), "mapping", "testdata", "readingkey.avsc"))
	types := map[string]string{"key_id": "long null", "key_site": "string null", "id": "string null", "count": "integer null"}
	for i, row := range rows {
		rows[i] = map[string]any{}
		for name := range types {
			rows[i][name] = row[name]
		}
	}
	r.firstRun(rows, types, "mapping: not in the schema registry's wire format: magic byte 255, want 0 (a schema registry header)")
}

// registryCount and registryBad are how many records, and records that
// are dead letters, each producer run of a registryTopic writes.
const registryCount, registryBad = 150, 3

// registryTopic is a formatTopic of a registry format, with its registry
// (srfake over HTTP, basic auth) and what the table should hold so far.
type registryTopic struct {
	*formatTopic
	registry *testenv.Registry
	want     []map[string]any
}

func newRegistryTopic(t *testing.T, prefix, format string, tableKeys ...string) *registryTopic {
	registry := testenv.SchemaRegistry(t, "deltaflow", "registry-s3cret")
	f := newFormatTopic(t, prefix, "  format: "+format+"\n"+strings.Join(tableKeys, ""),
		"schema_registry:\n  url: "+registry.URL()+"\n  user: deltaflow\n")
	return &registryTopic{formatTopic: f, registry: registry}
}

// produce runs the producer script through the registry: registryCount
// records drawn from seed, then bad dead letters; it returns their rows.
func (r *registryTopic) produce(script string, seed, bad int, args ...string) []map[string]any {
	r.t.Helper()
	return decodeRows(r.t, r.formatTopic.produce(script, []string{"SCHEMA_REGISTRY_USER_INFO=deltaflow:registry-s3cret"},
		append(args, "--registry", r.registry.URL(), "--count", strconv.Itoa(registryCount), "--seed", strconv.Itoa(seed),
			"--bad", strconv.Itoa(bad))...))
}

// run is `deltaflow run --until-latest` with the registry's password.
func (r *registryTopic) run() []byte {
	r.t.Helper()
	out, err := r.formatTopic.run("DELTAFLOW_SCHEMA_REGISTRY_PASSWORD=registry-s3cret")
	if err != nil {
		r.t.Fatalf("run --until-latest: %v\n%s", err, out)
	}
	return out
}

// firstRun ingests rows (registryBad of the records produced being dead
// letters, each with reason letter): the table holds exactly rows, with
// types.
func (r *registryTopic) firstRun(rows []map[string]any, types map[string]string, letter string) {
	r.t.Helper()
	r.want = append(r.want, rows...)
	out := r.run()
	if !bytes.Contains(out, []byte(fmt.Sprintf("rows=%d ", registryCount))) || !bytes.Contains(out, []byte(fmt.Sprintf("dead_letters=%d ", registryBad))) {
		r.t.Errorf("run --until-latest did not commit %d rows and %d dead letters:\n%s", registryCount, registryBad, out)
	}
	checkTable(r.t, r.s3, r.uri, types, r.want)
	letters := r.deadLetters()
	for _, l := range letters {
		if l != letter {
			r.t.Errorf("dead letter %q, want %q", l, letter)
		}
	}
	if len(letters) != registryBad {
		r.t.Errorf("%d dead letters, want %d", len(letters), registryBad)
	}
}

// evolveWhileDown ingests rows, written with a later schema version that
// adds column changed or fields inside it, starting deltaflow while the
// registry is down (the schema kept in the KV stands in for the latest),
// so that the first of them waits for its schema and then evolves the
// table while running: its columns are then types.
func (r *registryTopic) evolveWhileDown(rows []map[string]any, types map[string]string, changed string) {
	r.t.Helper()
	r.want = append(r.want, rows...)
	r.registry.Stop()
	back := time.AfterFunc(4*time.Second, r.registry.Start)
	defer back.Stop()
	out := r.run()
	if !bytes.Contains(out, []byte("seen before stands in")) || !bytes.Contains(out, []byte("schema evolution: the writer schema adds or widens columns")) ||
		!bytes.Contains(out, []byte(fmt.Sprintf("rows=%d ", registryCount))) {
		r.t.Errorf("the run did not wait for the new version, add its column and commit %d rows:\n%s", registryCount, out)
	}
	checkTable(r.t, r.s3, r.uri, types, r.want)
	// `schema show` says where each column came from, and the subject's
	// latest schema id.
	cmd := exec.CommandContext(r.t.Context(), r.bin, "schema", "show", "--config", r.config)
	cmd.Env = append(r.servers.Env(r.topic, r.group, r.uri, "127.0.0.1:0"), "DELTAFLOW_SCHEMA_REGISTRY_PASSWORD=registry-s3cret")
	schema, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("schema show: %v\n%s", err, schema)
	}
	subject := regexp.QuoteMeta(r.topic) + `-value`
	for _, want := range []string{`(?m)^id\s.*subject ` + subject + `, schema id \d+$`, `(?m)^` + changed + `\s.*\sschema id \d+$`,
		`(?m)^subject ` + subject + ` \(\w+\): the registry's latest schema is id \d+$`} {
		if !regexp.MustCompile(want).Match(schema) {
			r.t.Errorf("schema show does not match %s:\n%s", want, schema)
		}
	}
}

// editJSON writes to path the JSON document at from, edited.
func editJSON(t *testing.T, from, path string, edit func(map[string]any)) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// evolve writes to path the Avro schema at from with its fields edited.
func evolve(t *testing.T, from, path string, edit func(fields []any) []any) string {
	t.Helper()
	return editJSON(t, from, path, func(schema map[string]any) { schema["fields"] = edit(schema["fields"].([]any)) })
}

// checkTable reads the table at uri with delta-rs and DuckDB: its columns
// have types, its rows are exactly want (a field a row's writer did not
// have is null); args are readTable's.
func checkTable(t *testing.T, s3 storage.S3Config, uri string, types map[string]string, want []map[string]any, args ...string) {
	t.Helper()
	got, rows := readTable(t, s3, uri, args...)
	if !maps.Equal(got, types) {
		t.Errorf("columns as delta-rs reads them:\n got %v\nwant %v", got, types)
	}
	fields := slices.Collect(maps.Keys(types))
	have, exp := rowSet(t, decodeRows(t, rows), fields), rowSet(t, want, fields)
	if len(have) != len(exp) {
		t.Fatalf("%d rows, %d produced", len(have), len(exp))
	}
	for i := range have {
		if have[i] != exp[i] {
			t.Fatalf("rows differ from what was produced; first difference:\n got %s\nwant %s", have[i], exp[i])
		}
	}
}

// decodeRows decodes avroproduce.py's rows, numbers as written.
func decodeRows(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var rows []map[string]any
	if err := dec.Decode(&rows); err != nil {
		t.Fatalf("rows %.200s: %v", b, err)
	}
	return rows
}

// rowSet renders rows as sorted JSON lines, each with every one of fields
// (null where the row lacks it).
func rowSet(t *testing.T, rows []map[string]any, fields []string) []string {
	t.Helper()
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		full := maps.Clone(r)
		for _, f := range fields {
			if _, ok := full[f]; !ok {
				full[f] = nil
			}
		}
		b, err := json.Marshal(full)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}
