// Package testenv finds the external servers that integration tests need.
//
// scripts/test.sh (`make test`) starts them and exports their addresses.
// Run bare, `go test` skips tests that need them, with a message naming that
// command; with DELTAFLOW_TEST_REQUIRE_SERVERS=1 (set by scripts/test.sh, so
// in CI) a missing server fails the test instead, so CI can never go green by
// skipping.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deltaflow/deltaflow/internal/secret"
	"github.com/deltaflow/deltaflow/storage"
)

// Environment variables read here (written by scripts/servers.sh).
const (
	EnvMinIOEndpoint  = "DELTAFLOW_TEST_MINIO_ENDPOINT"
	EnvMinIOAccessKey = "DELTAFLOW_TEST_MINIO_ACCESS_KEY"
	EnvMinIOSecretKey = "DELTAFLOW_TEST_MINIO_SECRET_KEY"
	EnvPython         = "DELTAFLOW_TEST_PYTHON"
	EnvRequire        = "DELTAFLOW_TEST_REQUIRE_SERVERS"
	// EnvKafkaBrokers is a comma-separated list of Kafka brokers (KRaft).
	EnvKafkaBrokers = "DELTAFLOW_TEST_KAFKA_BROKERS"
	// EnvNATSURL is an external nats-server with JetStream.
	EnvNATSURL = "DELTAFLOW_TEST_NATS_URL"
	// EnvBin is the cache's bin dir, where install-deps.sh puts nats,
	// nats-server, govulncheck (kcat comes from the system).
	EnvBin = "DELTAFLOW_TEST_BIN"
)

const howTo = "run `make test` (scripts/test.sh) to start it"

// missing skips the test, or fails it when servers are required.
func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("%s not configured but %s=1; %s", what, EnvRequire, howTo)
	}
	t.Skipf("%s not configured; %s", what, howTo)
}

// MinIO returns the config of a fresh, empty bucket on the test MinIO server,
// named after the test, and removes the bucket and its objects when the test
// ends. Prefix is empty.
func MinIO(t testing.TB) storage.S3Config {
	t.Helper()
	cfg := storage.S3Config{
		Endpoint:  os.Getenv(EnvMinIOEndpoint),
		AccessKey: os.Getenv(EnvMinIOAccessKey),
		SecretKey: secret.Secret(os.Getenv(EnvMinIOSecretKey)),
		Bucket:    BucketName(t.Name()),
	}
	if cfg.Endpoint == "" || cfg.AccessKey == "" || cfg.SecretKey == "" {
		missing(t, "MinIO")
	}
	client := makeBucket(t, cfg)
	t.Cleanup(func() {
		// t.Context() is already done here.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		objs := client.ListObjects(ctx, cfg.Bucket, minio.ListObjectsOptions{Recursive: true})
		for e := range client.RemoveObjects(ctx, cfg.Bucket, objs, minio.RemoveObjectsOptions{}) {
			t.Errorf("testenv: clean bucket %s: %s: %v", cfg.Bucket, e.ObjectName, e.Err)
		}
		if err := client.RemoveBucket(ctx, cfg.Bucket); err != nil {
			t.Errorf("testenv: remove bucket %s: %v", cfg.Bucket, err)
		}
	})
	return cfg
}

// makeBucket creates cfg.Bucket and returns a client of its server.
func makeBucket(t testing.TB, cfg storage.S3Config) *minio.Client {
	t.Helper()
	s, err := storage.NewS3(cfg)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	client := s.Client()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := client.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("testenv: make bucket %s at %s: %v", cfg.Bucket, cfg.Endpoint, err)
	}
	return client
}

var notBucketChars = regexp.MustCompile(`[^a-z0-9]+`)

// BucketName turns a test name into a valid, unique S3 bucket name: 3–63
// characters of [a-z0-9-], starting with a letter, ending with a digit or
// letter, with a random suffix so reruns and parallel tests never collide.
func BucketName(testName string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := "-" + hex.EncodeToString(b[:])
	base := strings.Trim(notBucketChars.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	base = "t-" + base
	if limit := 63 - len(suffix); len(base) > limit {
		base = strings.TrimRight(base[:limit], "-")
	}
	return base + suffix
}

// Python returns the path of a Python interpreter that has the deltalake
// package, the reference reader tables are checked against.
func Python(t testing.TB) string {
	t.Helper()
	py := os.Getenv(EnvPython)
	if py == "" {
		missing(t, "Python with deltalake")
	}
	if _, err := os.Stat(py); err != nil {
		t.Fatalf("testenv: %s=%s: %v", EnvPython, py, err)
	}
	return py
}

// Kafka returns the seed brokers of the test Kafka cluster (one KRaft node
// started by scripts/servers.sh). Tests share it: use a fresh topic and
// consumer group per test (see BucketName for unique names).
func Kafka(t testing.TB) []string {
	t.Helper()
	var brokers []string
	for _, b := range strings.Split(os.Getenv(EnvKafkaBrokers), ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	if len(brokers) == 0 {
		missing(t, "Kafka")
	}
	return brokers
}

// NATS returns the URL of the external test nats-server (JetStream on).
// Tests share it: use names (tables, buckets) unique to the test.
func NATS(t testing.TB) string {
	t.Helper()
	url := os.Getenv(EnvNATSURL)
	if url == "" {
		missing(t, "NATS")
	}
	return url
}

// JetStream connects to the NATS server at url (NATS(t), a private
// server's) for a test's own checks; the connection closes when the test
// ends.
func JetStream(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(10*time.Second))
	if err != nil {
		t.Fatalf("testenv: connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("testenv: jetstream: %v", err)
	}
	return js
}

// Tool returns the path of a command-line tool the tests drive (nats, kcat,
// nats-server): from PATH, else from the cache's bin dir ($DELTAFLOW_TEST_BIN,
// else $DELTAFLOW_CACHE/bin, else ~/.cache/deltaflow/bin). Missing, it skips
// the test, or fails it when servers are required.
func Tool(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range toolDirs() {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	missing(t, "tool "+name)
	return ""
}

func toolDirs() []string {
	var dirs []string
	if d := os.Getenv(EnvBin); d != "" {
		dirs = append(dirs, d)
	}
	if d := os.Getenv("DELTAFLOW_CACHE"); d != "" {
		dirs = append(dirs, filepath.Join(d, "bin"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".cache", "deltaflow", "bin"))
	}
	return dirs
}
