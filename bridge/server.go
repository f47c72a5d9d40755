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
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(serverReadyTimeout) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("embedded nats: not ready for connections on %s after %s", cfg.Listen, serverReadyTimeout)
	}
	return &embedded{Server: ns, opts: opts}, nil
}

// embedded is the in-process server, which the bridge may reopen the
// JetStream store of.
type embedded struct {
	*server.Server
	opts *server.Options

	mu     sync.Mutex // reopenStore against Shutdown
	closed bool
}

// reopenStore restarts JetStream (not the server: clients stay connected),
// which opens every stream's store again. A stream whose store failed a
// write (a full disk) refuses every write until then (see ErrStoreFailed);
// a JetStream nats-server disabled is enabled again.
func (e *embedded) reopenStore() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	if err := e.ShutdownJetStream(); err != nil {
		return fmt.Errorf("embedded nats: stop JetStream: %w", err)
	}
	// As Server.Start enables it; EnableJetStream changes the config it
	// is given, so a new one each time.
	o := e.opts
	err := e.EnableJetStream(&server.JetStreamConfig{StoreDir: o.StoreDir, MaxStore: o.JetStreamMaxStore, MaxMemory: o.JetStreamMaxMemory,
		SyncInterval: o.SyncInterval, SyncAlways: o.SyncAlways, Strict: !o.NoJetStreamStrict, CompressOK: true})
	if err != nil {
		return fmt.Errorf("embedded nats: start JetStream in %s: %w", o.StoreDir, err)
	}
	return nil
}

// Shutdown stops the server; reopenStore does nothing after it.
func (e *embedded) Shutdown() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	e.Server.Shutdown()
}
