package testenv

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/secret"
	"github.com/deltaflow/deltaflow/storage"
)

// RepoRoot is the module root (this file is internal/tests/testenv/…).
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testenv: no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Private is a set of servers one test owns, started by scripts/servers.sh
// with a state dir of the test's own: the test may stop and restart them
// (an outage) without disturbing the tests that share the servers of
// `make test`. They are stopped, and their data removed, when the test ends.
type Private struct {
	t      testing.TB
	script string
	state  string
	env    map[string]string // from the state dir's env.sh
}

// privateTimeout bounds one servers.sh call: a Kafka start is a JVM start
// (and a storage format), slow on a loaded 2-core machine.
const privateTimeout = 4 * time.Minute

// PrivateServers starts the named servers ("minio", "kafka", "nats"; all
// three when none is named) for t alone, on free ports. It skips the test
// (fails it under `make test`) when the test servers are not installed.
func PrivateServers(t testing.TB, names ...string) *Private {
	t.Helper()
	if os.Getenv(EnvBin) == "" {
		missing(t, "private servers (scripts/servers.sh)")
	}
	p := &Private{t: t, script: filepath.Join(RepoRoot(t), "scripts", "servers.sh"), state: t.TempDir()}
	// Registered before the start, so that a start failing half-way still
	// stops what it started.
	t.Cleanup(p.cleanup)
	p.run(append([]string{"start"}, names...)...)
	data, err := os.ReadFile(filepath.Join(p.state, "env.sh"))
	if err != nil {
		t.Fatalf("testenv: private servers: %v", err)
	}
	p.env = parseEnv(data)
	return p
}

// parseEnv reads the `export NAME=VALUE` lines servers.sh writes.
func parseEnv(data []byte) map[string]string {
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "="); ok {
			env[k] = v
		}
	}
	return env
}

// run runs servers.sh with args against the private state dir.
func (p *Private) run(args ...string) {
	p.t.Helper()
	if out, err := p.command(args...); err != nil {
		p.t.Fatalf("testenv: servers.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (p *Private) command(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), privateTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{p.script}, args...)...)
	cmd.Env = append(os.Environ(), "DELTAFLOW_STATE="+p.state)
	return cmd.CombinedOutput()
}

// cleanup stops the servers; when the test failed it first shows the end of
// each server's log.
func (p *Private) cleanup() {
	if p.t.Failed() {
		logs, _ := filepath.Glob(filepath.Join(p.state, "*.log"))
		for _, l := range logs {
			if data, err := os.ReadFile(l); err == nil {
				p.t.Logf("--- %s (last 2 KB) ---\n%s", filepath.Base(l), data[max(0, len(data)-2048):])
			}
		}
	}
	if out, err := p.command("stop"); err != nil {
		p.t.Errorf("testenv: servers.sh stop: %v\n%s", err, out)
	}
}

// Stop stops server name (an outage); its data and ports are kept.
func (p *Private) Stop(name string) {
	p.t.Helper()
	p.run("kill", name)
}

// Start starts server name again, on the same ports with the same data,
// and returns once it answers.
func (p *Private) Start(name string) {
	p.t.Helper()
	p.run("restart", name)
}

// value returns a variable of env.sh; missing, the server was not started.
func (p *Private) value(key, server string) string {
	p.t.Helper()
	v := p.env[key]
	if v == "" {
		p.t.Fatalf("testenv: private %s not started (PrivateServers(t, %q))", server, server)
	}
	return v
}

// Kafka returns the private Kafka's seed brokers.
func (p *Private) Kafka() []string {
	p.t.Helper()
	return strings.Split(p.value(EnvKafkaBrokers, "kafka"), ",")
}

// NATS returns the private nats-server's URL.
func (p *Private) NATS() string {
	p.t.Helper()
	return p.value(EnvNATSURL, "nats")
}

// MinIO returns the config of a fresh bucket on the private MinIO, named
// after the test. The bucket goes with the server's data at the end.
func (p *Private) MinIO() storage.S3Config {
	p.t.Helper()
	cfg := storage.S3Config{
		Endpoint:  p.value(EnvMinIOEndpoint, "minio"),
		AccessKey: p.env[EnvMinIOAccessKey],
		SecretKey: secret.Secret(p.env[EnvMinIOSecretKey]),
		Bucket:    BucketName(p.t.Name()),
	}
	makeBucket(p.t, cfg)
	return cfg
}
