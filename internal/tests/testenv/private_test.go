package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A private server stops (refusing connections) and comes back on the same
// address with its data: a KV value written before the outage is read after.
func TestPrivateServersRestart(t *testing.T) {
	p := PrivateServers(t, "nats")
	url := p.NATS()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	kvOf := func() jetstream.KeyValue {
		kv, err := JetStream(t, url).CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "private_restart"})
		if err != nil {
			t.Fatal(err)
		}
		return kv
	}
	if _, err := kvOf().PutString(ctx, "k", "before"); err != nil {
		t.Fatal(err)
	}

	p.Stop("nats")
	if nc, err := nats.Connect(url, nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Fatalf("connected to %s while it is stopped", url)
	}
	p.Start("nats")
	kv := kvOf()
	e, err := kv.Get(ctx, "k")
	if err != nil || string(e.Value()) != "before" {
		t.Fatalf("after restart: get k = %v, %v; want the value written before", e, err)
	}
}

func TestParseEnv(t *testing.T) {
	env := parseEnv([]byte("export A=1\nexport B=x=y\n\nC=3\nnot a line\n"))
	if env["A"] != "1" || env["B"] != "x=y" || env["C"] != "3" || len(env) != 3 {
		t.Errorf("parseEnv = %v", env)
	}
}
