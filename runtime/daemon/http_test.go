package daemon

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deltaflow/deltaflow/actors"
)

// The HTTP server closes a keep-alive connection left idle, and one that
// trickles its request, rather than hold it (and a goroutine) forever.
func TestHTTPTimeouts(t *testing.T) {
	prev := httpTimeouts
	t.Cleanup(func() { httpTimeouts = prev })
	httpTimeouts.read, httpTimeouts.idle = 300*time.Millisecond, 300*time.Millisecond
	srv, err := startHTTP("127.0.0.1:0", prometheus.NewRegistry(), &readiness{health: actors.NewHealth()}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()

	closedWithin := func(what, request string, answered bool) {
		t.Helper()
		c, err := net.Dial("tcp", srv.addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, request); err != nil {
			t.Fatal(err)
		}
		if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		if answered {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		start := time.Now()
		_, err = io.Copy(io.Discard, br)
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s: the server still holds the connection after %s", what, time.Since(start).Round(time.Millisecond))
		}
	}
	closedWithin("idle after a request", "GET /healthz HTTP/1.1\r\nHost: deltaflow\r\n\r\n", true)
	closedWithin("a request body that never ends", "POST /healthz HTTP/1.1\r\nHost: deltaflow\r\nContent-Length: 10\r\n\r\nab", false)
}
