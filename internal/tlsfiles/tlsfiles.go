// Package tlsfiles builds a client's TLS configuration from the PEM files a
// configuration section names, with errors naming the section's keys.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Files are a section's PEM files: a CA bundle to trust instead of the
// system pool, and a client certificate and key for mutual TLS.
type Files struct {
	CAFile, CertFile, KeyFile string
	// InsecureSkipVerify trusts any server certificate (opt-in by config).
	InsecureSkipVerify bool
}

// Config loads f; section ("kafka.tls") prefixes the keys errors name.
func (f Files) Config(section string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: f.InsecureSkipVerify} //nolint:gosec // opt-in by config
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s.ca_file: %w", section, err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.ca_file %s: no PEM certificates", section, f.CAFile)
		}
	}
	if f.CertFile != "" || f.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s.cert_file: %w", section, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
