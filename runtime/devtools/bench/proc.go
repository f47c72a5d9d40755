package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/deltaflow/deltaflow/internal/procstat"
)

// Sample is one point of a stage's time series.
type Sample struct {
	T         float64 `json:"t"`                   // seconds since the stage's partitions were assigned (negative: before)
	RSS       int64   `json:"rss_bytes"`           // VmRSS of the child
	Done      int64   `json:"events"`              // records consumed (consume, decode, e2e)
	Committed int64   `json:"committed,omitempty"` // rows committed (e2e)
	GoHeap    int64   `json:"go_heap_bytes,omitempty"`
}

// child is one running stage process.
type child struct {
	cmd      *exec.Cmd
	started  time.Time
	stderr   *os.File
	mu       sync.Mutex
	assigned time.Time
	samples  []Sample // progress lines, T as unix seconds until finish
	rss      []rssPoint
	result   *childResult
	readDone chan struct{}
	stopRSS  chan struct{}
	rssDone  chan struct{}
	onAssign func(time.Time)
}

type rssPoint struct {
	at       time.Time
	rss, hwm int64
}

// startChild starts argv with GOMAXPROCS=2 (or the parent's setting of
// it) and begins sampling its RSS every 100 ms. stderr goes to logPath.
func startChild(argv []string, env []string, logPath string, onAssign func(time.Time)) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	if os.Getenv("GOMAXPROCS") == "" {
		cmd.Env = append(cmd.Env, "GOMAXPROCS=2")
	}
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = f
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		f.Close()
		return nil, err
	}
	c := &child{cmd: cmd, stderr: f, readDone: make(chan struct{}), stopRSS: make(chan struct{}), rssDone: make(chan struct{}), onAssign: onAssign}
	c.started = time.Now()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	go c.read(stdout)
	go c.sampleRSS()
	return c, nil
}

func (c *child) read(r io.Reader) {
	defer close(c.readDone)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		kind, rest, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "assigned":
			ns, _ := strconv.ParseInt(rest, 10, 64)
			at := time.Unix(0, ns)
			c.mu.Lock()
			c.assigned = at
			c.mu.Unlock()
			if c.onAssign != nil {
				c.onAssign(at)
			}
		case "progress":
			var ns, done, committed, heap int64
			fmt.Sscan(rest, &ns, &done, &committed, &heap)
			c.mu.Lock()
			c.samples = append(c.samples, Sample{T: float64(ns) / 1e9, Done: done, Committed: committed, GoHeap: heap})
			c.mu.Unlock()
		case "result":
			var res childResult
			if err := json.Unmarshal([]byte(rest), &res); err == nil {
				c.mu.Lock()
				c.result = &res
				c.mu.Unlock()
			}
		}
	}
}

func (c *child) sampleRSS() {
	defer close(c.rssDone)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if rss, hwm, ok := procstat.RSS(c.cmd.Process.Pid); ok {
			c.mu.Lock()
			c.rss = append(c.rss, rssPoint{time.Now(), rss, hwm})
			c.mu.Unlock()
		}
		select {
		case <-c.stopRSS:
			return
		case <-t.C:
		}
	}
}

// stageRun is what the parent learns of a finished child.
type stageRun struct {
	started, assigned, done time.Time
	wall                    time.Duration
	cpu                     time.Duration
	maxRSS                  int64 // VmHWM: the child's own peak RSS
	rusageMaxRSS            int64 // rusage: can include the parent's RSS (vfork before exec)
	result                  childResult
	series                  []Sample
}

// wait waits for the child (or ctx: SIGTERM, then SIGKILL after 15 s) and
// collects its rusage and series.
func (c *child) wait(ctx context.Context) (*stageRun, error) {
	waitErr := make(chan error, 1)
	go func() {
		<-c.readDone // stdout must be drained before Wait
		waitErr <- c.cmd.Wait()
	}()
	var err error
	select {
	case err = <-waitErr:
	case <-ctx.Done():
		c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err = <-waitErr:
		case <-time.After(15 * time.Second):
			c.cmd.Process.Kill()
			err = <-waitErr
		}
	}
	close(c.stopRSS)
	<-c.rssDone
	c.stderr.Close()
	run := &stageRun{started: c.started, wall: time.Since(c.started)}
	if ps := c.cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			run.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			run.rusageMaxRSS = ru.Maxrss << 10 // KiB on Linux
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// VmHWM sampled every 100 ms misses at most the last 100 ms of the
	// child's life; rusage's maxrss is not used because on Linux a child
	// started with vfork (as Go does) inherits the parent's RSS at exec.
	for _, p := range c.rss {
		run.maxRSS = max(run.maxRSS, p.hwm)
	}
	if c.result == nil {
		if err == nil {
			err = fmt.Errorf("stage child printed no result")
		}
		return run, fmt.Errorf("%w (log: %s)", err, c.stderr.Name())
	}
	run.result = *c.result
	if run.result.Error != "" {
		return run, fmt.Errorf("stage child: %s (log: %s)", run.result.Error, c.stderr.Name())
	}
	if err != nil && ctx.Err() == nil {
		return run, fmt.Errorf("stage child: %w (log: %s)", err, c.stderr.Name())
	}
	run.assigned = time.Unix(0, run.result.AssignedNs)
	if run.result.AssignedNs == 0 {
		run.assigned = c.assigned
	}
	run.done = time.Unix(0, run.result.DoneNs)
	run.series = mergeSeries(run.assigned, c.samples, c.rss)
	return run, nil
}

// mergeSeries puts progress and RSS on one time axis (seconds since
// assignment), each RSS point carrying the latest progress before it.
func mergeSeries(origin time.Time, progress []Sample, rss []rssPoint) []Sample {
	out := make([]Sample, 0, len(rss))
	j := 0
	var last Sample
	zero := float64(origin.UnixNano()) / 1e9
	for _, p := range rss {
		at := float64(p.at.UnixNano()) / 1e9
		for j < len(progress) && progress[j].T <= at {
			last = progress[j]
			j++
		}
		out = append(out, Sample{T: round3(at - zero), RSS: p.rss, Done: last.Done, Committed: last.Committed, GoHeap: last.GoHeap})
	}
	return out
}

func round3(f float64) float64 { return float64(int64(f*1000)) / 1000 }

// goHeapBytes is the live Go heap (runtime/metrics, no stop-the-world).
func goHeapBytes() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}
