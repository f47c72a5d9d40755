//go:build !nonatsserver

package bridge

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// embeddedAvailable: this build can run the embedded server.
const embeddedAvailable = true

// embeddedMaxPayload is the embedded server's max_payload. Kafka records up
// to 10 MB (a hostile producer) must fit in one DLQ message with headers;
// nats-server warns above 8 MB but accepts up to 64 MB.
const embeddedMaxPayload = 16 << 20

// serverReadyTimeout bounds how long New waits for the embedded server.
const serverReadyTimeout = 10 * time.Second

// embeddedStoreHeadroom is the embedded JetStream store beyond the DLQ
// streams' bounds: the KV bucket holds one small value per partition.
const embeddedStoreHeadroom = 64 << 20

// startEmbedded starts an in-process nats-server with JetStream for cfg (see
// Config.Listen and Config.StoreDir), its store bounded to the DLQ streams
// of tables tables, and waits until it accepts clients.
func startEmbedded(cfg Config, tables int) (embeddedServer, error) {
	host, portStr, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: listen %q: %w", cfg.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: listen %q: %w", cfg.Listen, err)
	}
	// nats-server only logs a taken port, and New would wait
	// serverReadyTimeout to report "not ready".
	if err := listenFree(cfg.Listen); err != nil {
		return nil, err
	}
	storeDir, err := filepath.Abs(cfg.StoreDir)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: store dir: %w", err)
	}
	opts := &server.Options{
		ServerName: "deltaflow",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   storeDir,
		// nats-server would take up to 75% of the free disk, which the SD
		// card shares with the table's store and Kafka.
		JetStreamMaxStore: int64(tables)*int64(cfg.DLQMaxBytes) + embeddedStoreHeadroom,
		MaxPayload:        embeddedMaxPayload,
		// The process owns signal handling and logging.
		NoSigs: true,
		NoLog:  true,
	}
	// With credentials configured, the embedded server requires them, so a
	// Listen on a public interface is not an open door.
	switch {
	case cfg.Token != "":
		opts.Authorization = string(cfg.Token)
	case cfg.User != "":
		opts.Username, opts.Password = cfg.User, string(cfg.Password)
	}
	ns, err := startServer(opts.Clone()) // NewServer keeps and changes the options it gets
	if err != nil {
		return nil, err
	}
	// A restart (reopenStore) binds the port this one got.
	opts.Port = ns.Addr().(*net.TCPAddr).Port
	return &embedded{ns: ns, opts: opts}, nil
}

// startServer starts a nats-server with opts and waits until it accepts
// clients.
func startServer(opts *server.Options) (*server.Server, error) {
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(serverReadyTimeout) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("embedded nats: not ready for connections on %s:%d after %s", opts.Host, opts.Port, serverReadyTimeout)
	}
	return ns, nil
}

// embedded is the in-process server, which reopenStore replaces by a new
// one on the same port and store. (nats-server can also turn JetStream off
// and on again in place, but that races with the API requests of clients
// meanwhile.)
type embedded struct {
	mu     sync.Mutex
	ns     *server.Server
	opts   *server.Options // for a restart: the first server's, its port resolved
	closed bool            // by Shutdown: no restart after it
}

func (e *embedded) server() *server.Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ns
}

func (e *embedded) ClientURL() string      { return e.server().ClientURL() }
func (e *embedded) JetStreamEnabled() bool { return e.server().JetStreamEnabled() }
func (e *embedded) WaitForShutdown()       { e.server().WaitForShutdown() }

// InProcessConn connects a client (the bridge, at each reconnect) to the
// server; one that a reopenStore could not start again is started now.
func (e *embedded) InProcessConn() (net.Conn, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.ns.Running() && !e.closed {
		if err := e.restartLocked(); err != nil {
			return nil, err
		}
	}
	return e.ns.InProcessConn()
}

// reopenStore restarts the server in process, which opens every stream's
// store again: a stream whose store failed a write (a full disk) refuses
// every write until then (see ErrStoreFailed), and JetStream nats-server
// turned off is on again. Clients reconnect (the bridge by itself).
func (e *embedded) reopenStore() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	return e.restartLocked()
}

func (e *embedded) restartLocked() error {
	e.ns.Shutdown()
	e.ns.WaitForShutdown() // until it has released its port and store
	ns, err := startServer(e.opts.Clone())
	if err != nil {
		return err
	}
	e.ns = ns
	return nil
}

// Shutdown stops the server for good.
func (e *embedded) Shutdown() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	e.ns.Shutdown()
}
