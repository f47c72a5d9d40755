package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Ping finds the topic and its partitions; a topic the brokers do not
// know is reported in TopicInfo.Err; no broker answering ends within the
// deadline as ErrUnreachable naming the connection error.
func TestPing(t *testing.T) {
	cfg := newCluster(t)
	info, err := Ping(t.Context(), cfg, nil)
	if err != nil || info.Partitions != 3 || info.Err != nil {
		t.Errorf("Ping: %+v, %v; want 3 partitions", info, err)
	}
	other := cfg
	other.Topic = "no-such-topic"
	info, err = Ping(t.Context(), other, nil)
	if err != nil || info.Err == nil || !strings.Contains(info.Err.Error(), "no-such-topic") {
		t.Errorf("Ping of a missing topic: %+v, %v", info, err)
	}

	// A broker that went away: its port refuses connections.
	gone, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	closed := gone.ListenAddrs()[0]
	gone.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = Ping(ctx, Config{Brokers: []string{closed}, Topic: topic}, nil)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), closed) {
		t.Errorf("Ping of a closed port: %v, want ErrUnreachable naming connection refused and %s", err, closed)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Ping of a closed port took %s", took)
	}
}
