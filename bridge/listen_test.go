package bridge

import (
	"errors"
	"strings"
	"testing"

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
