package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

type fakeController struct {
	calls  atomic.Int32
	paused atomic.Bool
	pause  atomic.Int64 // the duration of the last pause
	err    error
}

func (f *fakeController) Status(context.Context) (any, error) {
	f.calls.Add(1)
	return map[string]any{"version": 7, "paused": f.paused.Load()}, f.err
}

func (f *fakeController) Flush(context.Context) error { f.calls.Add(1); return f.err }

func (f *fakeController) Pause(_ context.Context, d time.Duration) error {
	f.calls.Add(1)
	f.paused.Store(true)
	f.pause.Store(int64(d))
	return f.err
}

func (f *fakeController) Resume(context.Context) error {
	f.calls.Add(1)
	f.paused.Store(false)
	return f.err
}

func request(t *testing.T, nc *nats.Conn, subject string) *nats.Msg {
	t.Helper()
	msg, err := nc.Request(subject, nil, 5*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return msg
}

func TestControlEndpoints(t *testing.T) {
	b, ns := externalBridge(t, WithVersion("1.2.3"))
	ctrl := &fakeController{}
	if err := b.StartControl(ctrl); err != nil {
		t.Fatal(err)
	}
	if err := b.StartControl(ctrl); !errors.Is(err, ErrControlStarted) {
		t.Fatalf("second StartControl = %v", err)
	}
	nc := connect(t, ns.ClientURL())
	group := "deltaflow.sensor_events.control."

	if got := string(request(t, nc, group+"pause").Data); got != `{"ok":true}` {
		t.Errorf("pause = %s", got)
	}
	var status map[string]any
	if err := json.Unmarshal(request(t, nc, group+"status").Data, &status); err != nil || status["paused"] != true {
		t.Errorf("status = %v, %v", status, err)
	}
	request(t, nc, group+"resume")
	request(t, nc, group+"flush")
	if n := ctrl.calls.Load(); n != 4 {
		t.Errorf("controller calls = %d, want 4", n)
	}

	// Errors come back as micro errors.
	ctrl.err = errors.New("committer\nbusy")
	m := request(t, nc, group+"flush")
	if m.Header.Get(micro.ErrorCodeHeader) != "500" || m.Header.Get(micro.ErrorHeader) != "committer busy" {
		t.Errorf("error headers = %v", m.Header)
	}

	// Discovery, as `nats micro ls` / `nats micro info` do it.
	var ping micro.Ping
	if err := json.Unmarshal(request(t, nc, "$SRV.PING.deltaflow").Data, &ping); err != nil {
		t.Fatal(err)
	}
	if ping.Name != ServiceName || ping.Version != "1.2.3" || ping.Metadata["table"] != testTable {
		t.Errorf("ping = %+v", ping)
	}
	var info micro.Info
	if err := json.Unmarshal(request(t, nc, "$SRV.INFO.deltaflow").Data, &info); err != nil {
		t.Fatal(err)
	}
	subjects := map[string]bool{}
	for _, ep := range info.Endpoints {
		subjects[ep.Subject] = true
	}
	for _, ep := range []string{"status", "flush", "pause", "resume"} {
		if !subjects[group+ep] {
			t.Errorf("endpoint %s missing from info %+v", ep, info.Endpoints)
		}
	}
	if info.Description == "" {
		t.Error("no description")
	}
}

func TestControlHonoursAuthorization(t *testing.T) {
	opts := testServerOpts(t)
	opts.Users = []*server.User{
		{Username: "deltaflow", Password: "pw"}, // everything
		{Username: "viewer", Password: "pw", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{
				Allow: []string{"$SRV.>"},
				Deny:  []string{ControlSubject},
			},
			Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>", "deltaflow.*.events.>"}},
		}},
	}
	ns := runServer(t, opts)
	b := newTestBridge(t, Config{URL: ns.ClientURL(), User: "deltaflow", Password: "pw"})
	ctrl := &fakeController{}
	if err := b.StartControl(ctrl); err != nil {
		t.Fatal(err)
	}
	viewer := connect(t, ns.ClientURL(), nats.UserInfo("viewer", "pw"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	// The viewer may discover the service...
	request(t, viewer, "$SRV.PING.deltaflow")
	// ...but not call it.
	if _, err := viewer.Request("deltaflow.sensor_events.control.pause", nil, 500*time.Millisecond); err == nil {
		t.Fatal("viewer paused the table")
	}
	if ctrl.calls.Load() != 0 || ctrl.paused.Load() {
		t.Fatal("controller called for an unauthorized request")
	}
	// A user with permission can.
	admin := connect(t, ns.ClientURL(), nats.UserInfo("deltaflow", "pw"))
	request(t, admin, "deltaflow.sensor_events.control.pause")
	if !ctrl.paused.Load() {
		t.Fatal("authorized pause not applied")
	}
}

// TestControlRefusesWhatItDoesNotUnderstand: a pause takes an empty body
// (control.max_pause) or {"duration": "<Go duration>"}, and the other
// endpoints an empty one; anything else is answered 400 naming what is
// wrong, and the controller is not called (a body that did not parse
// paused for an hour).
func TestControlRefusesWhatItDoesNotUnderstand(t *testing.T) {
	b, ns := externalBridge(t)
	ctrl := &fakeController{}
	if err := b.StartControl(ctrl); err != nil {
		t.Fatal(err)
	}
	nc := connect(t, ns.ClientURL())
	group := "deltaflow.sensor_events.control."
	for _, tc := range []struct {
		endpoint, body string
		pause          time.Duration // the pause asked, when accepted
		refused        string        // the error's text, when refused
	}{
		{"pause", "", 0, ""},
		{"pause", " {} ", 0, ""},
		{"pause", `{"duration": "30s"}`, 30 * time.Second, ""},
		{"pause", "garbage", 0, `pause: the body is not empty or {"duration": "30s"}`},
		{"pause", `{"duration": 30}`, 0, `pause: the body is not empty or {"duration": "30s"}`},
		{"pause", `{"durations": "30s"}`, 0, `unknown field "durations"`},
		{"pause", `{"duration": "half an hour"}`, 0, `pause: duration "half an hour" is not a duration`},
		{"pause", `{"duration": "-5s"}`, 0, `pause: duration -5s must be positive`},
		{"flush", "now", 0, `flush: takes no body, got "now"`},
		{"resume", `{"x": 1}`, 0, `resume: takes no body`},
		{"status", "{}", 0, ""},
	} {
		before := ctrl.calls.Load()
		m, err := nc.Request(group+tc.endpoint, []byte(tc.body), 5*time.Second)
		if err != nil {
			t.Fatalf("%s %q: %v", tc.endpoint, tc.body, err)
		}
		code, text := m.Header.Get(micro.ErrorCodeHeader), m.Header.Get(micro.ErrorHeader)
		called := ctrl.calls.Load() != before
		switch {
		case tc.refused != "" && (code != "400" || !strings.Contains(text, tc.refused) || called):
			t.Errorf("%s %q: code %q, error %q, controller called %v; want 400 saying %q and no call", tc.endpoint, tc.body, code, text, called, tc.refused)
		case tc.refused == "" && (code != "" || !called):
			t.Errorf("%s %q: code %q, error %q, controller called %v; want it done", tc.endpoint, tc.body, code, text, called)
		case tc.refused == "" && tc.endpoint == "pause" && time.Duration(ctrl.pause.Load()) != tc.pause:
			t.Errorf("pause %q paused for %s, want %s", tc.body, time.Duration(ctrl.pause.Load()), tc.pause)
		}
	}
	// What the controller refuses as a bad request is a 400 too.
	ctrl.err = fmt.Errorf("%w: over control.max_pause", ErrBadRequest)
	if m := request(t, nc, group+"pause"); m.Header.Get(micro.ErrorCodeHeader) != "400" {
		t.Errorf("a bad request the controller refused: headers %v, want 400", m.Header)
	}
}
