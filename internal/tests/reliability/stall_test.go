package reliability

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/internal/failpoint"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
)

// TestStallWatchdogRestarts wedges a Parquet upload forever (the upload
// failpoint in hang mode: the PUT's body never yields its second half, and
// the goroutine ignores its context), so no epoch can commit while records
// wait. The stall watchdog must say so on /healthz, publish a `stalled`
// event, record its exit in the KV bucket and exit non-zero; the restarted
// process (what `restart: unless-stopped` does) then commits every record
// exactly once.
func TestStallWatchdogRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers; skipped with -short")
	}
	r := newCrashRig(t, "stall", 3, map[string]any{
		"kafka":    map[string]any{"instance_id": "deltaflow-stall"},
		"flush":    map[string]any{"interval": "1s"},
		"watchdog": map[string]any{"stall_intervals": 5, "grace": "2s", "restart_backoff": "5s", "restart_backoff_max": "1m"},
	}, "failpoints")

	nc, err := nats.Connect(r.servers.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	events := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe(bridge.EventSubject(r.table, bridge.KindStalled), events)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	producer := r.produce(3000, 300)
	addr := "127.0.0.1:" + strconv.Itoa(scenario.FreePort(t))
	env := append(r.servers.Env(r.topic, r.group, r.uri, addr), failpoint.Env+"="+failpoint.Upload+"=1:hang")
	wedged := scenario.Start(t, "wedged", r.bin, env, "run", "--config", r.config)

	healthz := func() (int, string) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	var code int
	var body string
	if err := scenario.WaitFor(2*time.Minute, func() bool {
		code, body = healthz()
		return code == http.StatusServiceUnavailable || !wedged.Running()
	}); err != nil || code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "stalled: ") {
		t.Fatalf("/healthz never reported the stall (last %d %q)\n%s", code, body, wedged.Tail(6000))
	}
	t.Logf("/healthz: %d %s", code, strings.TrimSpace(body))
	if err := scenario.WaitFor(time.Minute, func() bool { return !wedged.Running() }); err != nil {
		t.Fatalf("the wedged process did not exit\n%s", wedged.Tail(6000))
	}
	if err, _ := wedged.Exited(); err == nil {
		t.Fatalf("the wedged process exited 0; want non-zero for the restart policy\n%s", wedged.Tail(6000))
	}
	if !strings.Contains(wedged.Log.String(), "failpoint upload hit 1: hanging") {
		t.Fatalf("the upload never hung: the scenario proves nothing\n%s", wedged.Tail(6000))
	}

	// The events: the stall, then the exit over it.
	var seen []bridge.StalledEvent
	for exiting := false; !exiting; {
		select {
		case m := <-events:
			var ev bridge.StalledEvent
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				t.Fatal(err)
			}
			seen = append(seen, ev)
			exiting = ev.Exiting
		case <-time.After(10 * time.Second):
			t.Fatalf("stalled events %+v: none says exiting", seen)
		}
	}
	if first := seen[0]; first.Uncommitted <= 0 || first.Reason == "" || first.Since.IsZero() {
		t.Errorf("stalled event %+v: want the waiting records, a reason and a start", first)
	}

	// The exit is remembered, for the next process's restart backoff.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), bridge.DefaultKVBucket)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(t.Context(), bridge.WatchdogKey(r.table))
	if err != nil {
		t.Fatalf("no watchdog record in the KV bucket: %v", err)
	}
	var rec bridge.WatchdogRecord
	if err := json.Unmarshal(entry.Value(), &rec); err != nil || len(rec.Exits) != 1 {
		t.Fatalf("watchdog record %s (%v); want one exit", entry.Value(), err)
	}

	// The restart policy starts a fresh process; the upload no longer hangs.
	restarted := r.run("restarted")
	if err := scenario.WaitFor(time.Minute, func() bool { return !producer.Running() }); err != nil {
		t.Fatalf("producer still running\n%s", producer.Tail(2000))
	}
	r.waitCaughtUp(2*time.Minute, restarted)
	if err := restarted.Stop(30 * time.Second); err != nil {
		t.Fatalf("restarted process: %v\n%s", err, restarted.Tail(6000))
	}
	if strings.Contains(restarted.Log.String(), "watchdog: stalled") {
		t.Errorf("the restarted process saw a stall too\n%s", restarted.Tail(6000))
	}
	r.account()
}

// TestSIGTERMWithWedgedUpload: a SIGTERM while an upload never finishes (the
// upload failpoint in hang mode, a store that stopped answering) gives the
// final commit the stop timeout and then gives it up: `run` exits 3, not 0
// (records were read and not committed) and not 1 (nothing failed: nothing
// is lost), within docker stop's 10 s, saying so; the next process commits
// every record exactly once.
func TestSIGTERMWithWedgedUpload(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers; skipped with -short")
	}
	r := newCrashRig(t, "sigterm", 3, map[string]any{"flush": map[string]any{"interval": "1s"}}, "failpoints")
	producer := r.produce(3000, 1000)
	wedged := r.run("wedged", failpoint.Env+"="+failpoint.Upload+"=1:hang")
	if err := scenario.WaitFor(2*time.Minute, func() bool {
		return strings.Contains(wedged.Log.String(), "failpoint upload hit 1: hanging") || !wedged.Running()
	}); err != nil || !wedged.Running() {
		t.Fatalf("the upload never hung: the scenario proves nothing\n%s", wedged.Tail(6000))
	}
	start := time.Now()
	err := wedged.Stop(30 * time.Second)
	t.Logf("SIGTERM → exit in %s: %v", time.Since(start).Round(time.Millisecond), err)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("exit %v after SIGTERM with an upload wedged; want status 3\n%s", err, wedged.Tail(6000))
	}
	if !strings.Contains(wedged.Log.String(), "not committed within the stop timeout (8s)") {
		t.Errorf("the log does not say the final commit was given up at the stop timeout\n%s", wedged.Tail(6000))
	}

	if err := scenario.WaitFor(time.Minute, func() bool { return !producer.Running() }); err != nil {
		t.Fatalf("the producer did not finish\n%s", producer.Tail(4000))
	}
	next := r.run("next")
	r.waitCaughtUp(2*time.Minute, next)
	if err := next.Stop(30 * time.Second); err != nil {
		t.Fatalf("a SIGTERM with nothing left to commit: %v; want exit 0\n%s", err, next.Tail(6000))
	}
	r.account()
}
