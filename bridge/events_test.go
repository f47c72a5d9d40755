package bridge

import (
	"encoding/json"
	"testing"
	"time"
)

func TestEventsReachSubscribers(t *testing.T) {
	b, ns := externalBridge(t)
	nc := connect(t, ns.ClientURL())
	sub, err := nc.SubscribeSync(Root)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	commit := &CommitEvent{Version: 7, Epoch: 3, Files: 2, Rows: 100, Bytes: 4096, Topic: "sensor-events", Partitions: map[int32]int64{0: 41, 1: 9}, DurationMS: 12}
	events := []Event{commit, &ActorEvent{Actor: "committer", Action: ActorRestarted, Reason: "boom", Restarts: 1}}
	for _, e := range eventCatalogue[2:] {
		events = append(events, e.ev)
	}
	for _, ev := range events {
		if err := b.Publish(ev); err != nil {
			t.Fatal(err)
		}
	}
	ids := map[string]bool{}
	for _, ev := range events {
		msg, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("waiting for %s: %v", ev.Kind(), err)
		}
		if want := "deltaflow.sensor_events.events." + string(ev.Kind()); msg.Subject != want {
			t.Errorf("subject = %s, want %s", msg.Subject, want)
		}
		var h Header
		if err := json.Unmarshal(msg.Data, &h); err != nil {
			t.Fatal(err)
		}
		if h.Type != "io.deltaflow.v1."+string(ev.Kind()) || h.Table != testTable || h.ID == "" || time.Since(h.Time) > time.Minute {
			t.Errorf("header = %+v", h)
		}
		if ids[h.ID] {
			t.Errorf("duplicate id %s", h.ID)
		}
		ids[h.ID] = true
		if ev.Kind() == KindCommit {
			var got CommitEvent
			if err := json.Unmarshal(msg.Data, &got); err != nil {
				t.Fatal(err)
			}
			if got.Version != 7 || got.Partitions[1] != 9 || got.DurationMS != 12 {
				t.Errorf("commit body = %s", msg.Data)
			}
		}
	}
}

// TestPublishWhileDisconnected: events never block ingestion; nats.go
// buffers them while the server is away.
func TestPublishWhileDisconnected(t *testing.T) {
	b, ns := externalBridge(t, fastReconnect)
	stopEmbedded(ns)
	waitFor(t, "disconnect", func() bool { return !b.Healthy() })
	start := time.Now()
	for range 100 {
		if err := b.Publish(&LagEvent{Topic: "t", Total: 1}); err != nil {
			t.Fatalf("publish while disconnected: %v", err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("publishing while disconnected took %s", d)
	}
}
