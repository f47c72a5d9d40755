package reliability

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/nats-io/nats.go"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/internal/secret"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// securitySecret is a distinctive secret value: if any output holds it,
// the secret leaked.
func securitySecret(kind string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return kind + "-" + hex.EncodeToString(b[:])
}

// securityLeaks collects everything deltaflow showed the outside world and
// checks it for the secrets.
type securityLeaks struct {
	mu      sync.Mutex
	secrets []string
	seen    map[string]int // where → bytes checked
	found   []string
}

func (l *securityLeaks) check(where, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]int{}
	}
	l.seen[where] += len(text)
	for _, s := range l.secrets {
		if i := strings.Index(text, s); i >= 0 {
			lo, hi := max(0, i-120), min(len(text), i+len(s)+40)
			l.found = append(l.found, fmt.Sprintf("%s shows secret %q: …%s…", where, s, text[lo:hi]))
		}
	}
}

func (l *securityLeaks) report(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	total := 0
	for _, n := range l.seen {
		total += n
	}
	t.Logf("checked %d bytes from %d places for %d secrets: %d leaks", total, len(l.seen), len(l.secrets), len(l.found))
	for _, f := range l.found {
		t.Error(f)
	}
}

// securityNATS runs a nats-server with JetStream whose authorization has
// two users: deltaflow (everything) and viewer (may discover services and
// watch events but not call the control endpoints), with extra appended to
// its configuration. It returns the URL.
func securityNATS(t *testing.T, password, extra string) string {
	t.Helper()
	bin := testenv.Tool(t, "nats-server")
	port := scenario.FreePort(t)
	dir := t.TempDir()
	conf := fmt.Sprintf(`listen: "127.0.0.1:%d"
jetstream { store_dir: %q }
authorization {
  users = [
    { user: "deltaflow", password: %q }
    { user: "viewer", password: "viewer-pw", permissions: {
        publish: { allow: ["$SRV.>"], deny: [%q] }
        subscribe: { allow: ["_INBOX.>", "deltaflow.*.events.>"] } } }
  ]
}
%s
`, port, filepath.Join(dir, "js"), password, bridge.ControlSubject, extra)
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	d := scenario.Start(t, "nats-server", bin, []string{"PATH=" + os.Getenv("PATH")}, "-c", path)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := scenario.WaitFor(30*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}); err != nil {
		t.Fatalf("nats-server with authorization did not start\n%s", d.Tail(2000))
	}
	t.Cleanup(func() { _ = d.Stop(10 * time.Second) })
	return "nats://" + addr
}

// securityCommand runs a deltaflow command to completion and returns its
// combined output and error.
func securityCommand(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, scenario.Binary(t), args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// securityGet returns the status and body of an HTTP GET ("" on error).
func securityGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestSecretsNeverShown runs deltaflow with distinctive secrets — the MinIO
// secret key, a NATS password, a NATS token, a password in the NATS URL, a
// Kafka SASL password — on a working setup and on failing ones (wrong keys,
// wrong endpoints, refused authentication, a config error), at debug log
// level, and checks that no secret appears in what it shows: stdout and
// stderr, every NATS message it publishes, /metrics, /readyz, and the
// output of the CLI commands. On the working setup it also checks that the
// control service honours the server's authorization and that the HTTP
// endpoints listen only on the configured address.
func TestSecretsNeverShown(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers; skipped with -short")
	}
	brokers := testenv.Kafka(t)
	s3 := testenv.MinIO(t)
	bin := scenario.Binary(t)
	natsPW := securitySecret("natspw")
	wrong := map[string]string{
		"minio":     securitySecret("miniokey"),
		"nats":      securitySecret("natswrongpw"),
		"token":     securitySecret("natstoken"),
		"url":       securitySecret("urlpw"),
		"sasl":      securitySecret("saslpw"),
		"configerr": securitySecret("configpw"),
	}
	leaks := &securityLeaks{secrets: []string{string(s3.SecretKey), natsPW}}
	for _, s := range wrong {
		leaks.secrets = append(leaks.secrets, s)
	}
	natsURL := securityNATS(t, natsPW, "")
	adminURL := strings.Replace(natsURL, "nats://", "nats://deltaflow:"+natsPW+"@", 1)

	// Every message on deltaflow.> while the daemons run.
	admin, err := nats.Connect(natsURL, nats.UserInfo("deltaflow", natsPW))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var events int
	var eventsMu sync.Mutex
	sub, err := admin.Subscribe("deltaflow.>", func(m *nats.Msg) {
		eventsMu.Lock()
		events++
		eventsMu.Unlock()
		leaks.check("nats message "+m.Subject, m.Subject+" "+fmt.Sprint(m.Header)+" "+string(m.Data))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	srv := scenario.Servers{Brokers: brokers, NATSURL: natsURL, S3: s3}
	topic := scenario.Unique("secrets")
	table := scenario.Unique("secrets")
	uri := "s3://" + s3.Bucket + "/secrets"
	// Over the loopback but not 127.0.0.1: the endpoints must bind where
	// configured, not everywhere.
	port := scenario.FreePort(t)
	httpAddr := fmt.Sprintf("127.0.0.2:%d", port)
	env := srv.Env(topic, "g-"+table, uri, httpAddr)
	cfg := scenario.WriteConfig(t, table, map[string]any{
		"nats": map[string]any{"user": "deltaflow", "password": natsPW},
		"log":  map[string]any{"level": "debug"},
	})

	produce := func(n int) {
		t.Helper()
		out, err := securityCommand(t, env, "produce", "--topic", topic, "--partitions", "2", "--count", fmt.Sprint(n),
			"--bad-ratio", "0.05", "--seed", fmt.Sprint(time.Now().UnixNano()%1000))
		leaks.check("deltaflow produce", out)
		if err != nil {
			t.Fatalf("produce: %v\n%s", err, out)
		}
	}
	produce(500)
	d := scenario.Start(t, "deltaflow", bin, env, "run", "--config", cfg)
	src := scenario.Source{Brokers: brokers, Topic: topic, NATSURL: adminURL, Table: table}
	if src.Store, err = storage.NewS3(storage.S3Config{Endpoint: s3.Endpoint, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey,
		Bucket: s3.Bucket, Prefix: "secrets"}); err != nil {
		t.Fatal(err)
	}
	caughtUp := func(what string) scenario.Report {
		t.Helper()
		var rep scenario.Report
		err := scenario.WaitFor(3*time.Minute, func() bool {
			r, err := scenario.Account(t.Context(), src)
			rep = r
			return !d.Running() || (err == nil && r.Missing == 0 && r.Produced > 0)
		})
		if err != nil || !d.Running() {
			t.Fatalf("%s: %v (%v)\n%s", what, rep, err, d.Tail(6000))
		}
		t.Logf("%s: produced %d, rows %d, DLQ %d, duplicates %d, missing %d", what, rep.Produced, rep.Rows, rep.DLQ, rep.Duplicates, rep.Missing)
		if !rep.OK() {
			t.Errorf("%s: %v", what, rep)
		}
		return rep
	}
	caughtUp("first batch")

	// HTTP: served on the configured address only.
	base := "http://" + httpAddr
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		code, body := securityGet(base + path)
		if code != http.StatusOK {
			t.Errorf("GET %s%s: %d", base, path, code)
		}
		leaks.check("GET "+path, body)
	}
	if code, _ := securityGet(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); code != 0 {
		t.Errorf("http.listen %s also answers on 127.0.0.1:%d (%d)", httpAddr, port, code)
	}

	// Control: the viewer may discover the service but neither pause nor
	// flush; the deltaflow user may.
	viewer, err := nats.Connect(natsURL, nats.UserInfo("viewer", "viewer-pw"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer viewer.Close()
	if _, err := viewer.Request("$SRV.PING."+bridge.ServiceName, nil, 10*time.Second); err != nil {
		t.Errorf("viewer cannot discover the control service: %v", err)
	}
	group := fmt.Sprintf(bridge.ControlGroupT, bridge.Token(table))
	for _, ep := range []string{bridge.ControlPause, bridge.ControlFlush} {
		if m, err := viewer.Request(group+"."+ep, nil, 3*time.Second); err == nil {
			t.Errorf("viewer called %s: %s", ep, m.Data)
		}
	}
	produce(200) // not paused by the viewer: this batch is committed too
	caughtUp("second batch, after the viewer's pause")
	type statusReply struct{ Positions map[string]map[string]int64 }
	status := func() statusReply {
		t.Helper()
		m, err := admin.Request(group+"."+bridge.ControlStatus, nil, 30*time.Second)
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		leaks.check("control status", string(m.Data))
		var s statusReply
		if err := json.Unmarshal(m.Data, &s); err != nil {
			t.Fatalf("status %s: %v", m.Data, err)
		}
		return s
	}
	if m, err := admin.Request(group+"."+bridge.ControlPause, nil, 30*time.Second); err != nil || !bytes.Contains(m.Data, []byte(`"ok":true`)) {
		t.Fatalf("deltaflow user cannot pause: %v", err)
	}
	paused := status().Positions
	produce(100)
	time.Sleep(5 * time.Second)
	if now := status().Positions; fmt.Sprint(now) != fmt.Sprint(paused) {
		t.Errorf("paused by the deltaflow user, yet positions moved from %v to %v\n%s", paused, now, d.Tail(6000))
	}
	if _, err := admin.Request(group+"."+bridge.ControlResume, nil, 30*time.Second); err != nil {
		t.Fatalf("resume: %v", err)
	}
	caughtUp("third batch, after pause and resume")

	// The CLI, with the secrets in its environment and flags.
	out, err := securityCommand(t, append(env, "NATS_URL="+adminURL), "inspect", "offsets", "--table", uri,
		"--topic", topic, "--name", table, "--group", "g-"+table)
	leaks.check("inspect offsets", out)
	if err != nil || !strings.Contains(out, "PARTITION") {
		t.Errorf("inspect offsets: %v\n%s", err, out)
	}
	wrongKey := filepath.Join(t.TempDir(), "minio-key")
	if err := os.WriteFile(wrongKey, []byte(wrong["minio"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"inspect", "snapshot", "--table", uri, "--s3-secret-key-file", wrongKey},
		{"verify", "--table", uri, "--s3-secret-key-file", wrongKey},
		// Refused: a password on the command line.
		{"inspect", "offsets", "--table", uri, "--nats", strings.Replace(natsURL, "nats://", "nats://deltaflow:"+wrong["url"]+"@", 1)},
	} {
		out, err := securityCommand(t, env, args...)
		leaks.check(strings.Join(args[:2], " "), out)
		if args[0] != "inspect" || args[1] != "offsets" {
			if err == nil {
				t.Errorf("%s with a wrong secret key succeeded:\n%s", args[:2], out)
			}
		}
	}
	if err := d.Stop(30 * time.Second); err != nil {
		t.Errorf("SIGTERM: %v", err)
	}
	leaks.check("deltaflow run log", d.Log.String())

	securityFailures(t, srv, leaks, natsURL, natsPW, wrong)

	eventsMu.Lock()
	t.Logf("%d NATS messages checked", events)
	eventsMu.Unlock()
	leaks.report(t)
}

// securityFailures runs deltaflow on failing setups at once, each with a
// wrong secret, and checks what each shows while it fails.
func securityFailures(t *testing.T, srv scenario.Servers, leaks *securityLeaks, natsURL, natsPW string, wrong map[string]string) {
	t.Helper()
	refused := fmt.Sprintf("127.0.0.1:%d", scenario.FreePort(t))
	authed := map[string]any{"user": "deltaflow", "password": natsPW}
	failures := []securityFailure{
		{name: "minio secret", env: []string{"MINIO_SECRET_KEY=" + wrong["minio"]}, sections: map[string]any{"nats": authed},
			shows: "signature"},
		{name: "minio endpoint", env: []string{"MINIO_ENDPOINT=" + refused, "MINIO_SECRET_KEY=" + wrong["minio"]}, sections: map[string]any{"nats": authed},
			shows: "refused"},
		{name: "nats password", sections: map[string]any{"nats": map[string]any{"user": "deltaflow", "password": wrong["nats"]}},
			shows: "authorization"},
		{name: "nats url", env: []string{"NATS_URL=" + strings.Replace(natsURL, "nats://", "nats://deltaflow:"+wrong["url"]+"@", 1)},
			shows: "authorization"},
		{name: "nats token", sections: map[string]any{"nats": map[string]any{"token": wrong["token"]}},
			shows: "authorization"},
		{name: "kafka sasl", sections: map[string]any{"nats": authed,
			"kafka": map[string]any{"sasl": map[string]any{"mechanism": "PLAIN", "user": "deltaflow", "password": wrong["sasl"],
				"allow_plain_without_tls": true}}},
			shows: "unable to initialize sasl"},
		{name: "kafka endpoint", env: []string{"KAFKA_BOOTSTRAP=" + refused}, sections: map[string]any{"nats": authed,
			"kafka": map[string]any{"sasl": map[string]any{"mechanism": "SCRAM-SHA-512", "user": "deltaflow", "password": wrong["sasl"]}}},
			shows: "connection refused"},
		{name: "config error", sections: map[string]any{"nats": map[string]any{"password": wrong["configerr"]}},
			shows: "nats.password"},
	}
	// The group returns once every parallel run has.
	t.Run("failures", func(t *testing.T) {
		for _, f := range failures {
			f.run(t, srv, leaks)
		}
	})
}

// securityFailure is one failing setup.
type securityFailure struct {
	name     string
	env      []string       // over the working env
	sections map[string]any // config sections
	// shows is what the log must mention (lower case), proving the
	// failure path ran.
	shows string
}

// run runs deltaflow on the failing setup, in parallel with the other
// failures, until it exits or for 20s, and checks what it showed.
func (f securityFailure) run(t *testing.T, srv scenario.Servers, leaks *securityLeaks) {
	name, shows := f.name, f.shows
	t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
		t.Parallel()
		table := scenario.Unique("fail")
		httpAddr := fmt.Sprintf("127.0.0.1:%d", scenario.FreePort(t))
		env := append(srv.Env(scenario.Unique("secrets-fail"), "g-"+table, "s3://"+srv.S3.Bucket+"/"+table, httpAddr), f.env...)
		sections := map[string]any{"log": map[string]any{"level": "debug"}}
		for k, v := range f.sections {
			sections[k] = v
		}
		cfg := scenario.WriteConfig(t, table, sections)
		d := scenario.Start(t, "deltaflow "+name, scenario.Binary(t), env, "run", "--config", cfg)
		// Long enough for the retries and their logs; it may also exit.
		_ = scenario.WaitFor(20*time.Second, func() bool { return !d.Running() })
		if d.Running() {
			code, body := securityGet("http://" + httpAddr + "/readyz")
			leaks.check(name+": GET /readyz", body)
			_, body = securityGet("http://" + httpAddr + "/metrics")
			leaks.check(name+": GET /metrics", body)
			t.Logf("still running after 20s; /readyz %d", code)
			_ = d.Stop(30 * time.Second)
		}
		log := d.Log.String()
		leaks.check(name+": deltaflow run log", log)
		i := strings.Index(strings.ToLower(log), shows)
		if i < 0 {
			t.Fatalf("the log does not show the %s failure (%q)\n%s", name, shows, d.Tail(4000))
		}
		line := log[strings.LastIndexByte(log[:i], '\n')+1:]
		line, _, _ = strings.Cut(line, "\n")
		t.Logf("%s: %s", name, line)
	})
}

// TestTLSEverywhere runs deltaflow against a MinIO serving HTTPS with a
// certificate from a private CA (--certs-dir) and a nats-server requiring
// TLS with client certificates, configured with storage.ca_file and
// nats.tls.*: it commits every record. The CLI reaches the same MinIO with
// --s3-ca-file, and without it refuses the unknown CA.
func TestTLSEverywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers; skipped with -short")
	}
	brokers := testenv.Kafka(t)
	minioBin := testenv.Tool(t, "minio")
	dir := t.TempDir()
	pki := testenv.NewPKI(t, dir)

	// MinIO over HTTPS.
	certs := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		t.Fatal(err)
	}
	for src, dst := range map[string]string{pki.ServerCertFile: "public.crt", pki.ServerKeyFile: "private.key"} {
		if err := os.Link(src, filepath.Join(certs, dst)); err != nil {
			t.Fatal(err)
		}
	}
	s3 := storage.S3Config{Endpoint: fmt.Sprintf("https://127.0.0.1:%d", scenario.FreePort(t)), AccessKey: "deltaflow",
		SecretKey: secret.Secret(securitySecret("tls")), Bucket: "lake", Prefix: "tls", CAFile: pki.CAFile}
	m := scenario.Start(t, "minio", minioBin, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"MINIO_ROOT_USER=" + s3.AccessKey, "MINIO_ROOT_PASSWORD=" + string(s3.SecretKey), "MINIO_BROWSER=off"},
		"server", "--quiet", "--address", strings.TrimPrefix(s3.Endpoint, "https://"),
		"--console-address", fmt.Sprintf("127.0.0.1:%d", scenario.FreePort(t)), "--certs-dir", certs, filepath.Join(dir, "data"))
	t.Cleanup(func() { _ = m.Stop(10 * time.Second) })
	store, err := storage.NewS3(s3)
	if err != nil {
		t.Fatal(err)
	}
	if err := scenario.WaitFor(time.Minute, func() bool {
		return store.Client().MakeBucket(t.Context(), s3.Bucket, minio.MakeBucketOptions{}) == nil
	}); err != nil {
		t.Fatalf("MinIO over HTTPS: no bucket\n%s", m.Tail(3000))
	}

	// nats-server requiring TLS and a client certificate.
	natsPW := securitySecret("tlsnats")
	natsURL := securityNATS(t, natsPW, fmt.Sprintf("tls { cert_file: %q, key_file: %q, ca_file: %q, verify: true }",
		pki.ServerCertFile, pki.ServerKeyFile, pki.CAFile))

	topic, table := scenario.Unique("tls"), scenario.Unique("tls")
	srv := scenario.Servers{Brokers: brokers, NATSURL: natsURL, S3: s3}
	env := srv.Env(topic, "g-"+table, "s3://lake/tls", "127.0.0.1:0")
	if out, err := securityCommand(t, env, "produce", "--topic", topic, "--partitions", "2", "--count", "300", "--seed", "4"); err != nil {
		t.Fatalf("produce: %v\n%s", err, out)
	}
	cfg := scenario.WriteConfig(t, table, map[string]any{
		"storage": map[string]any{"ca_file": pki.CAFile},
		"nats": map[string]any{"user": "deltaflow", "password": natsPW,
			"tls": map[string]any{"ca_file": pki.CAFile, "cert_file": pki.ClientCertFile, "key_file": pki.ClientKeyFile}},
	})
	d := scenario.Start(t, "deltaflow", scenario.Binary(t), env, "run", "--config", cfg, "--until-latest")
	if err := scenario.WaitFor(3*time.Minute, func() bool { return !d.Running() }); err != nil {
		t.Fatalf("run --until-latest did not finish\n%s", d.Tail(4000))
	}
	if err, _ := d.Exited(); err != nil {
		t.Fatalf("run --until-latest over TLS: %v\n%s", err, d.Tail(4000))
	}
	rep, err := scenario.Account(t.Context(), scenario.Source{Brokers: brokers, Topic: topic, Store: store, Table: table,
		NATSURL: natsURL, NATSOptions: []nats.Option{nats.UserInfo("deltaflow", natsPW),
			nats.RootCAs(pki.CAFile), nats.ClientCert(pki.ClientCertFile, pki.ClientKeyFile)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("over TLS: produced %d, rows %d, DLQ %d, duplicates %d, missing %d", rep.Produced, rep.Rows, rep.DLQ, rep.Duplicates, rep.Missing)
	if !rep.OK() || rep.Produced != 300 {
		t.Errorf("over TLS: %v", rep)
	}

	// The CLI: with the CA file it reads the table; without, the unknown CA
	// is refused.
	out, err := securityCommand(t, env, "inspect", "snapshot", "--table", "s3://lake/tls", "--s3-ca-file", pki.CAFile)
	if err != nil || !strings.Contains(out, "version") {
		t.Errorf("inspect --s3-ca-file: %v\n%s", err, out)
	}
	out, err = securityCommand(t, env, "inspect", "snapshot", "--table", "s3://lake/tls")
	if err == nil || !strings.Contains(out, "certificate") {
		t.Errorf("inspect without the CA: %v (want a certificate error)\n%s", err, out)
	}
}
