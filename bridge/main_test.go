package bridge

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testTable = "sensor_events"

// testServerOpts returns options for an in-process JetStream server on a
// random port with its store in a temp dir.
func testServerOpts(t *testing.T) *server.Options {
	t.Helper()
	return &server.Options{
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   t.TempDir(),
		MaxPayload: embeddedMaxPayload,
		NoLog:      true,
		NoSigs:     true,
	}
}

// runServer starts a server with opts and stops it at the end of the test.
func runServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(func() { stopEmbedded(ns) })
	return ns
}

// fastReconnect keeps outage tests short.
var fastReconnect = withNATSOptions(nats.ReconnectWait(20*time.Millisecond), nats.ReconnectJitter(0, 0))

// newTestBridge connects a bridge for testTable and closes it at the end.
func newTestBridge(t *testing.T, cfg Config, opts ...Opt) *Bridge {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := New(ctx, cfg, testLogger(t), append([]Opt{WithTable(testTable)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// externalBridge runs a plain test server and a bridge connected to it.
func externalBridge(t *testing.T, opts ...Opt) (*Bridge, *server.Server) {
	t.Helper()
	ns := runServer(t, testServerOpts(t))
	return newTestBridge(t, Config{URL: ns.ClientURL()}, opts...), ns
}

// connect opens a plain client to ns.
func connect(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// stopEmbedded shuts ns down and waits until it has released its port and
// store.
func stopEmbedded(ns *server.Server) {
	ns.Shutdown()
	ns.WaitForShutdown()
}
