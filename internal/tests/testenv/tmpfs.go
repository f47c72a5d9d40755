package testenv

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Tmpfs is a small file system of a test's own, for filling a disk: a
// tmpfs mounted in a mount namespace of its own (unshare, so no root is
// needed where user namespaces are allowed) that the test and the
// processes it starts reach through Dir.
type Tmpfs struct {
	// Dir is the tmpfs's root as every process sees it: the namespace
	// holder's view, /proc/PID/root/<dir>.
	Dir string
	t   testing.TB
	in  io.WriteCloser
	out *bufio.Scanner
	err *SyncBuffer // the holder's stderr
}

// tmpfsHolder mounts the tmpfs ($1 bytes on $2), then remounts it at each
// size read from stdin, answering each line; it holds the namespace until
// stdin closes.
const tmpfsHolder = `set -e
mount -t tmpfs -o size="$1" tmpfs "$2"
echo ready
while read -r size; do mount -t tmpfs -o remount,size="$size" tmpfs "$2"; echo ok; done`

// NewTmpfs mounts a tmpfs of size bytes, unmounted when the test ends.
// Where mount namespaces are out of reach (no unshare, user namespaces
// disallowed), it skips the test, or fails it when servers are required.
func NewTmpfs(t testing.TB, size int64) *Tmpfs {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		missing(t, "unshare (util-linux), for a tmpfs of the test's own")
	}
	dir := t.TempDir()
	cmd := exec.Command(unshare, "--user", "--map-root-user", "--mount", "sh", "-c", tmpfsHolder, "sh", strconv.FormatInt(size, 10), dir)
	stderr := &SyncBuffer{}
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: tmpfs: %v", err)
	}
	f := &Tmpfs{Dir: filepath.Join(fmt.Sprintf("/proc/%d/root", cmd.Process.Pid), dir), t: t, in: in, out: bufio.NewScanner(out), err: stderr}
	t.Cleanup(func() {
		in.Close() // the holder exits, and the namespace and its tmpfs go with it
		_ = cmd.Wait()
	})
	if !f.out.Scan() || f.out.Text() != "ready" {
		missing(t, "a tmpfs of the test's own (unshare --user --mount: "+strings.TrimSpace(stderr.String())+")")
	}
	return f
}

// Resize grows or shrinks the tmpfs to size bytes (not below what it
// holds).
func (f *Tmpfs) Resize(size int64) {
	f.t.Helper()
	if _, err := fmt.Fprintln(f.in, size); err != nil {
		f.t.Fatalf("testenv: resize tmpfs: %v", err)
	}
	if !f.out.Scan() || f.out.Text() != "ok" {
		f.t.Fatalf("testenv: resize tmpfs %s to %d bytes: %s", f.Dir, size, strings.TrimSpace(f.err.String()))
	}
}
