package kafka_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
)

// TestTLS: kafka.tls reaches a broker with a private CA and a required
// client certificate, with SASL on top (SASL_SSL); without the CA or the
// client certificate the connection is refused.
func TestTLS(t *testing.T) {
	pki := testenv.NewPKI(t, t.TempDir())
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t1"),
		kfake.EnableSASL(), kfake.Superuser(kafka.MechSCRAMSHA512, "alice", "pw"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pki.ServerCert}, ClientCAs: pki.Pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := kafka.Config{Brokers: c.ListenAddrs(), SASL: kafka.SASL{Mechanism: kafka.MechSCRAMSHA512, User: "alice", Password: "pw"},
		TLS: kafka.TLS{Enabled: true, CAFile: pki.CAFile, CertFile: pki.ClientCertFile, KeyFile: pki.ClientKeyFile}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := kafka.CreateTopic(t.Context(), cfg, "t2", 1, 1); err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	for name, tc := range map[string]kafka.TLS{
		"system CAs":     {Enabled: true, CertFile: pki.ClientCertFile, KeyFile: pki.ClientKeyFile},
		"no client cert": {Enabled: true, CAFile: pki.CAFile},
		"plaintext":      {},
	} {
		bad := cfg
		bad.TLS = tc
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		if err := kafka.CreateTopic(ctx, bad, "t3", 1, 1); err == nil {
			t.Errorf("%s: connected", name)
		}
		cancel()
	}
}
