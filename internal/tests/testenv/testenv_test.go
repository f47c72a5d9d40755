package testenv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7/pkg/s3utils"
)

func TestBucketName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z][a-z0-9-]{1,61}[a-z0-9]$`)
	for _, name := range []string{
		"TestX",
		"TestS3Conformance/PutIfAbsentRace",
		"Test_Under_Score/#01",
		"T",
		strings.Repeat("TestVeryLongName/", 10),
		"Test--/--x",
	} {
		a, b := BucketName(name), BucketName(name)
		if !valid.MatchString(a) || strings.Contains(a, "--") {
			t.Errorf("BucketName(%q) = %q: not a valid bucket name", name, a)
		}
		if err := s3utils.CheckValidBucketNameStrict(a); err != nil {
			t.Errorf("BucketName(%q) = %q: %v", name, a, err)
		}
		if a == b {
			t.Errorf("BucketName(%q) twice gave %q: want a random suffix", name, a)
		}
	}
}

// Without servers configured, tests skip, or fail when servers are required.
// Only the skip is checked here: a fatal would fail this test itself.
func TestMissingSkips(t *testing.T) {
	t.Setenv(EnvMinIOEndpoint, "")
	t.Setenv(EnvRequire, "")
	ran := false
	t.Run("inner", func(t *testing.T) {
		defer func() { ran = t.Skipped() }()
		MinIO(t)
		t.Error("MinIO returned without a server")
	})
	if !ran {
		t.Error("MinIO did not skip")
	}
}

// With DELTAFLOW_TEST_REQUIRE_SERVERS=1 a missing server fails the test: run
// this test again in a child process and check that it fails.
func TestMissingFailsWhenRequired(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		MinIO(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMissingFailsWhenRequired$", "-test.v")
	cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", EnvRequire+"=1", EnvMinIOEndpoint+"=")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--- FAIL") || !strings.Contains(string(out), "make test") {
		t.Errorf("child: err = %v, output:\n%s", err, out)
	}
}

// Kafka, NATS and Tool skip like MinIO when what they look for is missing.
func TestNewHelpersSkip(t *testing.T) {
	t.Setenv(EnvKafkaBrokers, " , ")
	t.Setenv(EnvNATSURL, "")
	t.Setenv(EnvRequire, "")
	t.Setenv(EnvBin, t.TempDir())
	t.Setenv("DELTAFLOW_CACHE", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	for name, f := range map[string]func(t *testing.T){
		"kafka": func(t *testing.T) { Kafka(t) },
		"nats":  func(t *testing.T) { NATS(t) },
		"tool":  func(t *testing.T) { Tool(t, "no-such-tool-deltaflow") },
	} {
		skipped := false
		t.Run(name, func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			f(t)
			t.Errorf("%s returned without skipping", name)
		})
		if !skipped {
			t.Errorf("%s did not skip", name)
		}
	}
}

func TestHelpersRead(t *testing.T) {
	t.Setenv(EnvKafkaBrokers, "127.0.0.1:1, 127.0.0.1:2")
	t.Setenv(EnvNATSURL, "nats://127.0.0.1:3")
	if got := Kafka(t); len(got) != 2 || got[1] != "127.0.0.1:2" {
		t.Errorf("Kafka = %q", got)
	}
	if got := NATS(t); got != "nats://127.0.0.1:3" {
		t.Errorf("NATS = %q", got)
	}
	// A tool only in the cache bin dir is found there.
	bin := t.TempDir()
	tool := bin + "/fake-tool"
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvBin, bin)
	t.Setenv("PATH", t.TempDir())
	if got := Tool(t, "fake-tool"); got != tool {
		t.Errorf("Tool = %q, want %q", got, tool)
	}
}

// A tmpfs of the test's own fills up, takes more once resized, and is
// reachable by path.
func TestTmpfs(t *testing.T) {
	f := NewTmpfs(t, 64<<10)
	path := filepath.Join(f.Dir, "fill")
	if err := os.WriteFile(path, make([]byte, 128<<10), 0o600); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("128 KiB into a 64 KiB tmpfs: %v, want ENOSPC", err)
	}
	f.Resize(256 << 10)
	if err := os.WriteFile(path, make([]byte, 128<<10), 0o600); err != nil {
		t.Fatalf("128 KiB into the tmpfs grown to 256 KiB: %v", err)
	}
}
