package deploy_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats.go"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/messages"
	"github.com/deltaflow/deltaflow/runtime/daemon"
)

// natsRecipes are the README's nats CLI recipes for the compose stack, as
// its "Watching it with the nats CLI" section writes them; the test runs
// each (with the extra arguments a test needs) in nats-box's contexts.
var natsRecipes = struct{ sub, kvLs, kvGet, microLs, status, pause, view, purge string }{
	sub:     `nats sub 'deltaflow.*.events.>'`,
	kvLs:    `nats kv ls deltaflow_offsets`,
	kvGet:   `nats kv get deltaflow_offsets 'sensor_events.sensor-events.0'`,
	microLs: `nats micro ls`,
	status:  `nats req deltaflow.sensor_events.control.status ''`,
	pause:   `nats --context operator req deltaflow.sensor_events.control.pause ''`,
	view:    `nats --context operator stream view DELTAFLOW_DLQ_SENSOR_EVENTS`,
	purge:   `nats --context operator stream purge DELTAFLOW_DLQ_SENSOR_EVENTS`,
}

// pauseRecorder is a control service backend that records pauses.
type pauseRecorder struct{ paused atomic.Bool }

func (r *pauseRecorder) Status(context.Context) (any, error) {
	return map[string]bool{"paused": r.paused.Load()}, nil
}
func (r *pauseRecorder) Flush(context.Context) error { return nil }
func (r *pauseRecorder) Pause(context.Context, time.Duration) error {
	r.paused.Store(true)
	return nil
}
func (r *pauseRecorder) Resume(context.Context) error { r.paused.Store(false); return nil }

// serviceEnv is a compose service's environment, as KEY=value.
func serviceEnv(s types.ServiceConfig) (env []string) {
	for k, v := range s.Environment {
		if v != nil {
			env = append(env, k+"="+*v)
		}
	}
	return env
}

// The compose stack's NATS lets no anonymous client in: deltaflow connects
// as its own user with the shipped config and .env's password, and may do
// all it does; nats-box's viewer runs the README's read-only recipes but
// reads no dead letter, writes nothing and may not pause; its operator may
// pause and read and purge the DLQ, but not delete it or touch the KV
// bucket. A real nats-server runs deploy/nats/nats.conf with the
// environment compose gives it from .env.example, and the real nats CLI
// runs in the contexts deploy/nats/nats-box.sh saves.
func TestComposeNATSAuthorization(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nats-server and the nats CLI; skipped with -short")
	}
	root := scenario.RepoRoot(t)
	p, env := loadCompose(t, []string{"tools"})
	n := p.Services["nats"]
	if got := strings.Join(n.Command, " "); got != "-c /etc/nats/deltaflow.conf" {
		t.Errorf("nats command %q, want -c /etc/nats/deltaflow.conf", got)
	}
	mounted := false
	for _, v := range n.Volumes {
		mounted = mounted || (v.Target == "/etc/nats/deltaflow.conf" && v.ReadOnly && strings.HasSuffix(v.Source, filepath.Join("deploy", "nats", "nats.conf")))
	}
	if !mounted {
		t.Fatalf("nats does not mount deploy/nats/nats.conf read-only at /etc/nats/deltaflow.conf: %+v", n.Volumes)
	}

	// The shipped server config, its store moved to the test's directory.
	conf, err := os.ReadFile(filepath.Join(root, "deploy", "nats", "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	moved := strings.Replace(string(conf), "store_dir: /data", "store_dir: "+filepath.Join(dir, "js"), 1)
	if moved == string(conf) {
		t.Fatal("deploy/nats/nats.conf has no `store_dir: /data` (the nats-data volume)")
	}
	confPath := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(confPath, []byte(moved), 0o600); err != nil {
		t.Fatal(err)
	}
	port := scenario.FreePort(t)
	srv := scenario.Start(t, "nats-server", testenv.Tool(t, "nats-server"), append(serviceEnv(n), "PATH="+os.Getenv("PATH")),
		"-c", confPath, "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-m", fmt.Sprint(scenario.FreePort(t)))
	t.Cleanup(func() { _ = srv.Stop(10 * time.Second) })
	if err := scenario.WaitFor(30*time.Second, func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	}); err != nil {
		t.Fatalf("nats-server did not start\n%s", srv.Tail(2000))
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)

	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Error("an anonymous client got in")
	}

	// deltaflow, configured as in the stack: configs/deltaflow.yaml with
	// the environment of .env.
	cfg, err := daemon.Load(filepath.Join(root, "configs", "deltaflow.yaml"), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.URL = url
	ctx := t.Context()
	b, err := bridge.New(ctx, cfg.NATS, nil, bridge.WithTable(cfg.Table.Name))
	if err != nil {
		t.Fatalf("deltaflow's user: %v", err)
	}
	defer b.Close()
	ctrl := &pauseRecorder{}
	if err := b.StartControl(ctrl); err != nil {
		t.Fatal(err)
	}
	if err := b.PutOffset(ctx, cfg.Kafka.Topic, 0, bridge.OffsetRecord{Offset: 41, Version: 3, Time: time.Now()}); err != nil {
		t.Fatalf("deltaflow's user: KV put: %v", err)
	}
	letter := messages.DeadLetter{Topic: cfg.Kafka.Topic, Partition: 0, Offset: 7, Value: []byte("a-whole-hostile-record"), Reason: "not JSON"}
	if err := b.PublishDLQ(ctx, []messages.DeadLetter{letter}); err != nil {
		t.Fatalf("deltaflow's user: DLQ: %v", err)
	}

	// nats-box's entrypoint saves the CLI's contexts.
	box := p.Services["nats-box"]
	script := ""
	for _, v := range box.Volumes {
		if len(box.Entrypoint) == 2 && v.Target == box.Entrypoint[1] {
			script = v.Source
		}
	}
	if script == "" || filepath.Base(script) != "nats-box.sh" {
		t.Fatalf("nats-box's entrypoint %v does not run the mounted deploy/nats/nats-box.sh: %+v", box.Entrypoint, box.Volumes)
	}
	cli := testenv.Tool(t, "nats")
	home := t.TempDir()
	cliEnv := append(serviceEnv(box), "PATH="+filepath.Dir(cli)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "NATS_URL="+url) // the last NATS_URL wins
	command := func(timeout time.Duration, name string, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = cliEnv
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := command(30*time.Second, "sh", filepath.Join(root, "deploy", "nats", "nats-box.sh"), "true"); err != nil {
		t.Fatalf("nats-box.sh: %v\n%s", err, out)
	}
	// A recipe runs in a shell, as typed in nats-box.
	recipe := func(line string, extra ...string) (string, error) {
		t.Helper()
		return command(30*time.Second, "sh", "-c", strings.Join(append([]string{line}, extra...), " "))
	}
	ok := func(what, out string, err error, want string) {
		t.Helper()
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("%s: %v; output lacks %q:\n%s", what, err, want, out)
		}
	}
	denied := func(what string, args ...string) {
		t.Helper()
		out, err := command(30*time.Second, cli, append(args, "--timeout", "1s")...)
		if !strings.Contains(out, "Permissions Violation") {
			t.Errorf("%s was allowed (%v):\n%s", what, err, out)
		}
	}

	// The viewer, nats-box's selected context: the read-only recipes.
	subDone := make(chan struct{})
	var subOut string
	var subErr error
	go func() {
		defer close(subDone)
		subOut, subErr = recipe(natsRecipes.sub, "--count", "1")
	}()
	for published := false; !published; {
		_ = b.Publish(&bridge.LagEvent{})
		select {
		case <-subDone:
			published = true
		case <-time.After(200 * time.Millisecond):
		}
	}
	ok("viewer: "+natsRecipes.sub, subOut, subErr, "io.deltaflow.v1.lag")
	out, err := recipe(natsRecipes.kvLs)
	ok("viewer: "+natsRecipes.kvLs, out, err, "sensor_events.sensor-events.0")
	out, err = recipe(natsRecipes.kvGet)
	ok("viewer: "+natsRecipes.kvGet, out, err, `"offset":41`)
	out, err = recipe(natsRecipes.microLs)
	ok("viewer: "+natsRecipes.microLs, out, err, bridge.ServiceName)
	out, err = recipe(natsRecipes.status)
	ok("viewer: "+natsRecipes.status, out, err, `"paused":false`)
	// ... but neither the dead letters nor any write.
	dlq, kvKey := bridge.DefaultDLQStream(cfg.Table.Name), "sensor_events.sensor-events.0"
	denied("viewer: pause", "req", "deltaflow.sensor_events.control.pause", "")
	denied("viewer: a dead letter", "stream", "get", dlq, "1")
	denied("viewer: deleting the DLQ stream", "stream", "rm", "-f", dlq)
	denied("viewer: deleting an offset", "kv", "del", "-f", "deltaflow_offsets", kvKey)
	denied("viewer: writing an offset", "kv", "put", "deltaflow_offsets", kvKey, "0")
	if ctrl.paused.Load() {
		t.Error("the viewer paused deltaflow")
	}
	viewerErrs := make(chan error, 4)
	viewer, err := nats.Connect(url, nats.UserInfo("viewer", env["NATS_VIEWER_PASSWORD"]),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { viewerErrs <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer viewer.Close()
	for _, subj := range []string{"deltaflow.*.dlq.>", "_INBOX.>", ">"} {
		if _, err := viewer.Subscribe(subj, func(m *nats.Msg) { t.Errorf("the viewer received %s: %s", m.Subject, m.Data) }); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-viewerErrs:
			if !strings.Contains(err.Error(), "Permissions Violation") {
				t.Errorf("viewer subscribing %s: %v", subj, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("the viewer subscribed %s", subj)
		}
	}
	letter.Offset++
	if err := b.PublishDLQ(ctx, []messages.DeadLetter{letter}); err != nil {
		t.Fatal(err)
	}

	// The operator: control and the DLQ, but no deletion and no KV write.
	out, err = recipe(natsRecipes.pause)
	ok("operator: "+natsRecipes.pause, out, err, `"ok":true`)
	if !ctrl.paused.Load() {
		t.Error("the operator's pause did not reach deltaflow")
	}
	// stream view pages on a terminal: script(1) gives it one.
	out, err = command(30*time.Second, testenv.Tool(t, "script"), "-qec", natsRecipes.view, "/dev/null")
	ok("operator: "+natsRecipes.view, out, err, string(letter.Value))
	if strings.Contains(out, "Permissions Violation") {
		t.Errorf("operator: %s:\n%s", natsRecipes.view, out)
	}
	out, err = recipe(natsRecipes.purge, "-f")
	ok("operator: "+natsRecipes.purge, out, err, "Purged 2 messages")
	denied("operator: deleting the DLQ stream", "--context", "operator", "stream", "rm", "-f", dlq)
	denied("operator: writing an offset", "--context", "operator", "kv", "put", "deltaflow_offsets", kvKey, "0")
	if got, err := b.Offsets(ctx, cfg.Kafka.Topic); err != nil || got[0].Offset != 41 {
		t.Errorf("the offset after the refused writes: %v, %v; want 41", got, err)
	}

	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{natsRecipes.sub, natsRecipes.kvLs, natsRecipes.kvGet, natsRecipes.microLs, natsRecipes.status,
		natsRecipes.pause, natsRecipes.view, natsRecipes.purge} {
		if !strings.Contains(string(readme), "\n"+r+" ") {
			t.Errorf("README lacks the recipe %s", r)
		}
	}
}
