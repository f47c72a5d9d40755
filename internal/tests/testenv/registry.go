package testenv

import (
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// Registry is a Confluent-API schema registry (franz-go's srfake) served
// over HTTP on 127.0.0.1 for the test, with basic auth, which Stop and
// Start take down and bring back on the same port (a registry outage):
// what it holds survives.
type Registry struct {
	t    testing.TB
	reg  *srfake.Registry
	addr string

	mu  sync.Mutex
	srv *http.Server
}

// SchemaRegistry starts a registry that takes user:password, stopped when
// the test ends.
func SchemaRegistry(t testing.TB, user, password string) *Registry {
	t.Helper()
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	r := &Registry{t: t, reg: srfake.NewRegistry(srfake.WithAuth(auth))}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// URL is the registry's base URL.
func (r *Registry) URL() string { return "http://" + r.addr }

// Start serves the registry (again, on the same port).
func (r *Registry) Start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		return
	}
	addr := r.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		r.t.Fatalf("schema registry: %v", err)
	}
	r.addr = ln.Addr().String()
	r.srv = &http.Server{Handler: r.reg.Handler()}
	go func(srv *http.Server) {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.t.Errorf("schema registry: %v", err)
		}
	}(r.srv)
}

// Stop takes the registry down: connections are refused until Start.
func (r *Registry) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		_ = r.srv.Close()
		r.srv = nil
	}
}
