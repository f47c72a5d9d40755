package kafka

import (
	"strings"
	"testing"
)

// SASL PLAIN sends the password as is: without TLS, anyone on the path to
// the brokers reads it. It is refused, naming the keys that fix it, unless
// kafka.sasl.allow_plain_without_tls says so; SCRAM and PLAIN over TLS are
// fine.
func TestPlainWithoutTLSRefused(t *testing.T) {
	plain := SASL{Mechanism: "plain", User: "alice", Password: "pw"}
	err := Config{SASL: plain}.Validate()
	if err == nil || !strings.HasPrefix(err.Error(), "kafka.sasl.mechanism: PLAIN without TLS") ||
		!strings.Contains(err.Error(), "kafka.tls.enabled") || !strings.Contains(err.Error(), "kafka.sasl.allow_plain_without_tls") {
		t.Errorf("PLAIN without TLS: %v, want a refusal naming the keys", err)
	}
	if _, err := NewAdmin(Config{Brokers: []string{"127.0.0.1:1"}, SASL: plain}, nil); err == nil {
		t.Error("an admin client for PLAIN without TLS was made")
	}
	allowed := plain
	allowed.AllowPlainWithoutTLS = true
	for _, c := range []Config{
		{SASL: allowed},
		{SASL: plain, TLS: TLS{Enabled: true}},
		{SASL: SASL{Mechanism: MechSCRAMSHA512, User: "alice", Password: "pw"}},
	} {
		if err := c.Validate(); err != nil {
			t.Errorf("%v: %v", c, err)
		}
	}
}
