package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a throwaway CA with a server certificate for 127.0.0.1 and a
// client certificate, for TLS tests against servers started by the test.
type PKI struct {
	Pool       *x509.CertPool  // the CA
	ServerCert tls.Certificate // for 127.0.0.1
	// PEM files under the directory given to NewPKI.
	CAFile, ServerCertFile, ServerKeyFile, ClientCertFile, ClientKeyFile string
}

// NewPKI makes a PKI valid for an hour and writes its PEM files (ca.pem,
// server.pem, server-key.pem, client.pem, client-key.pem) under dir.
func NewPKI(t testing.TB, dir string) PKI {
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
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	p := PKI{Pool: x509.NewCertPool()}
	p.Pool.AddCert(ca)
	sc, sk := issue("server", x509.ExtKeyUsageServerAuth, net.ParseIP("127.0.0.1"))
	if p.ServerCert, err = tls.X509KeyPair(sc, sk); err != nil {
		t.Fatal(err)
	}
	cc, ck := issue("client", x509.ExtKeyUsageClientAuth, nil)
	p.CAFile = write("ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	p.ServerCertFile, p.ServerKeyFile = write("server.pem", sc), write("server-key.pem", sk)
	p.ClientCertFile, p.ClientKeyFile = write("client.pem", cc), write("client-key.pem", ck)
	return p
}
