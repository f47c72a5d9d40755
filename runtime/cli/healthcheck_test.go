package cli

import (
	"net/http"
	"net/http/httptest"
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
	if code, _, _ := run(t, "healthcheck", "--url", srv.URL, "--timeout", "200ms"); code != 1 {
		t.Fatalf("down: exit %d", code)
	}
}
