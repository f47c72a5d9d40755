package bridge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
)

func TestEmbeddedServer(t *testing.T) {
	dir := t.TempDir()
	b := newTestBridge(t, Config{Listen: "127.0.0.1:-1", StoreDir: dir})
	if !b.Healthy() {
		t.Fatal("not healthy")
	}
	// The nats CLI's view: a TCP client sees the KV bucket and DLQ stream.
	nc := connect(t, b.ClientURL())
	js, _ := jetstream.New(nc)
	if _, err := js.KeyValue(t.Context(), DefaultKVBucket); err != nil {
		t.Fatalf("kv bucket: %v", err)
	}
	s, err := js.Stream(t.Context(), "DELTAFLOW_DLQ_SENSOR_EVENTS")
	if err != nil {
		t.Fatalf("dlq stream: %v", err)
	}
	if got := s.CachedInfo().Config.Duplicates; got != 24*time.Hour {
		t.Errorf("dlq duplicates window = %s, want 24h", got)
	}
	if mp := nc.MaxPayload(); mp != embeddedMaxPayload {
		t.Errorf("max_payload = %d, want %d", mp, embeddedMaxPayload)
	}
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); err != nil {
		t.Errorf("store dir not used: %v", err)
	}
}

func TestEmbeddedServerRequiresConfiguredCredentials(t *testing.T) {
	b := newTestBridge(t, Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir(), User: "alice", Password: "pw"})
	if _, err := nats.Connect(b.ClientURL()); err == nil {
		t.Fatal("anonymous client accepted by an embedded server with credentials")
	}
	connect(t, b.ClientURL(), nats.UserInfo("alice", "pw"))
}

// An embedded server with a blank credential (a user without password, a
// blank token) would admit whoever sends it, on every interface it listens
// on (issue 29, item 7): such a configuration never starts.
func TestEmbeddedServerRefusesBlankCredentials(t *testing.T) {
	for _, tc := range []struct {
		cfg Config
		key string
	}{
		{Config{User: "admin"}, "nats.password"},
		{Config{User: "admin", Password: "  "}, "nats.password"},
		{Config{Token: " "}, "nats.token"},
	} {
		tc.cfg.Listen, tc.cfg.StoreDir = "127.0.0.1:-1", t.TempDir()
		b, err := New(t.Context(), tc.cfg, nil, WithTable(testTable))
		if err == nil {
			// The door: a raw client sending the blank credential.
			nc, cerr := nats.Connect(b.ClientURL(), authOptions(tc.cfg)...)
			if cerr == nil {
				nc.Close()
			}
			b.Close()
			t.Errorf("%v started (a client sending the blank credential: err %v), want it refused naming %s", tc.cfg, cerr, tc.key)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.key+":") {
			t.Errorf("%v: %v, want ErrInvalidConfig naming %s", tc.cfg, err, tc.key)
		}
	}
}

func TestSetupIsIdempotent(t *testing.T) {
	ns := runServer(t, testServerOpts(t))
	cfg := Config{URL: ns.ClientURL()}
	a := newTestBridge(t, cfg)
	b := newTestBridge(t, cfg) // a second instance (or a restart) of the same table
	if err := b.PutOffset(t.Context(), "x", 0, OffsetRecord{Offset: 1}); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Offsets(t.Context(), "x"); err != nil || got[0].Offset != 1 {
		t.Fatalf("Offsets = %v, %v", got, err)
	}
}

func TestNewRequiresTable(t *testing.T) {
	_, err := New(t.Context(), Config{}, nil)
	if !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("err = %v, want ErrInvalidOption", err)
	}
}

func TestAuthUserPassword(t *testing.T) {
	opts := testServerOpts(t)
	opts.Username, opts.Password = "alice", "pw"
	ns := runServer(t, opts)
	if _, err := New(t.Context(), Config{URL: ns.ClientURL(), User: "alice", Password: "nope"}, nil, WithTable(testTable)); err == nil {
		t.Fatal("wrong password accepted")
	}
	b := newTestBridge(t, Config{URL: ns.ClientURL(), User: "alice", Password: "pw"})
	if !b.Healthy() {
		t.Fatal("not healthy")
	}
}

func TestAuthToken(t *testing.T) {
	opts := testServerOpts(t)
	opts.Authorization = "tok"
	ns := runServer(t, opts)
	if _, err := New(t.Context(), Config{URL: ns.ClientURL(), Token: "bad"}, nil, WithTable(testTable)); err == nil {
		t.Fatal("wrong token accepted")
	}
	newTestBridge(t, Config{URL: ns.ClientURL(), Token: "tok"})
}

func TestAuthTLSWithClientCert(t *testing.T) {
	dir := t.TempDir()
	pki := testenv.NewPKI(t, dir)
	opts := testServerOpts(t)
	opts.TLS, opts.TLSVerify = true, true
	opts.TLSConfig = &tls.Config{
		Certificates: []tls.Certificate{pki.ServerCert},
		ClientCAs:    pki.Pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}
	opts.TLSTimeout = 2
	ns := runServer(t, opts)
	url := strings.Replace(ns.ClientURL(), "nats://", "tls://", 1)

	// Without a client certificate the server refuses us.
	if _, err := New(t.Context(), Config{URL: url, TLS: TLSConfig{CAFile: pki.CAFile}}, nil, WithTable(testTable)); err == nil {
		t.Fatal("connected without a client certificate")
	}
	b := newTestBridge(t, Config{URL: url, TLS: TLSConfig{CAFile: pki.CAFile, CertFile: pki.ClientCertFile, KeyFile: pki.ClientKeyFile}})
	if !b.Healthy() || !b.nc.TLSRequired() {
		t.Fatal("not connected over TLS")
	}
}

func TestIsTransient(t *testing.T) {
	apiUnavailable := &jetstream.APIError{Code: 503, Description: "jetstream unavailable"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("put offset k: %w", nats.ErrTimeout), true},
		{fmt.Errorf("x: %w", nats.ErrNoResponders), true},
		{nats.ErrDisconnected, true},
		{nats.ErrConnectionReconnecting, true},
		{context.DeadlineExceeded, true},
		{jetstream.ErrJetStreamNotEnabled, true},
		{fmt.Errorf("x: %w", apiUnavailable), true},
		{fmt.Errorf("%w: 1 of 1: %w", ErrDLQIncomplete, jetstream.ErrAsyncPublishTimeout), true},
		{context.Canceled, false},
		{nats.ErrConnectionClosed, false},
		{nats.ErrAuthorization, false},
		{nats.ErrMaxPayload, false},
		{jetstream.ErrKeyRevisionMismatch, false},
		{&jetstream.APIError{Code: 400, Description: "bad request"}, false},
		{ErrInvalidConfig, false},
	} {
		if got := IsTransient(tc.err); got != tc.want {
			t.Errorf("IsTransient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestIsPermanent(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{nats.ErrConnectionClosed, true},
		{fmt.Errorf("publish: %w", nats.ErrAuthorization), true},
		{nats.ErrPermissionViolation, true},
		{nats.ErrMaxPayload, true},
		{nats.ErrBadSubject, true},
		{fmt.Errorf("nats: %w", ErrInvalidConfig), true},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeBadRequest, Description: "bad request"}, true},
		{&jetstream.APIError{Code: 403, Description: "forbidden"}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum}, true},
		// Conflicts and answers are for their callers, not permanent.
		{jetstream.ErrKeyRevisionMismatch, false},
		{jetstream.ErrKeyExists, false},
		{&jetstream.APIError{Code: 404, ErrorCode: jetstream.JSErrCodeStreamNotFound}, false},
		// Transient ones never are, even joined with a permanent part.
		{nats.ErrTimeout, false},
		{&jetstream.APIError{Code: 503}, false},
		{errors.Join(nats.ErrPermissionViolation, jetstream.ErrAsyncPublishTimeout), false},
		// Unknown errors are left to the caller's policy.
		{errors.New("something new"), false},
		{context.Canceled, false},
	} {
		if got := IsPermanent(tc.err); got != tc.want {
			t.Errorf("IsPermanent(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestImports keeps the bridge free of the actor system, the Kafka client
// and the Delta library: actors reach NATS only through this package.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{"github.com/asynkron/protoactor-go", "github.com/twmb/franz-go", "github.com/deltaflow/deltaflow/delta", "github.com/deltaflow/deltaflow/actors"} {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("bridge depends on %s", dep)
			}
		}
	}
}

// TestBridgeServesManyTables: one connection (here one embedded server)
// serves every table of the process: each table's Bridge has its own DLQ
// stream, events subjects and KV keys, and the embedded store is bounded
// to every table's DLQ bound.
func TestBridgeServesManyTables(t *testing.T) {
	dir := t.TempDir()
	first := newTestBridge(t, Config{Listen: "127.0.0.1:-1", StoreDir: dir, DLQMaxBytes: 40 << 20}, WithTable("weather"))
	weather := first.Table("weather")
	if weather == nil || first.TableName() != testTable || weather.TableName() != "weather" {
		t.Fatalf("tables %q and %v", first.TableName(), weather)
	}
	if first.Table("unknown") != nil {
		t.Error("a Bridge for a table New was not given")
	}
	nc := connect(t, first.ClientURL())
	events, err := nc.SubscribeSync(EventSubject("weather", "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	// A round trip: the server has the subscription before the event is
	// published on the bridge's connection (CI lost it once without).
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := first.PublishDLQ(t.Context(), testLetters(2)); err != nil {
		t.Fatal(err)
	}
	if err := weather.PublishDLQ(t.Context(), testLetters(1)); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*Bridge{first, weather} {
		if err := b.PutOffset(t.Context(), "sensor.events", 0, OffsetRecord{Offset: int64(len(b.TableName())), Version: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := weather.Publish(&CheckpointEvent{Version: 7}); err != nil {
		t.Fatal(err)
	}
	for b, want := range map[*Bridge]uint64{first: 2, weather: 1} {
		u, err := b.DLQUsage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if u.Stream != DefaultDLQStream(b.TableName()) || u.Letters != want {
			t.Errorf("table %s: DLQ %+v, want %d letters in %s", b.TableName(), u, want, DefaultDLQStream(b.TableName()))
		}
		offs, err := b.Offsets(t.Context(), "sensor.events")
		if err != nil || offs[0].Offset != int64(len(b.TableName())) {
			t.Errorf("table %s: KV offsets %v, %v", b.TableName(), offs, err)
		}
	}
	if m, err := events.NextMsg(5 * time.Second); err != nil || !strings.Contains(string(m.Data), `"table":"weather"`) {
		t.Errorf("weather's checkpoint event: %v", err)
	}
	// 2 × 40 MiB reserved by the DLQ streams: the headroom is left.
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other"}, MaxBytes: 60 << 20}); err != nil {
		t.Errorf("the embedded store is not bounded to both tables' DLQ streams plus its headroom: %v", err)
	}
}
