package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	want := Config{Listen: "127.0.0.1:4222", StoreDir: "data/nats", KVBucket: "deltaflow_offsets", KVReplicas: 1, DLQMaxAge: 168 * time.Hour, DLQMaxBytes: 256 << 20, PublishTimeout: 5 * time.Second}
	if c != want {
		t.Fatalf("defaults = %v, want %v", c, want)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config invalid: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	for _, tc := range []struct {
		cfg     Config
		wantKey string
	}{
		{Config{URL: "::nonsense"}, "nats.url"},
		{Config{Token: "s3cret-token", User: "u"}, "nats.token"},
		{Config{Password: "pw"}, "nats.password"},
		{Config{CredsFile: missing}, "nats.creds_file"},
		{Config{URL: "nats://h:4222", CredsFile: missing}, "nats.creds_file"},
		{Config{TLS: TLSConfig{CAFile: missing}}, "nats.tls"},
		{Config{URL: "nats://h:4222", TLS: TLSConfig{CAFile: missing}}, "nats.tls.ca_file"},
		{Config{URL: "nats://h:4222", TLS: TLSConfig{CertFile: "c"}}, "nats.tls"},
		{Config{Listen: "localhost"}, "nats.listen"},
		{Config{Listen: "127.0.0.1:99999"}, "nats.listen"},
		// Beyond loopback, the embedded server needs credentials.
		{Config{Listen: "0.0.0.0:4222"}, "nats.listen"},
		{Config{Listen: ":4222"}, "nats.listen"},
		{Config{Listen: "192.0.2.7:4222"}, "nats.listen"},
		{Config{DLQMaxBytes: -1}, "nats.dlq_max_bytes"},
		{Config{KVReplicas: 3}, "nats.kv_replicas"},
		{Config{URL: "nats://h:4222", KVReplicas: 7}, "nats.kv_replicas"},
		{Config{KVBucket: "a.b"}, "nats.kv_bucket"},
		{Config{DLQStream: "DLQ.X"}, "nats.dlq_stream"},
		{Config{PublishTimeout: -time.Second}, "nats.publish_timeout"},
		// A credential is never empty or blank (issue 29, item 7): the
		// embedded server would admit anyone sending it.
		{Config{User: "admin"}, "nats.password"},
		{Config{Listen: "0.0.0.0:4222", User: "admin"}, "nats.password"},
		{Config{Listen: "0.0.0.0:4222", User: "admin", Password: " \t"}, "nats.password"},
		{Config{URL: "nats://h:4222", User: "admin", Password: "  "}, "nats.password"},
		{Config{User: "  ", Password: "s3cret-pw"}, "nats.user"},
		{Config{Listen: "0.0.0.0:4222", Token: "   "}, "nats.token"},
		{Config{URL: "nats://h:4222", Token: "\n"}, "nats.token"},
	} {
		err := tc.cfg.Validate()
		if err == nil {
			t.Errorf("%v: no error, want one naming %s", tc.cfg, tc.wantKey)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantKey+":") {
			t.Errorf("%v: error %q, want ErrInvalidConfig naming %s", tc.cfg, err, tc.wantKey)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error reveals a secret: %v", err)
		}
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	cfg := Config{
		URL:      "nats://alice:urlpass-s3cret@host:4222,nats://tok-s3cret@other:4222",
		User:     "alice",
		Password: "pw-s3cret",
		Token:    "token-s3cret",
	}
	var logBuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&logBuf, nil)).Info("config", "nats", cfg)
	slog.New(slog.NewTextHandler(&logBuf, nil)).Info("config", "nats", cfg, "pw", cfg.Password)
	for _, s := range []string{
		fmt.Sprint(cfg), fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg),
		fmt.Sprintf("%v %s", cfg.Password, cfg.Token), fmt.Sprintf("%#v", cfg.Token),
		fmt.Sprint(&cfg), logBuf.String(), cfg.Validate().Error(),
	} {
		if strings.Contains(s, "s3cret") {
			t.Errorf("secret revealed in %q", s)
		}
	}
	if !strings.Contains(fmt.Sprint(cfg), "alice") || !strings.Contains(logBuf.String(), "REDACTED") {
		t.Errorf("non-secret fields should still print: %s / %s", cfg, logBuf.String())
	}
}

func TestSecretsNotInErrorsOrLogs(t *testing.T) {
	opts := testServerOpts(t)
	opts.Username, opts.Password = "alice", "right-s3cret"
	ns := runServer(t, opts)

	var logs testenv.SyncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx := t.Context()

	// Wrong password: the error must not echo it.
	_, err := New(ctx, Config{URL: ns.ClientURL(), User: "alice", Password: "wrong-s3cret"}, logger, WithTable(testTable))
	if err == nil {
		t.Fatal("New with a wrong password succeeded")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error reveals a secret: %v", err)
	}
	// Right password, with the URL holding credentials too.
	url := strings.Replace(ns.ClientURL(), "nats://", "nats://alice:right-s3cret@", 1)
	b, err := New(ctx, Config{URL: url, User: "alice", Password: "right-s3cret"}, logger, WithTable(testTable), fastReconnect)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	logger.Info("bridge", "cfg", b.cfg, "url", b.ClientURL())
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "s3cret") {
		t.Errorf("logs reveal a secret:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "nats connected") {
		t.Errorf("expected connection logs, got:\n%s", logs.String())
	}
}

func TestNamesAndSubjects(t *testing.T) {
	for in, want := range map[string]string{
		"sensor-events": "sensor-events",
		"sensor.events": "sensor=2Eevents",
		"a_b":           "a_b",
		"a b>*":         "a=20b=3E=2A",
	} {
		if got := Token(in); got != want {
			t.Errorf("Token(%q) = %q, want %q", in, got, want)
		}
	}
	if Token("a.b") == Token("a_b") || Token("a.b") == Token("a=2Eb") {
		t.Error("Token collides")
	}
	if got := OffsetKey("sensor_events", "sensor.events", 3); got != "sensor_events.sensor=2Eevents.3" {
		t.Errorf("OffsetKey = %q", got)
	}
	if got := DefaultDLQStream("sensor.events-v2"); got != "DELTAFLOW_DLQ_SENSOR_EVENTS-V2" {
		t.Errorf("DefaultDLQStream = %q", got)
	}
	if got := EventSubject("t", KindCommit); got != "deltaflow.t.events.commit" {
		t.Errorf("EventSubject = %q", got)
	}
	if got := DLQLetterSubject("t", "x.y", 2); got != "deltaflow.t.dlq.x=2Ey.2" {
		t.Errorf("DLQLetterSubject = %q", got)
	}
	if got := ControlGroup("t"); got != "deltaflow.t.control" {
		t.Errorf("ControlGroup = %q", got)
	}
}

func TestEventsDocIsFresh(t *testing.T) {
	committed, err := os.ReadFile("../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(committed) != EventsDoc() {
		t.Fatal("docs/events.md is stale: run `go generate ./bridge` and commit it")
	}
}
