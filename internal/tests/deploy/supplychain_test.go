package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/deltaflow/deltaflow/internal/tests/scenario"
)

// libSetting is the value of NAME="value" in scripts/lib.sh, where the
// versions the tests run are pinned.
func libSetting(t *testing.T, name string) string {
	t.Helper()
	lib, err := os.ReadFile(filepath.Join(scenario.RepoRoot(t), "scripts", "lib.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + `="([^"]+)"$`).FindSubmatch(lib)
	if m == nil {
		t.Fatalf(`scripts/lib.sh has no %s="..." line`, name)
	}
	return string(m[1])
}

// go.mod names the toolchain the tests run (scripts/lib.sh's GO_TOOLCHAIN,
// chosen for its security fixes), so that a plain `go run ./cmd/deltaflow
// demo` or `go install` with Go's default GOTOOLCHAIN=auto builds with it,
// not with whatever older Go is installed; the go command fetches it from
// the module proxy (once).
func TestGoModToolchain(t *testing.T) {
	root := scenario.RepoRoot(t)
	want := libSetting(t, "GO_TOOLCHAIN")
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^toolchain (\S+)$`).FindSubmatch(mod); m == nil || string(m[1]) != want {
		t.Fatalf("go.mod names toolchain %q, want %s (scripts/lib.sh's GO_TOOLCHAIN)", m, want)
	}
	cmd := exec.Command("go", "version")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=auto")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "go version "+want+" ") {
		t.Errorf("go version in the module with GOTOOLCHAIN=auto: %v, %s; want %s", err, out, want)
	}
}

// Every tool the test command installs is pinned, and a cached install is
// reused only when its stamp names that pin: an @latest (or a stamp that
// only checks its age) let a fresh machine get a govulncheck that could
// not read the toolchain's standard library while machines with last
// week's build stayed green.
func TestTestToolsPinned(t *testing.T) {
	root := scenario.RepoRoot(t)
	for _, name := range []string{"lib.sh", "install-deps.sh", "test.sh", "servers.sh", "fuzz.sh"} {
		b, err := os.ReadFile(filepath.Join(root, "scripts", name))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, "#")
			switch {
			case strings.Contains(code, "@latest"):
				t.Errorf("scripts/%s:%d installs a moving version: %s", name, i+1, strings.TrimSpace(line))
			case strings.Contains(code, "-mtime"):
				t.Errorf("scripts/%s:%d decides by a file's age, not its version: %s", name, i+1, strings.TrimSpace(line))
			}
		}
	}
	for _, name := range []string{"GOVULNCHECK_MODULE", "NATSCLI_MODULE", "NATS_SERVER_MODULE", "MINIO_MODULE"} {
		if v := libSetting(t, name); !regexp.MustCompile(`@v\d+\.\d+\.\d+(-[0-9a-f.-]+)?$`).MatchString(v) {
			t.Errorf("scripts/lib.sh: %s=%q has no version", name, v)
		}
	}
	if v := libSetting(t, "VULNDB_VERSION"); !strings.HasPrefix(v, "v0.0.0-") {
		t.Errorf("scripts/lib.sh: VULNDB_VERSION=%q is not a module version", v)
	}
}

// pinnedImage is an image reference with a version (or a digest): never
// latest, never a major version only (nats:2-alpine moves under the stack).
var pinnedImage = regexp.MustCompile(`(:v?\d+\.\d+\.\d+(-[a-z0-9.]+)?|:RELEASE\.[0-9T-]+Z|@sha256:[0-9a-f]{64})$`)

// The compose services keep no Linux capability, gain no privilege
// through setuid binaries, run on a read-only root filesystem where they
// write only to their volumes, and run pinned images: Kafka and NATS the
// versions the tests run.
func TestComposeHardening(t *testing.T) {
	main, _ := loadCompose(t, []string{"tools", "monitoring"})
	seed, _ := loadComposeFile(t, "docker-compose.seed.yml", "deltaflow-seed", []string{"Dockerfile", "configs/seed.yaml"}, []string{"nats"},
		map[string]string{"MINIO_ACCESS_KEY": "seed", "MINIO_SECRET_KEY": "seed-secret"})
	_, natsVersion, _ := strings.Cut(libSetting(t, "NATS_SERVER_MODULE"), "@v")
	natsImage := "nats:" + natsVersion + "-alpine"
	for _, c := range []struct {
		file     string
		p        *types.Project
		readOnly []string
		images   map[string]string
	}{
		{"docker-compose.yml", main, []string{"deltaflow", "nats", "prometheus", "node-exporter"},
			map[string]string{"nats": natsImage, "kafka": "apache/kafka:" + libSetting(t, "KAFKA_VERSION")}},
		{"docker-compose.seed.yml", seed, []string{"deltaflow", "nats"}, map[string]string{"nats": natsImage}},
	} {
		if len(c.p.Services) < 2 {
			t.Fatalf("%s: %d services", c.file, len(c.p.Services))
		}
		for name, s := range c.p.Services {
			if !slices.Contains(s.CapDrop, "ALL") {
				t.Errorf("%s: %s keeps its capabilities (cap_drop %v, want ALL)", c.file, name, s.CapDrop)
			}
			if !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
				t.Errorf("%s: %s may gain privileges (security_opt %v, want no-new-privileges:true)", c.file, name, s.SecurityOpt)
			}
			if slices.Contains(c.readOnly, name) && !s.ReadOnly {
				t.Errorf("%s: %s writes only to its volumes but its root filesystem is writable (read_only)", c.file, name)
			}
			if s.Build == nil && !pinnedImage.MatchString(s.Image) {
				t.Errorf("%s: %s runs %q: not pinned to a version", c.file, name, s.Image)
			}
			if want, ok := c.images[name]; ok && s.Image != want {
				t.Errorf("%s: %s runs %s, want %s (the version the tests run, scripts/lib.sh)", c.file, name, s.Image, want)
			}
		}
	}
}
