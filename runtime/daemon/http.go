package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/deltaflow/deltaflow/actors"
	"github.com/deltaflow/deltaflow/bridge"
)

// readiness is what /readyz reports: ready once the table is loaded and NATS
// is connected, while no component is degraded and until shutdown starts.
type readiness struct {
	tableLoaded atomic.Bool
	stopping    atomic.Bool
	// stalled is the stall watchdog's reason while it sees a stall; nil
	// otherwise. /healthz reports it too: the process is alive but not
	// doing its job, and exits after watchdog.grace.
	stalled atomic.Pointer[string]
	bridge  atomic.Pointer[bridge.Bridge]
	health  *actors.Health
}

// reasons lists why the process is not ready; empty means ready.
func (r *readiness) reasons() []string {
	var out []string
	if r.stopping.Load() {
		out = append(out, "shutting down")
	}
	if s := r.stalled.Load(); s != nil {
		out = append(out, "stalled: "+*s)
	}
	if !r.tableLoaded.Load() {
		out = append(out, "table: not loaded yet")
	}
	if b := r.bridge.Load(); b == nil {
		out = append(out, "nats: not connected yet")
	} else if !b.Healthy() {
		out = append(out, "nats: disconnected")
	}
	for comp, why := range r.health.Degraded() {
		out = append(out, comp+": "+why)
	}
	return append(out, r.health.Refusals()...)
}

// httpServer serves /healthz, /readyz and /metrics; a nil one (listen "")
// does nothing.
type httpServer struct {
	srv *http.Server
	ln  net.Listener
}

// httpTimeouts bound what one client holds of the server: a connection
// trickling its request, not reading the response, or idle between
// requests. Probes and scrapes need far less.
var httpTimeouts = struct{ readHeader, read, write, idle time.Duration }{
	readHeader: 5 * time.Second, read: 10 * time.Second, write: 30 * time.Second, idle: 2 * time.Minute,
}

func startHTTP(listen string, reg *prometheus.Registry, ready *readiness, logger *slog.Logger) (*httpServer, error) {
	if listen == "" {
		return nil, nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		// Alive as long as the process answers, the stall watchdog sees
		// no stall (on a stall the process exits by itself after
		// watchdog.grace) and the engine refuses nothing (a partition held
		// for data loss waits for a human: a restart would not help);
		// other degradations are /readyz's.
		var bad []string
		if s := ready.stalled.Load(); s != nil {
			bad = append(bad, "stalled: "+*s)
		}
		if bad = append(bad, ready.health.Refusals()...); len(bad) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, strings.Join(bad, "\n"))
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if rs := ready.reasons(); len(rs) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, strings.Join(rs, "\n"))
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg,
		// A gzip writer costs ~1 MiB of heap per scrape, for a few KiB.
		DisableCompression: true}))
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("http.listen: %w", err)
	}
	t := httpTimeouts
	s := &httpServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: t.readHeader, ReadTimeout: t.read, WriteTimeout: t.write,
		IdleTimeout: t.idle}, ln: ln}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server failed", "err", err)
		}
	}()
	logger.Info("http server listening", "addr", ln.Addr().String())
	return s, nil
}

// addr is the address the server listens on ("" when disabled).
func (s *httpServer) addr() string {
	if s == nil {
		return ""
	}
	return s.ln.Addr().String()
}

func (s *httpServer) close() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
