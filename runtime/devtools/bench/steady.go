package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/deltaflow/deltaflow/storage"
)

// SteadyReport is steady mode's result: the daemon at a constant, modest
// rate — the Pi's real load is ~17 records/s — rather than draining a
// backlog. CPU and wake-ups are the process's own, read from /proc.
type SteadyReport struct {
	Rate                 float64 `json:"rate"`
	NATS                 string  `json:"nats"` // "embedded" or "external"
	DurationSeconds      float64 `json:"duration_seconds"`
	FlushIntervalSeconds float64 `json:"flush_interval_seconds"`
	Events               int64   `json:"events"`
	RowsCommitted        int64   `json:"rows_committed"`
	Commits              int     `json:"commits"`
	Files                int     `json:"files"`
	// CPUPercent is the process's CPU time over the producing window, in
	// percent of one core.
	CPUPercent   float64 `json:"cpu_percent"`
	AvgRSSBytes  int64   `json:"avg_rss_bytes"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	// Idle: after every row is committed and nothing more arrives.
	IdleSeconds       float64 `json:"idle_seconds"`
	IdleCPUPercent    float64 `json:"idle_cpu_percent"`
	IdleWakeupsPerSec float64 `json:"idle_wakeups_per_second"`
	TableBytes        int64   `json:"table_bytes"`
	TableBytesPerHour float64 `json:"table_bytes_per_hour"`
	Table             string  `json:"table"`
}

// steady runs the daemon at rate events/s for o.SteadyDuration, then idle
// for o.SteadyIdle once every row is committed.
func steady(ctx context.Context, o Options, k *kafkaEnv, rate float64) (*SteadyReport, error) {
	d, err := startDaemon(ctx, o, k, "steady", func(a *stageArgs) { a.noProgress = true })
	if err != nil {
		return nil, err
	}
	table := d.table
	events := int(rate * o.SteadyDuration.Seconds())
	rep := &SteadyReport{Rate: rate, NATS: "embedded", DurationSeconds: o.SteadyDuration.Seconds(),
		FlushIntervalSeconds: d.flush.Seconds(), Events: int64(events), Table: table}
	if o.NATSURL != "" {
		rep.NATS = "external"
	}
	pid := d.pid()
	fmt.Fprintf(o.Log, "bench: steady: %d events at %.0f/s for %s (NATS %s, flush interval %s) ...\n",
		events, rate, o.SteadyDuration, rep.NATS, d.flush)
	cpu0, t0 := procCPU(pid), time.Now()
	if _, err := k.produce(ctx, d.topic, events, o.Devices, rate, 3); err != nil {
		return nil, d.abort(fmt.Errorf("produce: %w", err))
	}
	cpu1, t1 := procCPU(pid), time.Now()
	rep.CPUPercent = round3(100 * (cpu1 - cpu0).Seconds() / t1.Sub(t0).Seconds())
	rep.AvgRSSBytes, rep.PeakRSSBytes = d.c.rssBetween(t0, t1)
	sum, err := d.waitCommitted(ctx, o, int64(events))
	if err != nil {
		return nil, d.abort(err)
	}
	rep.RowsCommitted, rep.Commits, rep.Files = sum.Rows, sum.Commits, sum.Files
	if rep.TableBytes, err = storedBytes(ctx, table, o.S3); err != nil {
		return nil, d.abort(err)
	}
	rep.TableBytesPerHour = round3(float64(rep.TableBytes) / t1.Sub(t0).Hours())

	// Idle: nothing arrives; what does the process do?
	cpu2, sw2, t2 := procCPU(pid), procSwitches(pid), time.Now()
	if err := d.sleep(ctx, o.SteadyIdle); err != nil {
		return nil, d.abort(err)
	}
	cpu3, sw3, t3 := procCPU(pid), procSwitches(pid), time.Now()
	idle := t3.Sub(t2).Seconds()
	rep.IdleSeconds = round3(idle)
	rep.IdleCPUPercent = round3(100 * (cpu3 - cpu2).Seconds() / idle)
	rep.IdleWakeupsPerSec = round3(float64(sw3-sw2) / idle)

	if _, err := d.stop(); err != nil {
		return nil, err
	}
	return rep, nil
}

// rssBetween averages the child's sampled RSS between two instants and
// returns its peak (VmHWM) by the later one.
func (c *child) rssBetween(from, to time.Time) (avg, peak int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum, n int64
	for _, p := range c.rss {
		if p.at.After(to) {
			break
		}
		peak = max(peak, p.hwm)
		if !p.at.Before(from) {
			sum += p.rss
			n++
		}
	}
	if n > 0 {
		avg = sum / n
	}
	return avg, peak
}

// storedBytes is the size of every object of the table: data files and log.
func storedBytes(ctx context.Context, uri string, opts storage.Options) (int64, error) {
	store, err := storage.Open(ctx, uri, opts)
	if err != nil {
		return 0, err
	}
	objs, err := store.List(ctx, "", "")
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", uri, err)
	}
	var n int64
	for _, o := range objs {
		n += o.Size
	}
	return n, nil
}

// clockTick is USER_HZ, the unit of /proc's CPU times: 100 on every Linux
// architecture Go runs on.
const clockTick = 10 * time.Millisecond

// procCPU is the process's user + system CPU time so far, all threads.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name is in parentheses and may hold spaces: fields
	// count from after the last ')'. utime and stime are fields 14 and
	// 15 of the line, so 12 and 13 after the name.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * clockTick
}

// procSwitches counts the context switches of all the process's threads:
// each voluntary one is a sleep that something woke, the number that
// tells busy polling from waiting.
func procSwitches(pid int) int64 {
	dirs, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/status")
	var n int64
	for _, d := range dirs {
		data, err := os.ReadFile(d)
		if err != nil {
			continue // the thread ended
		}
		for line := range strings.Lines(string(data)) {
			for _, key := range []string{"voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"} {
				if rest, ok := strings.CutPrefix(line, key); ok {
					v, _ := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
					n += v
				}
			}
		}
	}
	return n
}
