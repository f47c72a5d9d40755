package cli

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	healthy := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	if code, _, errs := run(t, "healthcheck", "--url", srv.URL); code != 0 {
		t.Fatalf("healthy: exit %d: %s", code, errs)
	}
	healthy = false
	if code, _, errs := run(t, "healthcheck", "--url", srv.URL); code != 1 || !strings.Contains(errs, "503") {
		t.Fatalf("unhealthy: exit %d: %s", code, errs)
	}
	srv.Close()
	// Down: the error names the URL once (issue 30: Go's dial error said
	// it again).
	if code, _, errs := run(t, "healthcheck", "--url", srv.URL, "--timeout", "200ms"); code != 1 || strings.Count(errs, srv.URL) != 1 {
		t.Fatalf("down: exit %d: %s", code, errs)
	}
}

// TestHealthcheckFindsTheEndpoint: the endpoint follows the daemon's
// configuration (http.listen in the file, $DELTAFLOW_HTTP_LISTEN over it),
// so moving the port moves the healthcheck; a bare --url gets /healthz.
func TestHealthcheckFindsTheEndpoint(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { paths = append(paths, r.URL.Path) }))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	_, port, _ := net.SplitHostPort(addr)

	if code, _, errs := run(t, "healthcheck", "--url", srv.URL); code != 0 || paths[len(paths)-1] != "/healthz" {
		t.Fatalf("bare --url: exit %d, asked %v: %s", code, paths, errs)
	}
	cfg := filepath.Join(t.TempDir(), "deltaflow.yaml")
	if err := os.WriteFile(cfg, []byte("http:\n  listen: 0.0.0.0:"+port+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := run(t, "healthcheck", "--config", cfg); code != 0 {
		t.Fatalf("--config with http.listen on the wildcard address: exit %d: %s", code, errs)
	}
	t.Setenv("DELTAFLOW_HTTP_LISTEN", addr)
	if code, _, errs := run(t, "healthcheck"); code != 0 {
		t.Fatalf("$DELTAFLOW_HTTP_LISTEN: exit %d: %s", code, errs)
	}
	t.Setenv("DELTAFLOW_HTTP_LISTEN", "127.0.0.1:1")
	if code, _, errs := run(t, "healthcheck", "--timeout", "500ms"); code != 1 || !strings.Contains(errs, "http://127.0.0.1:1/healthz") {
		t.Fatalf("moved port: exit %d: %s", code, errs)
	}
	if code, _, errs := run(t, "healthcheck", "--url", "127.0.0.1:8080"); code != 2 {
		t.Fatalf("--url without a scheme: exit %d: %s", code, errs)
	}
}
