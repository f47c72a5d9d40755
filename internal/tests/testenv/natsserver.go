package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSServer is a nats-server process of a test's own, with JetStream
// storing where the test says (a Tmpfs, say): unlike Private's, its store
// and limits are the test's to choose.
type NATSServer struct {
	URL  string
	t    testing.TB
	bin  string
	conf string
	cmd  *exec.Cmd
	log  *SyncBuffer
}

// NewNATSServer starts nats-server (Tool) on a free port with JetStream
// storing under storeDir, up to maxStore bytes (its max_file_store), and
// returns once JetStream answers; it stops when the test ends.
func NewNATSServer(t testing.TB, storeDir string, maxStore int64) *NATSServer {
	t.Helper()
	s := &NATSServer{t: t, bin: Tool(t, "nats-server"), conf: filepath.Join(t.TempDir(), "nats.conf")}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	conf := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream { store_dir: %q, max_file_store: %d }\n", port, storeDir, maxStore)
	if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s.URL = fmt.Sprintf("nats://127.0.0.1:%d", port)
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("--- nats-server log ---\n%s", s.log)
		}
	})
	s.start()
	return s
}

// Restart stops the server (SIGTERM) and starts it again on the same port
// with the same store, and returns once JetStream answers.
func (s *NATSServer) Restart() {
	s.t.Helper()
	s.stop()
	s.start()
}

func (s *NATSServer) start() {
	s.t.Helper()
	if s.log == nil {
		s.log = &SyncBuffer{}
	}
	s.cmd = exec.Command(s.bin, "-c", s.conf)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("testenv: start nats-server: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !s.answers() {
		if time.Now().After(deadline) {
			s.t.Fatalf("testenv: nats-server at %s: JetStream did not answer within 30s\n%s", s.URL, s.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// answers reports whether JetStream answers at s.URL.
func (s *NATSServer) answers() bool {
	nc, err := nats.Connect(s.URL, nats.Timeout(time.Second))
	if err != nil {
		return false
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err == nil
}

func (s *NATSServer) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}
