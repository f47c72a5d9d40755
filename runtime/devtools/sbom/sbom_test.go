package sbom

import (
	"bytes"
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// testInfo is the build information of a small binary: one plain
// dependency, one replaced by another module, one by a local directory.
func testInfo() *debug.BuildInfo {
	return &debug.BuildInfo{
		GoVersion: "go1.27.3",
		Path:      "example.com/app/cmd/app",
		Main:      debug.Module{Path: "example.com/app", Version: "(devel)"},
		Deps: []*debug.Module{
			{Path: "example.com/lib", Version: "v1.2.0", Sum: "h1:LRdRrug9tEuKk7TGfz/sct5gjVj44G9pfqDt4qm7ghw="},
			{Path: "example.com/old", Version: "v0.1.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v0.1.1", Sum: "h1:not-base64"}},
			{Path: "example.com/local", Version: "v1.0.0", Replace: &debug.Module{Path: "../local"}},
		},
		Settings: []debug.BuildSetting{{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}},
	}
}

// The document describes the main module at the release version with the
// binary's hash, and lists the standard library and every module with its
// version, purl and go.sum hash (in hex) where the build information has one.
func TestNew(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	doc, err := New(testInfo(), Binary{Name: "app-1.0-linux-arm64", FileName: "app", Version: "1.0", SHA256: "00ff", Created: created})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := doc.Write(&buf); err != nil {
		t.Fatal(err)
	}
	var back Document
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("the document does not read back: %v", err)
	}
	if back.CreationInfo.Created != "2026-01-02T02:04:05Z" {
		t.Errorf("created %q, want UTC 2026-01-02T02:04:05Z", back.CreationInfo.Created)
	}
	if back.DocumentNamespace != namespaceBase+"app-1.0-linux-arm64-00ff" {
		t.Errorf("namespace %q", back.DocumentNamespace)
	}
	if len(back.Packages) != 5 || len(back.Relationships) != 5 {
		t.Fatalf("%d packages, %d relationships; want 5 and 5 (DESCRIBES + 4 DEPENDS_ON)", len(back.Packages), len(back.Relationships))
	}
	main, std, lib, fork, local := back.Packages[0], back.Packages[1], back.Packages[2], back.Packages[3], back.Packages[4]
	if main.Name != "example.com/app" || main.VersionInfo != "1.0" || main.Checksums[0].Value != "00ff" ||
		main.ExternalRefs[0].Locator != "pkg:golang/example.com/app@1.0" ||
		main.SourceInfo != "built from git revision abc123 with uncommitted changes" ||
		!strings.Contains(main.Comment, "(linux/arm64)") {
		t.Errorf("main package %+v", main)
	}
	if std.Name != "stdlib" || std.VersionInfo != "go1.27.3" {
		t.Errorf("stdlib package %+v", std)
	}
	if lib.VersionInfo != "v1.2.0" || len(lib.Checksums) != 1 ||
		lib.Checksums[0].Value != "2d1751aee83db44b8a93b4c67f3fec72de608d58f8e06f697ea0ede2a9bb821c" {
		t.Errorf("plain dependency %+v", lib)
	}
	if fork.Name != "example.com/fork" || fork.VersionInfo != "v0.1.1" || fork.Checksums != nil ||
		!strings.HasPrefix(fork.Comment, "replaces example.com/old v0.1.0") {
		t.Errorf("replaced dependency (a hash that is not h1 base64 SHA-256 gives no checksum) %+v", fork)
	}
	if local.Name != "../local" || local.VersionInfo != noAssertion || local.ExternalRefs != nil {
		t.Errorf("dependency replaced by a directory %+v", local)
	}
}

// Build information without a main module, or a binary without a name or
// hash, is an error naming what is missing.
func TestNewErrors(t *testing.T) {
	bin := Binary{Name: "app", SHA256: "00ff"}
	if _, err := New(&debug.BuildInfo{}, bin); err == nil || !strings.Contains(err.Error(), "no main module") {
		t.Errorf("no main module: %v", err)
	}
	if _, err := New(testInfo(), Binary{Name: "app"}); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("no hash: %v", err)
	}
}
