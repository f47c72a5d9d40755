package bridge

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The embedded server listens beyond loopback only with credentials: New
// refuses before it binds anything, naming the key; with credentials it
// serves there and requires them.
func TestEmbeddedServerRefusesOpenListen(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:-1", ":-1"} {
		_, err := New(t.Context(), Config{Listen: listen, StoreDir: t.TempDir()}, nil, WithTable(testTable))
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "nats.listen:") || !strings.Contains(err.Error(), "nats.user") {
			t.Errorf("listen %s without credentials: %v, want a refusal naming nats.listen and nats.user", listen, err)
		}
	}
	for _, listen := range []string{"127.0.0.1:-1", "localhost:-1", "[::1]:-1"} {
		if err := (Config{Listen: listen}).Validate(); err != nil {
			t.Errorf("listen %s: %v", listen, err)
		}
	}
	b := newTestBridge(t, Config{Listen: "0.0.0.0:-1", StoreDir: t.TempDir(), Token: "tok"})
	if _, err := nats.Connect(b.ClientURL()); err == nil {
		t.Fatal("anonymous client accepted on a non-loopback listen")
	}
	connect(t, b.ClientURL(), nats.Token("tok"))
}

// A taken port is reported at once as such (it was "not ready for
// connections ... after 10s"), by New and by Ping.
func TestEmbeddedServerPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := Config{Listen: l.Addr().String(), StoreDir: t.TempDir()}
	start := time.Now()
	_, err = New(t.Context(), cfg, nil, WithTable(testTable))
	if err == nil || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "nats.listen "+cfg.Listen) {
		t.Errorf("New on a taken port: %v, want address already in use naming nats.listen", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("New took %s to report the taken port", took)
	}
	if _, err := Ping(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("Ping on a taken port: %v", err)
	}
}

// Ping connects to an external server with the configured credentials
// and finds JetStream; a closed port fails within the deadline.
func TestPing(t *testing.T) {
	opts := testServerOpts(t)
	opts.Username, opts.Password = "df", "pw"
	ns := runServer(t, opts)
	got, err := Ping(t.Context(), Config{URL: ns.ClientURL(), User: "df", Password: "pw"})
	if err != nil || !strings.Contains(got, "JetStream enabled") {
		t.Errorf("Ping: %q, %v", got, err)
	}
	if _, err := Ping(t.Context(), Config{URL: ns.ClientURL(), User: "df", Password: "wrong"}); err == nil ||
		!strings.Contains(err.Error(), "Authorization Violation") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("Ping with a wrong password: %v", err)
	}
	// A server that went away: its port refuses connections.
	gone := runServer(t, testServerOpts(t))
	closed := gone.ClientURL()
	stopEmbedded(gone)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := Ping(ctx, Config{URL: closed}); err == nil || !strings.Contains(err.Error(), "connect nats") {
		t.Errorf("Ping on a closed port: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Ping on a closed port took %s", took)
	}
	dir := t.TempDir()
	got, err = Ping(t.Context(), Config{Listen: "127.0.0.1:-1", StoreDir: filepath.Join(dir, "nats")})
	if err != nil || !strings.Contains(got, "writable") {
		t.Errorf("Ping embedded: %q, %v", got, err)
	}
}
