package cli

import (
	"encoding/base64"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// clearConfigEnv blanks the variables that override the file, which the
// test servers' env.sh may have set.
func clearConfigEnv(t *testing.T) {
	for _, v := range []string{"KAFKA_BOOTSTRAP", "KAFKA_TOPIC", "KAFKA_GROUP", "MINIO_ENDPOINT", "MINIO_ACCESS_KEY",
		"MINIO_SECRET_KEY", "MINIO_CA_FILE", "NATS_URL", "NATS_PASSWORD", "DELTAFLOW_TABLE_URI", "DELTAFLOW_LOG_LEVEL",
		"DELTAFLOW_HTTP_LISTEN", "FLUSH_INTERVAL", "DELTAFLOW_CONFIG", "DELTAFLOW_SCHEMA_REGISTRY_URL",
		"DELTAFLOW_SCHEMA_REGISTRY_PASSWORD", "DELTAFLOW_SCHEMA_REGISTRY_TOKEN"} {
		t.Setenv(v, "")
	}
}

func writeConfigFile(t *testing.T, yaml string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "deltaflow.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// config check prints the effective configuration, every default filled
// in and every secret redacted, as YAML or JSON, exit 0.
func TestConfigCheckPrintsEffectiveConfig(t *testing.T) {
	clearConfigEnv(t)
	t.Setenv("MINIO_SECRET_KEY", "env-secret-123")
	f := writeConfigFile(t, "storage:\n  access_key: ak\nkafka:\n  brokers: broker-1:9092\n  sasl: {mechanism: SCRAM-SHA-512, user: df, password: file-secret-456}\n")
	code, out, errs := run(t, "config", "check", "--config", f)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"valid", "brokers:\n    - broker-1:9092", "topic: sensor-events", "grace: 1m0s",
		"kv_bucket: deltaflow_offsets", "dlq_stream: DELTAFLOW_DLQ_SENSOR_EVENTS", "secret_key: REDACTED", "password: REDACTED"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = run(t, "config", "check", "--config", f, "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errs)
	}
	var res struct {
		Valid  bool
		Config struct {
			Storage struct {
				SecretKey string `json:"secret_key"`
			}
			Kafka struct {
				Brokers []string
				Topic   string
			}
			Flush struct{ Interval string }
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if !res.Valid || res.Config.Storage.SecretKey != "REDACTED" || res.Config.Kafka.Topic != "sensor-events" ||
		len(res.Config.Kafka.Brokers) != 1 || res.Config.Flush.Interval != "1m0s" {
		t.Errorf("--json: %+v", res)
	}
	for _, s := range []string{"env-secret-123", "file-secret-456"} {
		if strings.Contains(out, s) {
			t.Errorf("--json shows the secret %s", s)
		}
	}
}

// An invalid configuration exits 2 with every error naming its key and
// line (or variable), in text and in JSON.
func TestConfigCheckInvalid(t *testing.T) {
	clearConfigEnv(t)
	t.Setenv("FLUSH_INTERVAL", "0s")
	f := writeConfigFile(t, "kafka:\n  topic: \"\"\nlog:\n  level: loud\n")
	code, _, errs := run(t, "config", "check", "--config", f)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	for _, want := range []string{"kafka.topic (line 2): empty"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q: %s", want, errs)
		}
	}
	f = writeConfigFile(t, "log:\n  level: loud\n")
	code, out, errs := run(t, "config", "check", "--config", f, "--json")
	if code != 2 {
		t.Errorf("--json: exit %d, want 2", code)
	}
	var res struct {
		Valid  bool
		Errors []string
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	joined := strings.Join(res.Errors, "\n")
	if res.Valid || !strings.Contains(joined, `log.level (line 2): unknown "loud"`) ||
		!strings.Contains(joined, "flush.interval ($FLUSH_INTERVAL) must be > 0") || !strings.Contains(errs, "log.level") {
		t.Errorf("--json: %+v, stderr %s", res, errs)
	}
	if code, _, _ := run(t, "config", "check", "--config", filepath.Join(t.TempDir(), "missing.yaml")); code != 2 {
		t.Errorf("missing file: exit %d, want 2", code)
	}
}

// The embedded NATS server with a user and no password would admit anyone
// sending that user (issue 29, item 7): config check exits 2 naming the
// key.
func TestConfigCheckRefusesEmptyNATSPassword(t *testing.T) {
	clearConfigEnv(t)
	f := writeConfigFile(t, "nats:\n  user: admin\n  listen: 0.0.0.0:4222\n")
	code, _, errs := run(t, "config", "check", "--config", f)
	if code != 2 || !strings.Contains(errs, "nats.password: empty") {
		t.Errorf("exit %d, stderr %s; want 2 naming nats.password", code, errs)
	}
}

// --probe asks Kafka, the store and NATS: all answering, exit 0; a broker
// that refuses connections fails its probe within the timeout, exit 1,
// naming the reason, while the others still answer.
func TestConfigCheckProbe(t *testing.T) {
	clearConfigEnv(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "sensor-events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	dir := t.TempDir()
	good := "table: {uri: " + filepath.Join(dir, "t") + "}\nnats: {listen: " + freeAddr(t) + ", store_dir: " + filepath.Join(dir, "nats") + "}\n"
	f := writeConfigFile(t, good+"kafka: {brokers: ["+cluster.ListenAddrs()[0]+"]}\n")
	code, out, errs := run(t, "config", "check", "--config", f, "--probe", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	var res struct {
		Probes []struct {
			Name, Detail, Error string
			OK                  bool
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Probes) != 3 {
		t.Fatalf("probes: %+v", res.Probes)
	}
	for _, p := range res.Probes {
		if !p.OK {
			t.Errorf("probe %s failed: %s", p.Name, p.Error)
		}
	}
	if !strings.Contains(res.Probes[0].Detail, "3 partitions") {
		t.Errorf("kafka probe: %+v", res.Probes[0])
	}
	// The probe object is deleted (directories may stay).
	_ = filepath.WalkDir(filepath.Join(dir, "t"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("probe left %s", path)
		}
		return nil
	})

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	f = writeConfigFile(t, good+"kafka: {brokers: ["+closed+"]}\n")
	start := time.Now()
	code, out, errs = run(t, "config", "check", "--config", f, "--probe", "--timeout", "2s")
	if code != 1 {
		t.Errorf("closed broker: exit %d, want 1\n%s%s", code, out, errs)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("probe took %s with --timeout 2s", took)
	}
	if !strings.Contains(out, "kafka  FAILED") || !strings.Contains(out, "connection refused") || !strings.Contains(out, "store  ok") ||
		!strings.Contains(errs, "the kafka probe failed") {
		t.Errorf("closed broker:\n%s%s", out, errs)
	}
}

// With a table reading the schema registry, --probe asks it for the
// subject's latest schema and checks the columns against it: the
// subject's id and column count when all is well; refused credentials and
// a column the schema lacks fail the probe, named.
func TestConfigCheckProbeRegistry(t *testing.T) {
	clearConfigEnv(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "readings"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	fake := srfake.New(srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("deltaflow:pw"))))
	defer fake.Close()
	if _, _, err := fake.RegisterSchema("readings-value", sr.Schema{Schema: `{"type": "record", "name": "Reading", "fields": [
		{"name": "kind", "type": "string"}, {"name": "power", "type": ["null", "double"]}]}`}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	base := "kafka: {brokers: [" + cluster.ListenAddrs()[0] + "], topic: readings}\nnats: {listen: " + freeAddr(t) +
		", store_dir: " + filepath.Join(dir, "nats") + "}\nschema_registry: {url: " + fake.URL() + ", user: deltaflow}\n"
	probe := func(table, password string) (int, string, string) {
		t.Setenv("DELTAFLOW_SCHEMA_REGISTRY_PASSWORD", password)
		f := writeConfigFile(t, base+"table: {uri: "+filepath.Join(dir, "t")+", format: avro"+table+"}\n")
		return run(t, "config", "check", "--config", f, "--probe")
	}
	code, out, errs := probe("", "pw")
	if code != 0 || !strings.Contains(out, "schema_registry  ok") || !strings.Contains(out, "subject readings-value: schema id 1, 2 columns") {
		t.Errorf("exit %d:\n%s%s", code, out, errs)
	}
	code, out, errs = probe("", "wrong")
	if code != 1 || !strings.Contains(out, "schema_registry  FAILED") || !strings.Contains(out, "DELTAFLOW_SCHEMA_REGISTRY_PASSWORD") ||
		!strings.Contains(errs, "the schema_registry probe failed") || strings.Contains(out+errs, "wrong") {
		t.Errorf("wrong password: exit %d:\n%s%s", code, out, errs)
	}
	code, out, errs = probe(", columns: [{name: watts, type: double, source: watts}]", "pw")
	if code != 1 || !strings.Contains(out, "table.columns[0].source: watts: no field") {
		t.Errorf("a column the schema lacks: exit %d:\n%s%s", code, out, errs)
	}
	// The subject's schemas are Avro; a json_schema table of it is refused.
	f := writeConfigFile(t, base+"table: {uri: "+filepath.Join(dir, "t")+", format: json_schema}\n")
	code, out, errs = run(t, "config", "check", "--config", f, "--probe")
	if code != 1 || !strings.Contains(out, "subject readings-value holds avro schemas; table.format is json_schema") {
		t.Errorf("a json_schema table of an Avro subject: exit %d:\n%s%s", code, out, errs)
	}
}

// --probe against the real servers (scripts/servers.sh): Kafka knows the
// topic, MinIO takes and deletes the probe object, NATS has JetStream;
// a wrong secret fails the store's probe with MinIO's reason and never
// shows the secret.
func TestConfigCheckProbeServers(t *testing.T) {
	clearConfigEnv(t)
	s3, brokers, natsURL := testenv.MinIO(t), testenv.Kafka(t), testenv.NATS(t)
	topic := testenv.BucketName(t.Name())
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(t.Context(), 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	uri := "s3://" + s3.Bucket + "/sensor_events"
	yaml := "table: {uri: " + uri + "}\nstorage: {endpoint: " + s3.Endpoint + ", access_key: " + s3.AccessKey + "}\n" +
		"kafka: {brokers: " + strings.Join(brokers, ",") + ", topic: " + topic + "}\nnats: {url: " + natsURL + "}\n"
	f := writeConfigFile(t, yaml)
	t.Setenv("MINIO_SECRET_KEY", string(s3.SecretKey))
	code, out, errs := run(t, "config", "check", "--config", f, "--probe")
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out, errs)
	}
	for _, want := range []string{"kafka  ok", "2 partitions", "store  ok", "put-if-absent honoured", "nats   ok", "JetStream enabled"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	store, err := storage.Open(t.Context(), uri, storage.Options{Endpoint: s3.Endpoint, AccessKey: s3.AccessKey, SecretKey: string(s3.SecretKey)})
	if err != nil {
		t.Fatal(err)
	}
	if left, err := store.List(t.Context(), "", ""); err != nil || len(left) > 0 {
		t.Errorf("the probe left %v (%v)", left, err)
	}

	t.Setenv("MINIO_SECRET_KEY", "wrong-secret-77")
	code, out, errs = run(t, "config", "check", "--config", f, "--probe")
	if code != 1 || !strings.Contains(out, "store  FAILED") || !strings.Contains(errs, "the store probe failed") ||
		strings.Contains(out+errs, "wrong-secret-77") {
		t.Errorf("wrong secret: exit %d:\n%s%s", code, out, errs)
	}
}
