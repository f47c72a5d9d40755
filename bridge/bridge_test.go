package bridge

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestEmbeddedServer(t *testing.T) {
	dir := t.TempDir()
	b := newTestBridge(t, Config{Listen: "127.0.0.1:-1", StoreDir: dir})
	if !b.Healthy() {
		t.Fatal("not healthy")
	}
	// The nats CLI's view: a TCP client sees the KV bucket and DLQ stream.
	nc := connect(t, b.ClientURL())
	js, _ := jetstream.New(nc)
	if _, err := js.KeyValue(t.Context(), DefaultKVBucket); err != nil {
		t.Fatalf("kv bucket: %v", err)
	}
	s, err := js.Stream(t.Context(), "DELTAFLOW_DLQ_SENSOR_EVENTS")
	if err != nil {
		t.Fatalf("dlq stream: %v", err)
	}
	if got := s.CachedInfo().Config.Duplicates; got != 24*time.Hour {
		t.Errorf("dlq duplicates window = %s, want 24h", got)
	}
	if mp := nc.MaxPayload(); mp != embeddedMaxPayload {
		t.Errorf("max_payload = %d, want %d", mp, embeddedMaxPayload)
	}
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); err != nil {
		t.Errorf("store dir not used: %v", err)
	}
}

func TestEmbeddedServerRequiresConfiguredCredentials(t *testing.T) {
	b := newTestBridge(t, Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir(), User: "alice", Password: "pw"})
	if _, err := nats.Connect(b.ClientURL()); err == nil {
		t.Fatal("anonymous client accepted by an embedded server with credentials")
	}
	connect(t, b.ClientURL(), nats.UserInfo("alice", "pw"))
}

func TestSetupIsIdempotent(t *testing.T) {
	ns := runServer(t, testServerOpts(t))
	cfg := Config{URL: ns.ClientURL()}
	a := newTestBridge(t, cfg)
	b := newTestBridge(t, cfg) // a second instance (or a restart) of the same table
	if err := b.PutOffset(t.Context(), "x", 0, OffsetRecord{Offset: 1}); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Offsets(t.Context(), "x"); err != nil || got[0].Offset != 1 {
		t.Fatalf("Offsets = %v, %v", got, err)
	}
}

func TestNewRequiresTable(t *testing.T) {
	_, err := New(t.Context(), Config{}, nil)
	if !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("err = %v, want ErrInvalidOption", err)
	}
}

func TestAuthUserPassword(t *testing.T) {
	opts := testServerOpts(t)
	opts.Username, opts.Password = "alice", "pw"
	ns := runServer(t, opts)
	if _, err := New(t.Context(), Config{URL: ns.ClientURL(), User: "alice", Password: "nope"}, nil, WithTable(testTable)); err == nil {
		t.Fatal("wrong password accepted")
	}
	b := newTestBridge(t, Config{URL: ns.ClientURL(), User: "alice", Password: "pw"})
	if !b.Healthy() {
		t.Fatal("not healthy")
	}
}

func TestAuthToken(t *testing.T) {
	opts := testServerOpts(t)
	opts.Authorization = "tok"
	ns := runServer(t, opts)
	if _, err := New(t.Context(), Config{URL: ns.ClientURL(), Token: "bad"}, nil, WithTable(testTable)); err == nil {
		t.Fatal("wrong token accepted")
	}
	newTestBridge(t, Config{URL: ns.ClientURL(), Token: "tok"})
}

func TestAuthTLSWithClientCert(t *testing.T) {
	dir := t.TempDir()
	pki := newTestPKI(t, dir)
	opts := testServerOpts(t)
	opts.TLS, opts.TLSVerify = true, true
	opts.TLSConfig = &tls.Config{
		Certificates: []tls.Certificate{pki.serverCert},
		ClientCAs:    pki.pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}
	opts.TLSTimeout = 2
	ns := runServer(t, opts)
	url := strings.Replace(ns.ClientURL(), "nats://", "tls://", 1)

	// Without a client certificate the server refuses us.
	if _, err := New(t.Context(), Config{URL: url, TLS: TLSConfig{CAFile: pki.caFile}}, nil, WithTable(testTable)); err == nil {
		t.Fatal("connected without a client certificate")
	}
	b := newTestBridge(t, Config{URL: url, TLS: TLSConfig{CAFile: pki.caFile, CertFile: pki.clientCert, KeyFile: pki.clientKey}})
	if !b.Healthy() || !b.nc.TLSRequired() {
		t.Fatal("not connected over TLS")
	}
}

type testPKI struct {
	pool                          *x509.CertPool
	serverCert                    tls.Certificate
	caFile, clientCert, clientKey string
}

// newTestPKI makes a throwaway CA, a server certificate for 127.0.0.1 and a
// client certificate, writing the client side's PEM files under dir.
func newTestPKI(t *testing.T, dir string) testPKI {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := int64(0)
	template := func(cn string) *x509.Certificate {
		serial++
		return &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(time.Hour),
		}
	}
	caKey := newKey()
	caTmpl := template("deltaflow test CA")
	caTmpl.IsCA, caTmpl.BasicConstraintsValid = true, true
	caTmpl.KeyUsage = x509.KeyUsageCertSign
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(cn string, usage x509.ExtKeyUsage, ip net.IP) ([]byte, []byte) {
		k := newKey()
		tmpl := template(cn)
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		if ip != nil {
			tmpl.IPAddresses = []net.IP{ip}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	}
	p := testPKI{pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	sc, sk := issue("server", x509.ExtKeyUsageServerAuth, net.ParseIP("127.0.0.1"))
	if p.serverCert, err = tls.X509KeyPair(sc, sk); err != nil {
		t.Fatal(err)
	}
	cc, ck := issue("client", x509.ExtKeyUsageClientAuth, nil)
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	p.caFile = write("ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	p.clientCert = write("client.pem", cc)
	p.clientKey = write("client-key.pem", ck)
	return p
}

func TestIsTransient(t *testing.T) {
	apiUnavailable := &jetstream.APIError{Code: 503, Description: "jetstream unavailable"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("put offset k: %w", nats.ErrTimeout), true},
		{fmt.Errorf("x: %w", nats.ErrNoResponders), true},
		{nats.ErrDisconnected, true},
		{nats.ErrConnectionReconnecting, true},
		{context.DeadlineExceeded, true},
		{jetstream.ErrJetStreamNotEnabled, true},
		{fmt.Errorf("x: %w", apiUnavailable), true},
		{fmt.Errorf("%w: 1 of 1: %w", ErrDLQIncomplete, jetstream.ErrAsyncPublishTimeout), true},
		{context.Canceled, false},
		{nats.ErrConnectionClosed, false},
		{nats.ErrAuthorization, false},
		{nats.ErrMaxPayload, false},
		{jetstream.ErrKeyRevisionMismatch, false},
		{&jetstream.APIError{Code: 400, Description: "bad request"}, false},
		{ErrInvalidConfig, false},
	} {
		if got := IsTransient(tc.err); got != tc.want {
			t.Errorf("IsTransient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestImports keeps the bridge free of the actor system, the Kafka client
// and the Delta library: actors reach NATS only through this package.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{"github.com/asynkron/protoactor-go", "github.com/twmb/franz-go", "github.com/deltaflow/deltaflow/delta", "github.com/deltaflow/deltaflow/actors"} {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("bridge depends on %s", dep)
			}
		}
	}
}
