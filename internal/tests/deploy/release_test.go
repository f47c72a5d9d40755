package deploy_test

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/runtime/devtools/sbom"
)

// releaseVersion and releaseEpoch are what TestRelease hands the release
// script for VERSION and SOURCE_DATE_EPOCH.
const (
	releaseVersion = "1.2.3-test"
	releaseEpoch   = 1767225600 // 2026-01-01T00:00:00Z
)

// releaseMachines is the ELF machine of each release architecture.
var releaseMachines = map[string]elf.Machine{"arm64": elf.EM_AARCH64, "amd64": elf.EM_X86_64}

// `make release` (scripts/release.sh) into a temporary directory: a tarball
// per architecture holding a static binary for it, with the version stamped
// in and the files a user needs, every entry owned by 0:0 and dated at
// SOURCE_DATE_EPOCH; an SPDX SBOM per binary naming the main module and the
// dependencies with versions; and a SHA256SUMS that verifies.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-builds the release binaries; skipped with -short")
	}
	dist := t.TempDir()
	cmd := exec.Command("scripts/release.sh")
	cmd.Dir = scenario.RepoRoot(t)
	cmd.Env = append(os.Environ(), "DIST="+dist, "VERSION="+releaseVersion,
		"SOURCE_DATE_EPOCH="+strconv.Itoa(releaseEpoch))
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release.sh: %v\n%s", err, out)
	}
	t.Logf("scripts/release.sh took %s", time.Since(start).Round(time.Second))

	sums := verifySHA256SUMS(t, dist)
	for arch, machine := range releaseMachines {
		name := "deltaflow-" + releaseVersion + "-linux-" + arch
		for _, f := range []string{name + ".tar.gz", name + ".spdx.json"} {
			if _, ok := sums[f]; !ok {
				t.Errorf("SHA256SUMS does not list %s", f)
			}
		}
		bin := filepath.Join(t.TempDir(), "deltaflow")
		checkTarball(t, filepath.Join(dist, name+".tar.gz"), name, bin)
		checkBinary(t, bin, arch, machine)
		checkSBOM(t, filepath.Join(dist, name+".spdx.json"), bin)
	}
}

// verifySHA256SUMS checks every file SHA256SUMS lists (sha256sum's format,
// what `sha256sum -c SHA256SUMS` does) and returns them.
func verifySHA256SUMS(t *testing.T, dist string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 2*sha256.Size {
			t.Fatalf("SHA256SUMS: not `HASH  FILE`: %q", sc.Text())
		}
		data, err := os.ReadFile(filepath.Join(dist, file))
		if err != nil {
			t.Fatalf("SHA256SUMS lists %s: %v", file, err)
		}
		if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sum {
			t.Errorf("SHA256SUMS: %s does not match", file)
		}
		sums[file] = sum
		t.Logf("%s: %.1f MiB", file, float64(len(data))/(1<<20))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sums
}

// checkTarball checks a release tarball's entries — all under dir/, sorted,
// owned by 0:0, dated at releaseEpoch, the binary executable, the README,
// the Pi config and the compose file there — and writes the binary to bin.
func checkTarball(t *testing.T, path, dir, bin string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("%s: the gzip header holds a time or name (%s, %q): not gzip -n", path, zr.ModTime, zr.Name)
	}
	want := map[string]bool{"deltaflow": false, "README.md": false, "configs/deltaflow.yaml": false, "docker-compose.yml": false}
	for _, rel := range shippedReferences(t) {
		want[rel] = false
	}
	tr := tar.NewReader(zr)
	prev := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rel, ok := strings.CutPrefix(strings.TrimSuffix(h.Name, "/"), dir)
		if !ok {
			t.Errorf("%s: %s is outside %s/", path, h.Name, dir)
		}
		rel = strings.TrimPrefix(rel, "/")
		if h.Name < prev {
			t.Errorf("%s: %s after %s: entries not sorted", path, h.Name, prev)
		}
		prev = h.Name
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || h.ModTime.Unix() != releaseEpoch {
			t.Errorf("%s: %s: owner %d:%d (%q:%q), time %s; want 0:0, no names, %s", path, h.Name,
				h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime.UTC(), time.Unix(releaseEpoch, 0).UTC())
		}
		if _, ok := want[rel]; ok {
			want[rel] = true
		}
		if rel == "deltaflow" {
			if h.Mode&0o777 != 0o755 {
				t.Errorf("%s: the binary's mode is %o, want 755", path, h.Mode&0o777)
			}
			out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	for rel, found := range want {
		if !found {
			t.Errorf("%s: no %s/%s", path, dir, rel)
		}
	}
}

// shippedReferences are the files a user of the tarball is sent to: every
// local file the README links, and every file the compose files mount from
// the directory they are in.
func shippedReferences(t *testing.T) []string {
	t.Helper()
	root := scenario.RepoRoot(t)
	var refs []string
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range readmeLink.FindAllStringSubmatch(string(readme), -1) {
		if target := m[1]; !strings.Contains(target, "://") && !strings.HasPrefix(target, "#") {
			refs = append(refs, strings.SplitN(target, "#", 2)[0])
		}
	}
	for _, compose := range []string{"docker-compose.yml", "docker-compose.seed.yml"} {
		data, err := os.ReadFile(filepath.Join(root, compose))
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, compose)
		for _, m := range composeMount.FindAllStringSubmatch(string(data), -1) {
			if info, err := os.Stat(filepath.Join(root, m[1])); err == nil && !info.IsDir() {
				refs = append(refs, m[1])
			}
		}
	}
	if len(refs) < 8 {
		t.Fatalf("only %d shipped references found (%v): the README or compose files were not read as expected", len(refs), refs)
	}
	return refs
}

var (
	// readmeLink matches a Markdown link's target.
	readmeLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// composeMount matches a bind mount of a file beside a compose file.
	composeMount = regexp.MustCompile(`- \./([^:\s]+):`)
)

// checkBinary checks that bin is a static ELF executable for the machine
// and, when this machine can run it, that `deltaflow version` names
// releaseVersion.
func checkBinary(t *testing.T, bin, arch string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("linux/%s binary: %v", arch, err)
	}
	defer f.Close()
	if f.Machine != machine || f.Type != elf.ET_EXEC {
		t.Errorf("linux/%s binary: ELF machine %s, type %s; want %s, ET_EXEC", arch, f.Machine, f.Type, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("linux/%s binary has a program interpreter: not static", arch)
		}
	}
	if goruntime.GOOS != "linux" || goruntime.GOARCH != arch {
		return
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("deltaflow version: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "deltaflow "+releaseVersion+" ") {
		t.Errorf("deltaflow version printed %q, want it to start with %q", out, "deltaflow "+releaseVersion+" ")
	}
}

// checkSBOM checks an SBOM: SPDX 2.3 JSON describing the main module at
// releaseVersion with bin's SHA-256, dated at releaseEpoch, and naming the
// Go toolchain and the dependencies deltaflow is built on with versions and
// checksums.
func checkSBOM(t *testing.T, path, bin string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc sbom.Document
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: not JSON: %v", path, err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.DocumentNamespace == "" {
		t.Errorf("%s: spdxVersion %q, dataLicense %q, namespace %q", path, doc.SPDXVersion, doc.DataLicense, doc.DocumentNamespace)
	}
	if want := time.Unix(releaseEpoch, 0).UTC().Format(time.RFC3339); doc.CreationInfo.Created != want {
		t.Errorf("%s: created %s, want %s (SOURCE_DATE_EPOCH)", path, doc.CreationInfo.Created, want)
	}
	pkgs := map[string]sbom.Package{}
	ids := map[string]string{}
	for _, p := range doc.Packages {
		pkgs[p.Name] = p
		ids[p.SPDXID] = p.Name
	}
	main := pkgs["github.com/deltaflow/deltaflow"]
	binData, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	binSum := sha256.Sum256(binData)
	if len(doc.DocumentDescribes) != 1 || ids[doc.DocumentDescribes[0]] != main.Name || main.VersionInfo != releaseVersion ||
		len(main.Checksums) != 1 || main.Checksums[0].Value != hex.EncodeToString(binSum[:]) {
		t.Errorf("%s: describes %v; main module package %+v, want github.com/deltaflow/deltaflow %s with the binary's SHA-256",
			path, doc.DocumentDescribes, main, releaseVersion)
	}
	if std := pkgs["stdlib"]; !strings.HasPrefix(std.VersionInfo, "go1.") {
		t.Errorf("%s: stdlib package %+v, want the Go version", path, std)
	}
	for _, dep := range []string{"github.com/twmb/franz-go", "github.com/parquet-go/parquet-go"} {
		p, ok := pkgs[dep]
		if !ok || !strings.HasPrefix(p.VersionInfo, "v") || len(p.Checksums) != 1 || len(p.ExternalRefs) != 1 ||
			p.ExternalRefs[0].Locator != "pkg:golang/"+dep+"@"+p.VersionInfo {
			t.Errorf("%s: package %s: %+v; want a version, a checksum and a purl", path, dep, p)
		}
	}
	depends := 0
	for _, r := range doc.Relationships {
		if r.Type == "DEPENDS_ON" && ids[r.Element] == main.Name && ids[r.Related] != "" {
			depends++
		}
	}
	if depends != len(doc.Packages)-1 {
		t.Errorf("%s: the main module depends on %d packages, want every other one (%d)", path, depends, len(doc.Packages)-1)
	}
}
