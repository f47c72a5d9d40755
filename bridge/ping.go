package bridge

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deltaflow/deltaflow/internal/secret"
)

// Ping checks, within ctx, that New could start with cfg, without
// starting anything: an external server (nats.url) is connected to with
// cfg's credentials and TLS and asked for its JetStream account; for the
// embedded server, nats.listen must be free and nats.store_dir writable.
// It returns what it found, for `config check --probe`.
func Ping(ctx context.Context, cfg Config) (string, error) {
	if err := cfg.Validate(); err != nil {
		return "", err
	}
	cfg = cfg.withDefaults()
	if cfg.embedded() {
		if err := listenFree(cfg.Listen); err != nil {
			return "", err
		}
		if err := writableDir(cfg.StoreDir); err != nil {
			return "", fmt.Errorf("nats.store_dir: %w", err)
		}
		return fmt.Sprintf("embedded server: %s free, store %s writable", cfg.Listen, cfg.StoreDir), nil
	}
	timeout := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	url := secret.RedactURL(cfg.URL)
	nc, err := Dial(cfg.URL, cfg, "deltaflow config check", timeout)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return "", fmt.Errorf("jetstream: %w", err)
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		return "", fmt.Errorf("nats %s: jetstream: %w", url, err)
	}
	return fmt.Sprintf("server %s (%s), JetStream enabled", nc.ConnectedUrlRedacted(), nc.ConnectedServerVersion()), nil
}

// listenFree reports an error when the embedded server could not listen on
// addr, as `address already in use`; a port of -1 or 0 picks a free one.
func listenFree(addr string) error {
	if _, port, err := net.SplitHostPort(addr); err == nil && (port == "-1" || port == "0") {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("embedded nats: nats.listen %s: %w", addr, err)
	}
	return l.Close()
}

// writableDir creates dir if needed and checks a file can be written in it.
func writableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".deltaflow-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	if err := f.Close(); err != nil {
		return err
	}
	return os.Remove(filepath.Clean(name))
}
