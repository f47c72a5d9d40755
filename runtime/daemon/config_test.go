package daemon

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/deltaflow/deltaflow/actors"
	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/mapping"
)

func noEnv(string) string { return "" }

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// credsEnv is an environment with m and the S3 credentials run needs
// (checkCredentials) from the AWS variables, which override no key of the
// file.
func credsEnv(m map[string]string) func(string) string {
	env := map[string]string{"AWS_ENDPOINT_URL": "http://s3.test:9000", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test-secret"}
	maps.Copy(env, m)
	return envMap(env)
}

func TestGoodConfigs(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.good.yaml")
	if len(files) == 0 {
		t.Fatal("no good configs")
	}
	for _, f := range files {
		if _, err := Load(f, credsEnv(nil)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestBadConfigs(t *testing.T) {
	cases := []struct {
		file   string
		errMsg string
	}{
		{"unknown_key.bad.yaml", "kafka.borkers (line 2): unknown key; did you mean kafka.brokers?"},
		{"unknown_section.bad.yaml", "sink (line 1): unknown key"},
		{"flush_zero.bad.yaml", "flush.interval (line 2) must be > 0, got 0s"},
		{"flush_negative.bad.yaml", "flush.interval (line 2) must be > 0, got -5s"},
		{"bad_duration.bad.yaml", `flush.interval (line 2): "soon" is not a duration (such as 90s, 5m, 1h30m)`},
		{"bad_size.bad.yaml", `flush.max_bytes (line 2): invalid size "32 parsecs"`},
		{"ftp.bad.yaml", `table.uri (line 2): unsupported scheme "ftp"`},
		{"sasl.bad.yaml", `kafka.sasl.mechanism (line 2): unknown "KERBEROS"`},
		{"nats_creds.bad.yaml", "nats.creds_file (line 2): requires nats.url"},
		// A blank credential would let anyone in (issue 29, item 7).
		{"nats_empty_password.bad.yaml", `nats.password: empty: the embedded server would admit anyone sending nats.user "admin"`},
		{"nats_blank_token.bad.yaml", "nats.token (line 2): is blank"},
		{"max_pause.bad.yaml", "control.max_pause (line 2) must be > 0 and at most 24h0m0s, got 720h0m0s"},
		{"column_type.bad.yaml", `table.columns[0].type (line 3): unknown type "varchar"`},
		{"partition_unknown.bad.yaml", `table.partition_columns[0] (line 2): unknown column "device_kind"`},
		{"compression.bad.yaml", `table.compression (line 2): unknown "lz4" (want snappy or zstd)`},
		{"log_level.bad.yaml", `log.level (line 2): unknown "loud"`},
		{"http_listen.bad.yaml", `http.listen (line 2): "8080" is not host:port`},
		{"budget.bad.yaml", "backpressure.memory_budget (line 2) must be > 0"},
		{"budget.bad.yaml", "backpressure.max_unfinished_epochs (line 3) must be >= 1, got 0"},
		{"vacuum.bad.yaml", "maintenance.vacuum_retain (line 2) must be > 0"},
		{"watchdog.bad.yaml", "maintenance.optimize_min_files (line 2) must be >= 2, got 1"},
		{"watchdog.bad.yaml", "watchdog.stall_intervals (line 4) must be >= 0 (0 disables), got -1"},
		{"watchdog.bad.yaml", "watchdog.restart_backoff_max (line 6) must be >= watchdog.restart_backoff (10m0s), got 1m0s"},
		{"checkpoint.bad.yaml", "table.checkpoint_interval (line 2) must be > 0, got 0"},
		{"not_yaml.bad.yaml", "yaml:"},
		{"start_offsets.bad.yaml", "kafka.start_offsets (line 2): partition 1: offset -5"},
		{"start_both.bad.yaml", "kafka.start_timestamp (line 3): set together with start_offsets"},
		{"start_timestamp.bad.yaml", `kafka.start_timestamp (line 2): "yesterday": want RFC 3339`},
		{"instance_id_placeholder.bad.yaml", `kafka.instance_id (line 2): unknown placeholder in "deltaflow-{host}" (the one placeholder is {hostname})`},
		{"instance_id_chars.bad.yaml", `kafka.instance_id (line 2): "deltaflow pi 1" has ' '`},
		// Empty values that cannot work are refused where they are written,
		// not met later (brokers: [] dialled 127.0.0.1:9092; topic: ""
		// failed once NATS and HTTP were up).
		// Routes: mixing the forms, uniqueness, what feeds a table, and
		// every key of an entry named with its path and line.
		{"routes_both.bad.yaml", "table (line 1) and tables (line 3) together"},
		{"routes_topic.bad.yaml", "kafka.topic (line 2) with tables (line 3): each entry names its topics"},
		{"routes_unique.bad.yaml", `tables[1].name (line 5): "weather" is also tables[0]'s name`},
		{"routes_unique.bad.yaml", `tables[1].uri (line 6): "./data/weather" is tables[0]'s table ("./data/weather")`},
		// One table spelled two ways, two names one DLQ stream.
		{"routes_same.bad.yaml", `tables[1].uri (line 6): "data/weather/" is tables[0]'s table ("./data/weather")`},
		{"routes_same.bad.yaml", `tables[3].uri (line 12): "s3a://lake/alerts/" is tables[2]'s table ("s3://lake/alerts")`},
		{"routes_same.bad.yaml", `tables[1].name (line 5): "Weather" and tables[0]'s "weather" share the DLQ stream DELTAFLOW_DLQ_WEATHER`},
		{"routes_feed.bad.yaml", "tables[0].topics: none, and no topic_regex"},
		{"routes_feed.bad.yaml", "tables[1].topic_regex (line 6): error parsing regexp"},
		{"routes_where.bad.yaml", `tables[0].where (line 5): filter: at position 1, watts > 100: no column "watts"`},
		{"routes_keys.bad.yaml", "tables[1].wher (line 8): unknown key; did you mean tables[1].where?"},
		{"routes_values.bad.yaml", `tables[1].columns[0].type (line 9): unknown type "varchar"`},
		{"routes_values.bad.yaml", "tables[1].topics[1] (line 7): empty topic name"},
		{"routes_values.bad.yaml", "tables[1].flush.interval (line 11) must be > 0, got 0s"},
		{"upsert_sequence.bad.yaml", `tables[0].sequence_by (line 8): column "name" is string: a sequence is an integer, long, date or timestamp`},
		{"upsert_sequence.bad.yaml", "tables[0].delete_retention (line 9) must be > 0, got 0s"},
		{"upsert_sequence.bad.yaml", "tables[1].sequence_by (line 17): only a write_mode: upsert table orders the changes of a key"},
		{"upsert_sequence.bad.yaml", `tables[2].sequence_by (line 26): "id" is a key column`},
		// Struct, array and map columns are no partition, key, sequence or
		// filter operand; a type that does not parse says where.
		{"nested_columns.bad.yaml", `tables[0].partition_columns[0] (line 5): column "loc" is struct; partition columns must be`},
		{"nested_columns.bad.yaml", `tables[1].key_columns (line 14): key column "tags" is array: a key column is a string, integer, long or decimal`},
		{"nested_columns.bad.yaml", `tables[2].sequence_by (line 25): column "loc" is struct: a sequence is an integer, long, date or timestamp`},
		{"nested_columns.bad.yaml", `tables[3].delete_when (line 35): filter: at position 1, tags = 'x': column tags is array: nested and variant columns can only be compared with null`},
		{"nested_columns.bad.yaml", `tables[4].where (line 43): filter: at position 1, attrs > 1: column attrs is map: nested and variant columns can only be compared with null`},
		{"nested_columns.bad.yaml", `tables[5].columns[1].type (line 53): "struct<lat: double lon: double>": at character 20: expected ',' or '>' after a struct field, got 'l'`},
		{"unrouted.bad.yaml", `unrouted (line 1): unknown "drop" (want skip or dlq)`},
		{"brokers_empty.bad.yaml", "kafka.brokers (line 2): empty; leave the key out for the default ([127.0.0.1:9092])"},
		{"topic_empty.bad.yaml", "kafka.topic (line 2): empty; leave the key out for the default (sensor-events)"},
		{"level_null.bad.yaml", "log.level (line 2): empty; leave the key out for the default (info)"},
		// The nats section's defaults are the bridge's (they were no default
		// to the walker, so an empty value passed).
		{"nats_empty.bad.yaml", "nats.kv_bucket (line 2): empty; leave the key out for the default (deltaflow_offsets)"},
		{"nats_empty.bad.yaml", "nats.store_dir (line 3): empty; leave the key out for the default (nats next to a local table (./data/nats), else $TMPDIR/deltaflow-nats)"},
		// Decode errors name the key and line in the user's terms, not yaml's.
		{"brokers_mapping.bad.yaml", "kafka.brokers (line 3): a mapping is not a list"},
		{"duration_number.bad.yaml", `flush.interval (line 2): "60" is not a duration (such as 90s, 5m, 1h30m)`},
		{"row_group_rows.bad.yaml", `flush.row_group_rows (line 2): "many" is not an integer`},
		{"log_cleanup.bad.yaml", `maintenance.log_cleanup (line 2): "sometimes" is not true or false`},
		{"section_scalar.bad.yaml", `flush (line 1): "60s" is not a section of keys`},
		{"several.bad.yaml", `flush.interval (line 3): "often" is not a duration`},
		{"several.bad.yaml", `flush.max_bytes (line 4): invalid size "lots"`},
		{"several.bad.yaml", "kafka.topic (line 6): empty"},
		{"several.bad.yaml", `kafka.fetch_max_bytes (line 7): "99999999999" is out of range for an integer`},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		seen[c.file] = true
		_, err := Load(filepath.Join("testdata", c.file), noEnv)
		if err == nil {
			t.Errorf("%s: loaded without error, want %q", c.file, c.errMsg)
			continue
		}
		if !strings.Contains(err.Error(), c.errMsg) {
			t.Errorf("%s: error %q lacks %q", c.file, err, c.errMsg)
		}
	}
	// Every bad file is in the table.
	files, _ := filepath.Glob("testdata/*.bad.yaml")
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("%s has no case in TestBadConfigs", f)
		}
	}
}

// TestConfigErrorsNameKeys: no decode error shows yaml's or Go's terms
// (!!str, time.Duration, []string, unmarshal).
func TestConfigErrorsNameKeys(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.bad.yaml")
	for _, f := range files {
		_, err := Load(f, noEnv)
		if err == nil {
			continue
		}
		for _, jargon := range []string{"!!", "unmarshal", "time.Duration", "[]string", "Config."} {
			if strings.Contains(err.Error(), jargon) {
				t.Errorf("%s: error %q shows %q", f, err, jargon)
			}
		}
	}
}

// A scalar where a list of scalars is wanted is a list of one, as
// KAFKA_BOOTSTRAP has always been; `partition_columns: []` is an
// unpartitioned table, not "empty".
func TestScalarAsList(t *testing.T) {
	cfg, err := Load("testdata/brokers_scalar.good.yaml", noEnv)
	if err != nil || !slices.Equal(cfg.Kafka.Brokers, []string{"127.0.0.1:19092"}) {
		t.Errorf("brokers scalar: %v, %v", cfg, err)
	}
	cfg, err = Load("testdata/unpartitioned.good.yaml", noEnv)
	if err != nil || len(cfg.Table.PartitionColumns) != 0 {
		t.Errorf("unpartitioned: %v, %v", cfg, err)
	}
	if _, err := Load("", envMap(map[string]string{"KAFKA_BOOTSTRAP": " , "})); err == nil ||
		!strings.Contains(err.Error(), "kafka.brokers ($KAFKA_BOOTSTRAP): empty") {
		t.Errorf("KAFKA_BOOTSTRAP=' , ': %v", err)
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := Load("", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Table.URI != "./data/sensor_events" || cfg.Table.Name != "sensor_events" || cfg.Table.AppID != "deltaflow" ||
		!slices.Equal(cfg.Table.PartitionColumns, []string{"device_type", "event_date"}) || len(cfg.Table.Columns) != 14 ||
		cfg.Table.CheckpointInterval != 10 || cfg.Table.Compression != "snappy" {
		t.Errorf("table defaults: %+v", cfg.Table)
	}
	if cfg.Flush.Interval != time.Minute || cfg.Flush.MaxBytes != 8<<20 || cfg.Backpressure.MemoryBudget != 16<<20 ||
		cfg.Backpressure.MaxUnfinishedEpochs != 2 || cfg.HTTP.Listen != "127.0.0.1:8080" || cfg.Maintenance.VacuumRetain != 720*time.Hour {
		t.Errorf("defaults: %v", cfg)
	}
	if cfg.NATS.StoreDir != filepath.Join("data", "nats") {
		t.Errorf("nats.store_dir %q, want data/nats next to the table", cfg.NATS.StoreDir)
	}
	if cfg.Kafka.Topic != "sensor-events" || !slices.Equal(cfg.Kafka.Brokers, []string{"127.0.0.1:9092"}) {
		t.Errorf("kafka defaults: %v", cfg.Kafka)
	}

	// An explicit "" disables the HTTP server; a key left out keeps its default.
	cfg, err = Load("testdata/http_disabled.good.yaml", noEnv)
	if err != nil || cfg.HTTP.Listen != "" || cfg.Flush.Interval != time.Minute {
		t.Errorf("http_disabled: %v %q %s", err, cfg.HTTP.Listen, cfg.Flush.Interval)
	}

	cfg, err = Load("testdata/full.good.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Table.MaxRecordBytes != 2<<20 || cfg.Flush.MaxBytes != 64_000_000 || cfg.Backpressure.MemoryBudget != 96<<20 ||
		cfg.Maintenance.OptimizeTargetSize != 256<<20 || len(cfg.Table.Columns) != 6 || cfg.NATS.StoreDir != "" {
		t.Errorf("full: %v", cfg)
	}
	if m, w := cfg.Maintenance, cfg.Watchdog; m.OptimizeMinFiles != 10 || m.LogCleanup || w.StallIntervals != 5 ||
		w.Grace != 30*time.Second || w.RestartBackoff != 2*time.Minute || w.RestartBackoffMax != time.Hour {
		t.Errorf("full: maintenance %+v, watchdog %+v", m, w)
	}
}

// TestEngineConfig: every engine setting comes from its key, the table's
// properties shape the data files, and the daemon's defaults are the
// engine's.
func TestEngineConfig(t *testing.T) {
	cfg, err := Load("testdata/full.good.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cfg.EngineConfig(map[string]string{"delta.dataSkippingNumIndexedCols": "5"})
	if err != nil {
		t.Fatal(err)
	}
	want := actors.Config{App: "pi-1", StartOffset: "latest", OnDataLoss: "skip", Unrouted: "skip",
		FlushInterval: 30 * time.Second, FlushMaxBytes: 64_000_000,
		MemoryBudget: 96 << 20, MaxUnfinishedEpochs: 3,
		Writer: delta.WriterOptions{Compression: delta.Zstd, RowGroupRows: 8192, NumIndexedCols: 5},
		Maintenance: actors.Maintenance{OptimizeEvery: 24 * time.Hour, OptimizeTargetSize: 256 << 20, OptimizeMinFiles: 10,
			OptimizeOpenTargetSize: actors.DefaultOpenTargetSize, VacuumEvery: 168 * time.Hour, VacuumRetain: 336 * time.Hour}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("engine config\n got %+v\nwant %+v", got, want)
	}
	if _, err := cfg.EngineConfig(map[string]string{"delta.dataSkippingNumIndexedCols": "many"}); err == nil ||
		!strings.Contains(err.Error(), "table configuration") {
		t.Errorf("bad table property: %v", err)
	}

	def := DefaultConfig()
	got, err = def.EngineConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	engine := actors.DefaultConfig()
	if got.App != engine.App || got.FlushInterval != engine.FlushInterval || got.FlushMaxBytes != engine.FlushMaxBytes ||
		got.MemoryBudget != engine.MemoryBudget || got.MaxUnfinishedEpochs != engine.MaxUnfinishedEpochs ||
		got.Writer.RowGroupRows != engine.Writer.RowGroupRows {
		t.Errorf("daemon defaults %+v differ from the engine's %+v", got, engine)
	}
}

func TestEnvOverrides(t *testing.T) {
	env := envMap(map[string]string{
		"KAFKA_BOOTSTRAP":       "k1:9092, k2:9092",
		"KAFKA_TOPIC":           "other-topic",
		"KAFKA_GROUP":           "g2",
		"MINIO_ENDPOINT":        "minio2:9000",
		"MINIO_ACCESS_KEY":      "ak",
		"MINIO_SECRET_KEY":      "env-secret-000",
		"NATS_URL":              "nats://n2:4222",
		"DELTAFLOW_TABLE_URI":   "s3://lake2/t",
		"DELTAFLOW_LOG_LEVEL":   "warn",
		"DELTAFLOW_HTTP_LISTEN": "0.0.0.0:9090",
		"FLUSH_INTERVAL":        "15s",
		SingleWriterEnv:         "true",
	})
	cfg, err := Load("testdata/full.good.yaml", env)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{cfg.Kafka.Brokers, cfg.Kafka.Topic, cfg.Kafka.Group, cfg.Storage.Endpoint, cfg.Storage.AccessKey,
		string(cfg.Storage.SecretKey), cfg.NATS.URL, cfg.Table.URI, cfg.Log.Level, cfg.HTTP.Listen, cfg.Flush.Interval,
		cfg.Storage.SingleWriter}
	want := []any{[]string{"k1:9092", "k2:9092"}, "other-topic", "g2", "minio2:9000", "ak",
		"env-secret-000", "nats://n2:4222", "s3://lake2/t", "warn", "0.0.0.0:9090", 15 * time.Second, true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("overrides:\n got %v\nwant %v", got, want)
	}

	// The table URI from the environment decides where embedded NATS stores.
	cfg, err = Load("", envMap(map[string]string{"DELTAFLOW_TABLE_URI": "/srv/lake/events"}))
	if err != nil || cfg.NATS.StoreDir != "/srv/lake/nats" {
		t.Errorf("store dir for env table: %v %q", err, cfg.NATS.StoreDir)
	}
	// Overrides are validated like the file.
	if _, err := Load("", envMap(map[string]string{"FLUSH_INTERVAL": "0s"})); err == nil || !strings.Contains(err.Error(), "flush.interval ($FLUSH_INTERVAL) must be > 0") {
		t.Errorf("FLUSH_INTERVAL=0s: %v", err)
	}
	if _, err := Load("", envMap(map[string]string{"FLUSH_INTERVAL": "often"})); err == nil || !strings.Contains(err.Error(), "FLUSH_INTERVAL") {
		t.Errorf("FLUSH_INTERVAL=often: %v", err)
	}
	if _, err := Load("", envMap(map[string]string{SingleWriterEnv: "maybe"})); err == nil || !strings.Contains(err.Error(), SingleWriterEnv) {
		t.Errorf("%s=maybe: %v", SingleWriterEnv, err)
	}
}

func TestSecretsRedacted(t *testing.T) {
	secrets := []string{"minio-secret-123", "kafka-secret-456", "nats-secret-789", "url-secret-000"}
	cfg, err := Load("testdata/full.good.yaml", envMap(map[string]string{"NATS_URL": "nats://u:url-secret-000@nats:4222"}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.Token = "nats-secret-789"
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "config", cfg)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "config", *cfg)
	outs := map[string]string{
		"String": cfg.String(), "%v": fmt.Sprintf("%v", cfg), "%+v": fmt.Sprintf("%+v", *cfg),
		"%#v": fmt.Sprintf("%#v", *cfg), "slog": logs.String(),
	}
	if y, err := yaml.Marshal(cfg.Storage); err == nil {
		outs["yaml storage"] = string(y)
	}
	for how, out := range outs {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s reveals %q:\n%s", how, s, out)
			}
		}
		if !strings.Contains(out, "REDACTED") {
			t.Errorf("%s shows no REDACTED marker:\n%s", how, out)
		}
	}
}

// TestStartupLogHasEveryKey: the start-up log and String show every key
// of the configuration (the watchdog section and several maintenance keys
// were missing), with the effective values, not zeros, for the defaults
// the kafka and nats sections fill in themselves.
func TestStartupLogHasEveryKey(t *testing.T) {
	cfg, err := Load("", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("deltaflow starting", "config", cfg)
	log, str := logs.String(), cfg.String()
	for _, k := range configKeys() {
		if strings.Contains(k.key, "[]") || k.key == "kafka.start_offsets" || k.key == "tables" {
			continue // inside a list; a map (its entries are keys); the form the file does not use
		}
		if !strings.Contains(log, " config."+k.key+"=") {
			t.Errorf("start-up log lacks %s:\n%s", k.key, log)
		}
		top, rest, section := strings.Cut(k.key, ".")
		if !section {
			if !strings.Contains(str, top+"=") {
				t.Errorf("String lacks %s: %s", k.key, str)
			}
			continue
		}
		line := str[strings.Index(str, top+"{"):]
		line, _, _ = strings.Cut(line, "\n")
		if !strings.Contains(line, " "+rest+"=") && !strings.Contains(line, "{"+rest+"=") {
			t.Errorf("String lacks %s: %s", k.key, line)
		}
	}
	for _, want := range []string{"config.nats.kv_bucket=deltaflow_offsets", "config.nats.dlq_max_bytes=256MiB",
		"config.nats.dlq_stream=DELTAFLOW_DLQ_SENSOR_EVENTS", "config.nats.publish_timeout=5s", "config.watchdog.grace=1m0s",
		"config.maintenance.optimize_min_files=2", "config.kafka.fetch_max_wait=500ms", "config.flush.row_group_rows=16384"} {
		if !strings.Contains(log, want) {
			t.Errorf("start-up log lacks %s:\n%s", want, log)
		}
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"32MiB": 32 << 20, "128MB": 128e6, "1048576": 1 << 20, "1 GiB": 1 << 30, "4kb": 4000, "7B": 7} {
		if got, err := ParseByteSize(in); err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "1.5MiB", "3 TB", "99999999999999GiB"} {
		if _, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) succeeded", in)
		}
	}
	if s := ByteSize(48 << 20).String(); s != "48MiB" {
		t.Errorf("String = %s", s)
	}
}

// kafka.instance_id's {hostname} takes the host's name, so replicas sharing
// one file get distinct static member ids; a name Kafka would refuse, or no
// name, stops the start naming the key, and a literal id is kept as is.
func TestInstanceIDHostname(t *testing.T) {
	defer func(h func() (string, error)) { hostname = h }(hostname)
	load := func(name string, err error) (*Config, error) {
		hostname = func() (string, error) { return name, err }
		return Load("testdata/instance_id_hostname.good.yaml", noEnv)
	}
	for _, h := range []string{"3f2a9c1d7b4e", "deltaflow-2", "pi.local"} {
		cfg, err := load(h, nil)
		if err != nil || cfg.Kafka.InstanceID != "deltaflow-"+h {
			t.Errorf("hostname %q: instance_id %v, %v; want deltaflow-%s", h, cfg, err, h)
		}
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"", errors.New("uname failed"), "kafka.instance_id (line 3): {hostname}: uname failed"},
		{"", nil, "kafka.instance_id (line 3): {hostname}: the host has no name"},
		{"pi 4", nil, `kafka.instance_id (line 3): "deltaflow-pi 4" has ' '`},
		{strings.Repeat("h", 240), nil, "is longer than 249 characters"},
	} {
		if _, err := load(c.name, c.err); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("hostname %q, %v: error %v, want %q", c.name, c.err, err, c.want)
		}
	}
	hostname = func() (string, error) { t.Error("hostname asked for a literal instance_id"); return "", nil }
	cfg, err := Load("", envMap(nil))
	if err != nil || cfg.Kafka.InstanceID != "" {
		t.Errorf("no instance_id: %q, %v", cfg.Kafka.InstanceID, err)
	}
	cfg, err = Load("../../configs/seed.yaml", credsEnv(map[string]string{"NATS_PASSWORD": "pw"}))
	if err != nil || cfg.Kafka.InstanceID != "deltaflow-pi-1" {
		t.Errorf("literal instance_id: %v, %v", cfg, err)
	}
}

// The Pi's configuration with none of the credentials its deployment gives
// in the environment is invalid, naming each and its variables (issue 30:
// config check said valid, and run failed at the first connection).
func TestMissingCredentials(t *testing.T) {
	_, err := Load("../../configs/deltaflow.yaml", noEnv)
	for _, want := range []string{"storage (line 11): table s3://lake/sensor_events: s3 access key not set", "$MINIO_ACCESS_KEY",
		`nats.password: empty: nats.user "deltaflow"`, "$NATS_PASSWORD"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v; want it to say %q", err, want)
		}
	}
	_, err = Load("../../configs/deltaflow.yaml", envMap(map[string]string{"MINIO_ACCESS_KEY": "a", "NATS_PASSWORD": "c"}))
	if err == nil || !strings.Contains(err.Error(), "s3 secret key not set") || strings.Contains(err.Error(), "nats.password") {
		t.Errorf("error %v; want only the secret key named", err)
	}
}

// TestShippedConfigs loads configs/*.yaml as the compose stack and a
// workstation use them.
func TestShippedConfigs(t *testing.T) {
	cfg, err := Load("../../configs/deltaflow.yaml", envMap(map[string]string{"MINIO_ACCESS_KEY": "a", "MINIO_SECRET_KEY": "b", "NATS_PASSWORD": "c"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Table.URI != "s3://lake/sensor_events" || cfg.Storage.Endpoint != "minio:9000" || cfg.Kafka.Brokers[0] != "kafka:9092" ||
		cfg.NATS.URL != "nats://nats:4222" || cfg.Flush.Interval != time.Minute || cfg.HTTP.Listen != "0.0.0.0:8080" {
		t.Errorf("deltaflow.yaml: %v", cfg)
	}
	cfg, err = Load("../../configs/local.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Table.URI != "./data/sensor_events" || cfg.NATS.URL != "" || cfg.NATS.StoreDir != filepath.Join("data", "nats") {
		t.Errorf("local.yaml: %v", cfg)
	}
}

// TestConfigDocCoversEveryKey checks keySpecs against the parser's keys:
// every key is specified and documented, no spec names a key Config lacks,
// and no two keys share a variable.
func TestConfigDocCoversEveryKey(t *testing.T) {
	keys := map[string]bool{}
	for _, k := range configKeys() {
		keys[k.key] = true
		if d, ok := spec(k.key); !ok || d.doc == "" {
			t.Errorf("key %s is not documented in keySpecs", k.key)
		}
	}
	envs := map[string]string{}
	for k, spec := range keySpecs {
		if !keys[k] {
			t.Errorf("keySpecs specifies %s, which Config does not have", k)
		}
		if other, ok := envs[spec.env]; ok && spec.env != "" {
			t.Errorf("%s overrides both %s and %s", spec.env, k, other)
		}
		envs[spec.env] = k
	}
}

func TestConfigDocIsFresh(t *testing.T) {
	committed, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(committed) != ConfigDoc() {
		t.Fatal("docs/configuration.md is stale: run `go generate ./runtime/daemon` and commit it")
	}
}

// TestStartPositions: the two ways of choosing start positions decode as
// written (a date counts as midnight UTC).
func TestStartPositions(t *testing.T) {
	cfg, err := Load("testdata/start_offsets.good.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int32]int64{0: 123, 1: 456}; !maps.Equal(cfg.Kafka.StartOffsets, want) {
		t.Errorf("start_offsets %v, want %v", cfg.Kafka.StartOffsets, want)
	}
	cfg, err = Load("testdata/start_date.good.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if at, err := cfg.Kafka.StartTime(); err != nil || !at.Equal(time.Date(2026, 6, 22, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("start_timestamp %v (%v), want 2026-06-22 00:00 UTC", at, err)
	}
}

// TestRoutes: the single form is one route, as the engine read it before
// there were routes; a tables list resolves each entry over the table
// section's defaults and the process-wide flush and maintenance (file or
// environment), which an entry's own keys override.
func TestRoutes(t *testing.T) {
	cfg, err := Load("testdata/full.good.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	single := cfg.Routes()
	if len(single) != 1 || !reflect.DeepEqual(single[0], Route{Table: cfg.Table, Topics: []string{cfg.Kafka.Topic},
		Flush: cfg.Flush, Maintenance: cfg.Maintenance}) {
		t.Errorf("the single form's routes %+v", single)
	}
	if v := cfg.TableView(single[0]); !reflect.DeepEqual(v, cfg) {
		t.Errorf("the single form's own view differs from it")
	}

	cfg, err = Load("testdata/routes.good.yaml", credsEnv(map[string]string{"FLUSH_INTERVAL": "7s"}))
	if err != nil {
		t.Fatal(err)
	}
	routes := cfg.Routes()
	if len(routes) != 3 {
		t.Fatalf("%d routes, want 3", len(routes))
	}
	plugs, doors, weather := routes[0], routes[1], routes[2]
	def := DefaultConfig()
	if plugs.Table.Name != "plugs" || plugs.Table.URI != "s3://lake/plugs" || plugs.Table.AppID != def.Table.AppID ||
		!reflect.DeepEqual(plugs.Table.Columns, def.Table.Columns) || plugs.Where != "device_type = 'smart_plug'" ||
		!slices.Equal(plugs.Topics, []string{"sensor-events"}) {
		t.Errorf("plugs %+v", plugs)
	}
	if plugs.Flush.Interval != 7*time.Second || doors.Flush.Interval != 5*time.Minute || doors.Flush.MaxBytes != def.Flush.MaxBytes {
		t.Errorf("flush intervals %s, %s (want the environment's 7s, and doors' own 5m)", plugs.Flush.Interval, doors.Flush.Interval)
	}
	if weather.TopicRegex != `^weather\.` || len(weather.Table.PartitionColumns) != 0 || len(weather.Table.Columns) != 3 ||
		weather.Maintenance.OptimizeEvery != 24*time.Hour || plugs.Maintenance.OptimizeEvery != 0 ||
		weather.Maintenance.VacuumRetain != def.Maintenance.VacuumRetain {
		t.Errorf("weather %+v", weather)
	}
	if cfg.Unrouted != UnroutedDLQ {
		t.Errorf("unrouted %q", cfg.Unrouted)
	}
	if r, err := cfg.Route("doors"); err != nil || r.Table.URI != "s3://lake/doors" {
		t.Errorf("Route(doors) = %+v, %v", r, err)
	}
	if _, err := cfg.Route("door"); err == nil || !strings.Contains(err.Error(), "tables: doors, plugs, weather") {
		t.Errorf("Route(door): %v; want the names listed", err)
	}
	if v := cfg.TableView(doors); v.Table.Name != "doors" || v.Kafka.Topic != "sensor-events" || v.Flush.Interval != 5*time.Minute || len(v.Tables) != 0 {
		t.Errorf("the doors view %+v", v)
	}
}

// TestREADMERoutesExample: the README's tables example is a valid
// configuration of the three tables it shows.
func TestREADMERoutesExample(t *testing.T) {
	cfg, err := Load(readmeExample(t, "### Several topics, several tables", nil), credsEnv(nil))
	if err != nil {
		t.Fatalf("the README's example: %v", err)
	}
	var names []string
	for _, r := range cfg.Routes() {
		names = append(names, r.Table.Name)
	}
	if !slices.Equal(names, []string{"plugs", "doors", "weather"}) || cfg.Unrouted != UnroutedDLQ {
		t.Errorf("the README's example has tables %v, unrouted %q", names, cfg.Unrouted)
	}
}

// TestREADMEAvroExample: the README's Avro example is valid with a schema
// of a field kind, and its columns are the schema's.
func TestREADMEAvroExample(t *testing.T) {
	fake := srfake.New(srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("deltaflow:pw"))))
	defer fake.Close()
	if _, _, err := fake.RegisterSchema("readings-value", sr.Schema{Schema: `{"type": "record", "name": "Reading", "fields": [
		{"name": "kind", "type": "string"}, {"name": "power", "type": ["null", "double"]}]}`}); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(readmeExample(t, "### Avro topics", strings.NewReplacer("http://registry:8081", fake.URL())),
		credsEnv(map[string]string{"DELTAFLOW_SCHEMA_REGISTRY_PASSWORD": "pw"}))
	if err != nil {
		t.Fatalf("the README's example: %v", err)
	}
	if err := cfg.resolveSchemas(t.Context(), nil, actors.NewHealth(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	m, err := mapping.New(cfg.Tables[0].mappingConfig("tables[0]", cfg.schemas), cfg.Tables[0].PartitionColumns)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Schema().Fields; len(got) != 2 || got[0].Name != "kind" || got[1].Name != "power" {
		t.Errorf("the README's Avro table has columns %v, want kind and power", got)
	}
}

// TestREADMEUpsertExample: the README's upsert example is a valid upsert
// table whose key is the record key's id.
func TestREADMEUpsertExample(t *testing.T) {
	cfg, err := Load(readmeExample(t, "### Upserts: the latest row per key", nil), credsEnv(map[string]string{"KAFKA_TOPIC": "accounts"}))
	if err != nil {
		t.Fatalf("the README's example: %v", err)
	}
	if cfg.Table.WriteMode != WriteUpsert || !slices.Equal(cfg.Table.KeyColumns, []string{"id"}) {
		t.Errorf("the README's upsert table: write_mode %q, key_columns %v", cfg.Table.WriteMode, cfg.Table.KeyColumns)
	}
	if _, err := mapping.New(cfg.MappingConfig(), cfg.Table.PartitionColumns); err != nil {
		t.Errorf("the README's upsert table does not map: %v", err)
	}
}

// TestREADMECDCExample: the README's Debezium example is a valid upsert
// table of change events, ordered by their LSN.
func TestREADMECDCExample(t *testing.T) {
	cfg, err := Load(readmeExample(t, "A database's change stream from Debezium", nil), credsEnv(nil))
	if err != nil {
		t.Fatalf("the README's example: %v", err)
	}
	r := cfg.Tables[0]
	if r.CDC != "debezium" || r.WriteMode != WriteUpsert || r.SequenceBy != "lsn" {
		t.Errorf("the README's CDC table: cdc %q, write_mode %q, sequence_by %q", r.CDC, r.WriteMode, r.SequenceBy)
	}
	if _, err := mapping.New(r.mappingConfig("tables[0]", nil), r.PartitionColumns); err != nil {
		t.Errorf("the README's CDC table does not map: %v", err)
	}
}

// TestCDCSequenceDefault: a Debezium upsert table is ordered by its column
// of the change's log position (PostgreSQL's lsn, MySQL's binlog position)
// unless sequence_by says otherwise; `""`
// keeps the Kafka offset's order, and without such a column (or with two)
// the offset orders too.
func TestCDCSequenceDefault(t *testing.T) {
	const table = `table:
  write_mode: upsert
  cdc: debezium
  key_columns: [id]
  partition_columns: []
  columns:
    - {name: id, type: long}
    - {name: seen, type: long, source: cdc.ts_ms}
`
	for _, tc := range []struct{ name, extra, want string }{
		{"position column", "    - {name: pos, type: long, source: cdc.source.lsn}\n", "pos"},
		{"binlog position column", "    - {name: pos, type: long, source: cdc.source.binlog_position}\n", "pos"},
		{"lsn and binlog position", "    - {name: pos, type: long, source: cdc.source.lsn}\n    - {name: pos2, type: long, source: cdc.source.binlog_position}\n", ""},
		{"given", "    - {name: pos, type: long, source: cdc.source.lsn}\n  sequence_by: seen\n", "seen"},
		{"offset asked for", "    - {name: pos, type: long, source: cdc.source.lsn}\n  sequence_by: \"\"\n", ""},
		{"no position column", "", ""},
		{"two position columns", "    - {name: pos, type: long, source: cdc.source.lsn}\n    - {name: pos2, type: long, source: cdc.source.lsn}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "deltaflow.yaml")
			if err := os.WriteFile(path, []byte(table+tc.extra), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path, credsEnv(nil))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Table.SequenceBy != tc.want {
				t.Errorf("sequence_by %q, want %q", cfg.Table.SequenceBy, tc.want)
			}
		})
	}
}

// readmeExample writes the first yaml block after the README's heading to
// a file, through replace when not nil, and returns its path.
func readmeExample(t *testing.T, heading string, replace *strings.Replacer) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), heading)
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatalf("the README has no yaml block under %q", heading)
	}
	if replace != nil {
		block = replace.Replace(block)
	}
	path := filepath.Join(t.TempDir(), "deltaflow.yaml")
	if err := os.WriteFile(path, []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSectionDefaultsAreThePackages: the reference's default of every kafka
// and nats key is the one its package fills in (kafka.DefaultConfig, the
// bridge's Effective), not a hand-written copy that could drift from it; a
// hand-written default stands only where the package has none (an optional
// key: —) or where it derives from the table (nats.store_dir: next to a
// local table, nats.dlq_stream: named after it).
func TestSectionDefaultsAreThePackages(t *testing.T) {
	pkg := reflect.ValueOf(Config{Kafka: kafka.DefaultConfig(), NATS: bridge.Config{}.Effective("")})
	derived := map[string]bool{"nats.store_dir": true, "nats.dlq_stream": true}
	for _, k := range configKeys() {
		top, _, _ := strings.Cut(k.key, ".")
		if (top != "kafka" && top != "nats") || derived[k.key] {
			continue
		}
		v := pkg
		for _, name := range strings.Split(k.key, ".") {
			v = v.FieldByIndex(yamlFields(v.Type())[name].Index)
		}
		got, s := docDefault(k), keySpecs[k.key]
		switch want := formatDefault(v); {
		case want != "" && s.def != "":
			t.Errorf("%s: a hand-written default (%q) stands for the package's (%s)", k.key, s.def, want)
		case want != "" && got != "`"+want+"`":
			t.Errorf("%s: the reference says %s, the package's default is %s", k.key, got, want)
		case want == "" && s.def == "" && got != "":
			t.Errorf("%s: the reference says %s, the package has no default", k.key, got)
		}
	}
	// The derived ones are what Load and the bridge make of the default table.
	cfg, err := Load("", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if n := cfg.Effective().NATS; n.StoreDir != filepath.Join("data", "nats") || n.DLQStream != bridge.DefaultDLQStream("sensor_events") {
		t.Errorf("derived nats defaults: store_dir %q, dlq_stream %q", n.StoreDir, n.DLQStream)
	}
}

// TestAvroTablesHaveNoSensorDefaults: a table of format avro that gives no
// columns or partition columns gets the schema's fields, unpartitioned, in
// the single form and in a tables list; one that gives them keeps them.
func TestAvroTablesHaveNoSensorDefaults(t *testing.T) {
	dir := t.TempDir()
	schema := filepath.Join(dir, "r.avsc")
	if err := os.WriteFile(schema, []byte(`{"type": "record", "name": "R", "fields": [{"name": "device_type", "type": "string"}, {"name": "n", "type": ["null", "long"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(doc string) string {
		path := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(doc, "SCHEMA", schema)), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cfg, err := Load(write("table:\n  format: avro\n  schema_file: SCHEMA\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Table.Columns != nil || len(cfg.Table.PartitionColumns) != 0 {
		t.Errorf("single form: columns %v, partition columns %v; want none of the Spark job's", cfg.Table.Columns, cfg.Table.PartitionColumns)
	}
	cfg, err = Load(write("tables:\n  - name: a\n    uri: data/a\n    topics: [a]\n    format: avro\n    schema_file: SCHEMA\n"+
		"  - name: b\n    uri: data/b\n    topics: [b]\n    format: avro\n    schema_file: SCHEMA\n    partition_columns: [device_type]\n"+
		"    columns: [{name: device_type, type: string}, {name: n, type: long}]\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	a, b := cfg.Tables[0], cfg.Tables[1]
	if a.Columns != nil || len(a.PartitionColumns) != 0 {
		t.Errorf("tables[0]: columns %v, partition columns %v; want none", a.Columns, a.PartitionColumns)
	}
	if len(b.Columns) != 2 || !slices.Equal(b.PartitionColumns, []string{"device_type"}) {
		t.Errorf("tables[1]: columns %v, partition columns %v; want its own", b.Columns, b.PartitionColumns)
	}
}

// An unknown key is told the key it most likely misspells, if one is near
// (issue 30: kafka.broker got no hint).
func TestUnknownKeySuggestion(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"kafka:\n  broker: k:9092\n", "kafka.broker (line 2): unknown key; did you mean kafka.brokers?"},
		{"tabel:\n  uri: ./t\n", "tabel (line 1): unknown key; did you mean table?"},
		{"flush:\n  intervall: 1s\n", "flush.intervall (line 2): unknown key; did you mean flush.interval?"},
		{"sink:\n  x: 1\n", "sink (line 1): unknown key"},
	} {
		f := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(f, []byte(c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(f, noEnv)
		if err == nil || !strings.Contains(err.Error(), c.want) || (!strings.Contains(c.want, "mean") && strings.Contains(err.Error(), "mean")) {
			t.Errorf("%q: %v; want %q", c.yaml, err, c.want)
		}
	}
}

// A file's errors are reported in one run, each with its line: a key the
// walk refuses keeps its default and the rest is checked (issue 30: a bad
// http.listen appeared only once the others were fixed, and an empty
// column name had no line); columns given without partition columns are
// told that the default partition columns need them.
func TestEveryErrorInOneRun(t *testing.T) {
	f := filepath.Join(t.TempDir(), "c.yaml")
	yaml := "table:\n  uri: ./t\n  columns:\n    - name: device_id\n      type: string\n    - name: \"\"\n      type: string\n" +
		"http:\n  listen: bad\nkafka:\n  broker: x\n  fetch_max_bytes: lots\n"
	if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(f, noEnv)
	for _, want := range []string{"kafka.broker (line 11): unknown key", `kafka.fetch_max_bytes (line 12): "lots" is not an integer`,
		"table.columns[1].name (line 6): empty column name", `http.listen (line 9): "bad" is not host:port`,
		"table.columns (line 3): replaces the default columns"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nlacks %q", err, want)
		}
	}
}

// The effective configuration says each column's nullability, not null
// (issue 30: `nullable: null` for every column of config check).
func TestEffectiveColumnsSayNullable(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Table.Columns[1].Nullable = new(false)
	n, err := cfg.EffectiveNode()
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if strings.Contains(s, "nullable: null") || strings.Count(s, "nullable: true") != len(cfg.Table.Columns)-1 ||
		strings.Count(s, "nullable: false") != 1 {
		t.Errorf("effective configuration:\n%s", s)
	}
	if cfg.Table.Columns[0].Nullable != nil {
		t.Error("Effective changed the configuration's own columns")
	}
}

// A YAML syntax error names the line at fault (issue 30: a key indented
// one space short was reported on the line before it), scanner errors as
// parser errors.
func TestYAMLSyntaxErrorLine(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"table:\n  uri: ./t\n kafka:\n  brokers: [a]\n", "yaml: line 3: did not find expected key"},
		{"table:\n  uri: ./t\nflush:\n  interval: 1s\n   max_bytes: 1MiB\n", "yaml: line 5: mapping values are not allowed"},
	} {
		f := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(f, []byte(c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(f, noEnv); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want %q", c.yaml, err, c.want)
		}
	}
}
