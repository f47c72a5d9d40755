package kafka

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/ledger"
	"github.com/twmb/franz-go/pkg/kgo"

	"go.yaml.in/yaml/v3"
)

func TestDefaults(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if c.Brokers[0] != "127.0.0.1:9092" || c.Topic != "sensor-events" || c.Group != "deltaflow" ||
		c.Mode != ModeGroup || c.StartOffset != ledger.StartEarliest || c.FetchMaxWait != 500*time.Millisecond {
		t.Errorf("defaults: %v", c)
	}
}

func TestYAML(t *testing.T) {
	var c Config
	err := yaml.Unmarshal([]byte(`
brokers: [kafka:9092]
mode: partitions
partitions: [0, 2]
start_offset: latest
fetch_max_wait: 250ms
sasl: {mechanism: scram-sha-512, user: u, password: hunter2}
`), &c)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.FetchMaxWait != 250*time.Millisecond || len(c.Partitions) != 2 || string(c.SASL.Password) != "hunter2" {
		t.Errorf("decoded %#v", c)
	}
}

func TestValidateNamesTheKey(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{SASL: SASL{Mechanism: "FOO", User: "u"}}, `kafka.sasl.mechanism: unknown "FOO"`},
		{Config{SASL: SASL{Mechanism: "PLAIN"}}, `kafka.sasl.user: required`},
		{Config{SASL: SASL{Password: "x"}}, `kafka.sasl.mechanism: required`},
		{Config{Brokers: []string{"kafka"}}, `kafka.brokers[0]: "kafka" is not host:port`},
		{Config{Mode: "fixed"}, `kafka.mode: unknown "fixed"`},
		{Config{Mode: ModePartitions}, `kafka.partitions: required`},
		{Config{Mode: ModePartitions, Partitions: []int32{1, 1}}, `kafka.partitions: partition 1 listed twice`},
		{Config{Partitions: []int32{1}}, `kafka.partitions: only valid with mode "partitions"`},
		{Config{Mode: ModePartitions, Partitions: []int32{0}, InstanceID: "pi"}, `kafka.instance_id: only valid with mode "group"`},
		{Config{StartOffset: "oldest"}, `kafka.start_offset: unknown "oldest"`},
		{Config{FetchMaxWait: -time.Second}, `kafka.fetch_max_wait: must be > 0`},
		{Config{MaxPollRecords: -1}, `kafka.max_poll_records: must be > 0`},
		{Config{MaxDecompressBytes: 2 << 30}, `kafka.max_decompress_bytes: must be > 0 and < 2GiB`},
		{Config{TLS: TLS{CAFile: "ca.pem"}}, `kafka.tls.enabled: must be true`},
		{Config{TLS: TLS{Enabled: true, CertFile: "c.pem"}}, `kafka.tls.cert_file: cert_file and key_file`},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Validate(%v) = %v, want prefix %q", tc.cfg, err, tc.want)
		}
		var ce *ConfigError
		if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) {
			t.Errorf("Validate(%v) = %v: not a *ConfigError matching ErrInvalidConfig", tc.cfg, err)
		}
	}
}

func TestPasswordNeverShown(t *testing.T) {
	const pw = "s3cr3t-Pa55"
	c := DefaultConfig()
	c.SASL = SASL{Mechanism: MechPlain, User: "alice", Password: pw}

	var shown []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		shown = append(shown, fmt.Sprintf(verb, c), fmt.Sprintf(verb, c.SASL), fmt.Sprintf(verb, c.SASL.Password))
	}
	shown = append(shown, c.String())
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&buf, nil), slog.NewTextHandler(&buf, nil)} {
		slog.New(h).Info("config", "kafka", c, "sasl", c.SASL, "pw", c.SASL.Password)
	}
	shown = append(shown, buf.String())
	j, _ := json.Marshal(c)
	y, _ := yaml.Marshal(c)
	shown = append(shown, string(j), string(y))

	for _, s := range shown {
		if strings.Contains(s, pw) || strings.Contains(s, fmt.Sprintf("%x", pw)) {
			t.Errorf("password revealed: %s", s)
		}
	}
	if !strings.Contains(c.String(), "alice") || !strings.Contains(buf.String(), "REDACTED") {
		t.Errorf("String/LogValue lost the non-secret fields: %s / %s", c, buf.String())
	}
}

// TestKafkaClientLogsAtWarn: at log.level info, franz-go's info lines (an
// assignment, a seek, a heartbeat a rebalance cut short: 17 of the 37
// lines of a `run --until-latest`) are not logged, its warnings are; at
// debug, both are.
func TestKafkaClientLogsAtWarn(t *testing.T) {
	for _, tc := range []struct {
		level     slog.Level
		kgoLevel  kgo.LogLevel
		infoShown bool
	}{
		{slog.LevelInfo, kgo.LogLevelWarn, false},
		{slog.LevelDebug, kgo.LogLevelDebug, true},
	} {
		var out bytes.Buffer
		k := kgoLogger{slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: tc.level}))}
		if got := k.Level(); got != tc.kgoLevel {
			t.Errorf("at %v, franz-go asked for %v, want %v", tc.level, got, tc.kgoLevel)
		}
		k.Log(kgo.LogLevelInfo, "assigning partitions")
		k.Log(kgo.LogLevelWarn, "unable to open connection")
		if shown := strings.Contains(out.String(), "assigning partitions"); shown != tc.infoShown || !strings.Contains(out.String(), "level=WARN msg=\"kgo: unable to open connection\"") {
			t.Errorf("at %v: log %q; want franz-go's info line shown: %v, and its warning at WARN", tc.level, out.String(), tc.infoShown)
		}
	}
}
