package daemon

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/deltaflow/deltaflow/bridge"
)

// A pause by the control service ends by itself after control.max_pause:
// deltaflow_paused is 1 meanwhile (and the status says until when), a
// pause event goes out when it begins and a resume event by max_pause when
// it ends, and the records produced meanwhile are committed after it.
func TestPauseEndsAfterMaxPause(t *testing.T) {
	cluster := newCluster(t)
	brokers := cluster.ListenAddrs()
	produce(t, brokers, 200, 4)
	cfg := testConfig(t, brokers)
	cfg.Flush.Interval = 200 * time.Millisecond
	cfg.NATS.Listen = freeAddr(t)
	cfg.Control.MaxPause = 3 * time.Second
	base := startRun(t, cfg)
	waitUntil(t, "/readyz", 30*time.Second, func() bool { code, _ := httpGet(t, base+"/readyz"); return code == http.StatusOK })
	waitUntil(t, "the first records committed", 30*time.Second, func() bool {
		n, _ := tableRecords(t, cfg.Table.URI)
		return n == 200
	})

	nc, err := nats.Connect("nats://" + cfg.NATS.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	events, err := nc.SubscribeSync(bridge.EventSubject(cfg.Table.Name, bridge.KindPause))
	if err != nil {
		t.Fatal(err)
	}
	group := bridge.ControlGroup(cfg.Table.Name)
	if m, err := nc.Request(group+"."+bridge.ControlPause, nil, 30*time.Second); err != nil || !strings.Contains(string(m.Data), `"ok":true`) {
		t.Fatalf("pause: %v", err)
	}
	pausedAt := time.Now()
	var ev bridge.PauseEvent
	next := func() {
		t.Helper()
		m, err := events.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("pause event: %v", err)
		}
		ev = bridge.PauseEvent{}
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
	}
	next()
	if ev.Action != bridge.Paused || ev.By != bridge.ByControl || ev.Until.Sub(pausedAt) > cfg.Control.MaxPause {
		t.Errorf("event when pausing: %+v", ev)
	}
	if _, body := httpGet(t, base+"/metrics"); !strings.Contains(body, "deltaflow_paused 1\n") {
		t.Error("deltaflow_paused is not 1 while paused")
	}
	m, err := nc.Request(group+"."+bridge.ControlStatus, nil, 30*time.Second)
	if err != nil || !strings.Contains(string(m.Data), `"paused_until"`) {
		t.Errorf("status while paused: %v %s; want paused_until", err, m.Data)
	}
	// Pausing again does not extend the pause.
	if _, err := nc.Request(group+"."+bridge.ControlPause, nil, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	produce(t, brokers, 300, 5)
	time.Sleep(time.Second)
	if n, _ := tableRecords(t, cfg.Table.URI); n != 200 {
		t.Fatalf("%d records in the table while paused, want 200", n)
	}

	next()
	resumed := time.Since(pausedAt)
	if ev.Action != bridge.Resumed || ev.By != bridge.ByMaxPause || ev.PausedMS < cfg.Control.MaxPause.Milliseconds() {
		t.Errorf("event when the pause ran out: %+v", ev)
	}
	if resumed > cfg.Control.MaxPause+5*time.Second {
		t.Errorf("resumed %s after the pause; control.max_pause is %s", resumed, cfg.Control.MaxPause)
	}
	waitUntil(t, "the records produced while paused committed", 30*time.Second, func() bool {
		n, _ := tableRecords(t, cfg.Table.URI)
		return n == 500
	})
	if code, body := httpGet(t, base+"/metrics"); code != http.StatusOK || !strings.Contains(body, "deltaflow_paused 0\n") {
		t.Error("deltaflow_paused is not 0 after the pause ran out")
	}

	// A pause for a duration ends after it; one past max_pause is refused.
	if m, err := nc.Request(group+"."+bridge.ControlPause, []byte(`{"duration":"10s"}`), 30*time.Second); err != nil ||
		m.Header.Get(micro.ErrorCodeHeader) != "400" || !strings.Contains(m.Header.Get(micro.ErrorHeader), "control.max_pause") {
		t.Errorf("a pause past max_pause: %v, headers %v; want 400 naming control.max_pause", err, m.Header)
	}
	if m, err := nc.Request(group+"."+bridge.ControlPause, []byte(`{"duration":"1s"}`), 30*time.Second); err != nil || !strings.Contains(string(m.Data), `"ok":true`) {
		t.Fatalf("pause for 1s: %v", err)
	}
	pausedAt = time.Now()
	next()
	if ev.Action != bridge.Paused || ev.Until.Sub(pausedAt) > time.Second {
		t.Errorf("event when pausing for 1s: %+v", ev)
	}
	next()
	if resumed := time.Since(pausedAt); ev.Action != bridge.Resumed || ev.By != bridge.ByDuration || resumed > 6*time.Second {
		t.Errorf("event when the 1s pause ran out, %s after it: %+v", resumed, ev)
	}
}
