package scenario

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/procstat"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// RepoRoot is the module root.
func RepoRoot(t testing.TB) string {
	t.Helper()
	return testenv.RepoRoot(t)
}

// build is one build of the binary, made once per test process.
type build struct {
	once sync.Once
	bin  string
	err  error
}

var (
	buildsMu sync.Mutex
	builds   = map[string]*build{} // by build tags
)

// Binary builds cmd/deltaflow once per test process and set of build tags
// (no -race: it is the program under test, not the test) and returns its
// path. tags select variants, e.g. "failpoints" (internal/failpoint). The
// binary lives in a temp dir removed when the OS cleans /tmp.
func Binary(t testing.TB, tags ...string) string {
	t.Helper()
	tagList := strings.Join(tags, ",")
	buildsMu.Lock()
	b := builds[tagList]
	if b == nil {
		b = &build{}
		builds[tagList] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "deltaflow-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.bin = filepath.Join(dir, "deltaflow")
		cmd := exec.Command("go", "build", "-tags", tagList, "-o", b.bin, "./cmd/deltaflow")
		cmd.Dir = RepoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build -tags %q: %v\n%s", tagList, err, out)
		}
	})
	if b.err != nil {
		t.Fatalf("scenario: %v", b.err)
	}
	return b.bin
}

// FreePort returns a free TCP port on 127.0.0.1 (for HTTP endpoints and
// servers a scenario restarts on the same address).
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("scenario: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Daemon is one running deltaflow process.
type Daemon struct {
	t      testing.TB
	name   string
	cmd    *exec.Cmd
	Log    *testenv.SyncBuffer // stdout and stderr
	exited chan struct{}
	err    error // Wait's result, valid once exited is closed
}

// Start runs bin with args and env (nothing inherited) and stops it with
// SIGKILL when the test ends if it is still running. name labels its log.
func Start(t testing.TB, name, bin string, env []string, args ...string) *Daemon {
	t.Helper()
	d := &Daemon{t: t, name: name, Log: &testenv.SyncBuffer{}, exited: make(chan struct{})}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Env = env
	d.cmd.Stdout, d.cmd.Stderr = d.Log, d.Log
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("scenario: start %s: %v", name, err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		if d.Running() {
			d.Kill()
		}
	})
	return d
}

// Pid is the process id.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Memory is the process's resident set size now and its peak since it
// started (VmRSS and VmHWM of /proc/<pid>/status), in bytes; zero once it
// has exited.
func (d *Daemon) Memory() (rss, peak int64) {
	rss, peak, _ = procstat.RSS(d.Pid())
	return rss, peak
}

// Running reports whether the process has not exited.
func (d *Daemon) Running() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// Exited returns the process's exit error once it has exited (nil for exit
// status 0) and whether it has.
func (d *Daemon) Exited() (error, bool) {
	select {
	case <-d.exited:
		return d.err, true
	default:
		return nil, false
	}
}

// Kill sends SIGKILL (a power cut, as far as the process can tell) and
// waits for the process to be gone.
func (d *Daemon) Kill() {
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// Stop sends SIGTERM and waits up to timeout for a clean exit; it returns
// the exit error, or an error naming the timeout (the process is then
// killed).
func (d *Daemon) Stop(timeout time.Duration) error {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		return d.err
	case <-time.After(timeout):
		d.Kill()
		return fmt.Errorf("%s did not exit within %v of SIGTERM", d.name, timeout)
	}
}

// Tail is the last n bytes of the log, for failure messages.
func (d *Daemon) Tail(n int) string {
	s := d.Log.String()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return fmt.Sprintf("--- %s (pid %d) log ---\n%s", d.name, d.Pid(), s)
}

// ErrTimeout is returned by WaitFor when the condition never held.
var ErrTimeout = errors.New("scenario: timed out")

// WaitFor polls cond every 100ms until it returns true or timeout passes.
func WaitFor(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return nil
		}
		if time.Now().After(deadline) {
			return ErrTimeout
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Servers are the real servers a scenario's processes use.
type Servers struct {
	Brokers  []string
	NATSURL  string
	S3       storage.S3Config
	ExtraEnv []string // appended to Env's result
}

// Env is the environment of a deltaflow process using these servers for
// topic, group and table, with the HTTP endpoints on httpAddr: only the
// variables deltaflow documents, on a minimal base (nothing inherited from
// the developer's shell).
func (s Servers) Env(topic, group, tableURI, httpAddr string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"KAFKA_BOOTSTRAP=" + strings.Join(s.Brokers, ","),
		"KAFKA_TOPIC=" + topic,
		"KAFKA_GROUP=" + group,
		"MINIO_ENDPOINT=" + s.S3.Endpoint,
		"MINIO_ACCESS_KEY=" + s.S3.AccessKey,
		"MINIO_SECRET_KEY=" + string(s.S3.SecretKey),
		"NATS_URL=" + s.NATSURL,
		"DELTAFLOW_TABLE_URI=" + tableURI,
		"DELTAFLOW_HTTP_LISTEN=" + httpAddr,
	}
	return append(env, s.ExtraEnv...)
}

// Unique returns name with a suffix unique to this run, for topics, groups
// and tables on shared servers.
func Unique(name string) string {
	return name + "-" + strconv.FormatInt(time.Now().UnixNano()%1e10, 36)
}

// DeltaRSTable is a table as delta-rs reads it: its version and its rows,
// rendered by scripts/deltars.py.
type DeltaRSTable struct {
	Version   int64            `json:"version"`
	Rows      []map[string]any `json:"rows"`
	RowsError string           `json:"rowsError"`
}

// DeltaRS reads the table at uri with delta-rs (scripts/deltars.py, with env for its S3 settings; nil: this process's). A table
// delta-rs cannot read fails the test.
func DeltaRS(t testing.TB, env []string, uri string) DeltaRSTable {
	t.Helper()
	out := testenv.DeltaRS(t, env, "read", uri, "--rows")
	var res DeltaRSTable
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("scenario: deltars.py read %s: %v", uri, err)
	}
	if res.RowsError != "" {
		t.Fatalf("scenario: delta-rs cannot read the rows of %s: %s", uri, res.RowsError)
	}
	return res
}

// ReleaseBinary builds cmd/deltaflow as it was at commit (the repository's
// history must hold it), once per test process: for the tests that an
// older release's tables keep working under this one.
func ReleaseBinary(t testing.TB, commit string) string {
	t.Helper()
	buildsMu.Lock()
	b := builds["@"+commit]
	if b == nil {
		b = &build{}
		builds["@"+commit] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "deltaflow-release-")
		if err != nil {
			b.err = err
			return
		}
		src := filepath.Join(dir, "src")
		if err := os.Mkdir(src, 0o755); err != nil {
			b.err = err
			return
		}
		archive := exec.Command("sh", "-c", `git archive --format=tar "$0" | tar -x -C "$1"`, commit, src)
		archive.Dir = RepoRoot(t)
		if out, err := archive.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("git archive %s (the repository's history must hold it): %v\n%s", commit, err, out)
			return
		}
		b.bin = filepath.Join(dir, "deltaflow")
		cmd := exec.Command("go", "build", "-o", b.bin, "./cmd/deltaflow")
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build of %s: %v\n%s", commit, err, out)
		}
	})
	if b.err != nil {
		t.Fatalf("scenario: %v", b.err)
	}
	return b.bin
}

// Hung is what a process that stopped making progress was doing, for a
// failure message: its last warnings and errors, then SIGQUIT's dump of
// the goroutines running deltaflow's code (the process exits).
func (d *Daemon) Hung() string {
	var b strings.Builder
	var notable []string
	for line := range strings.Lines(d.Log.String()) {
		if strings.Contains(line, "WARN") || strings.Contains(line, "ERROR") || strings.Contains(line, "catch-up") {
			notable = append(notable, line)
		}
	}
	fmt.Fprintf(&b, "--- %s (pid %d): last warnings, errors and catch-up lines ---\n", d.name, d.Pid())
	b.WriteString(strings.Join(notable[max(0, len(notable)-30):], ""))
	for _, kv := range d.cmd.Env {
		if addr, ok := strings.CutPrefix(kv, "DELTAFLOW_HTTP_LISTEN="); ok {
			fmt.Fprintf(&b, "--- %s: metrics of the pipeline ---\n%s", d.name, pipelineMetrics(addr))
		}
	}
	start := len(d.Log.String())
	_ = d.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		d.Kill()
	}
	fmt.Fprintf(&b, "--- %s: goroutines in deltaflow's code at SIGQUIT ---\n", d.name)
	for g := range strings.SplitSeq(d.Log.String()[start:], "\n\n") {
		if strings.Contains(g, "deltaflow/deltaflow/") {
			b.WriteString(g + "\n\n")
		}
	}
	return b.String()
}

// pipelineMetrics is what /metrics at addr says of the fetch loop, the
// budgets and the records read, or why it said nothing.
func pipelineMetrics(addr string) string {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return err.Error() + "\n"
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error() + "\n"
	}
	var b strings.Builder
	for line := range strings.Lines(string(body)) {
		for _, name := range []string{"deltaflow_buffered_bytes", "deltaflow_fetch_paused", "deltaflow_records_total",
			"deltaflow_lag_records", "deltaflow_dlq_", "deltaflow_commits_total", "deltaflow_actor_restarts_total"} {
			if strings.HasPrefix(line, name) {
				b.WriteString(line)
			}
		}
	}
	return b.String()
}
