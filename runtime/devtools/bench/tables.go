package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/deltaflow/deltaflow/runtime/daemon"
)

// TablesReport is --tables N's result: the daemon draining N topics into N
// tables (the throughput run's events, split evenly) against the one-table
// e2e of the same run, and what each table beyond the first costs an idle
// daemon.
type TablesReport struct {
	Tables       int     `json:"tables"`
	Events       int64   `json:"events"`
	Seconds      float64 `json:"seconds"` // assignment → the last table's last commit
	EPS          float64 `json:"eps"`
	VsOneTable   float64 `json:"vs_one_table"` // EPS / the one-table e2e's
	CPUSeconds   float64 `json:"cpu_seconds"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	Commits      int     `json:"commits"`
	// Idle: the daemon with one table and with N on empty topics, watched
	// for IdleSeconds after it settled.
	IdleSeconds    float64   `json:"idle_seconds"`
	IdleRSSBytes   []int64   `json:"idle_rss_bytes"`          // average RSS, one table then N
	IdleWakeups    []float64 `json:"idle_wakeups_per_second"` // one table then N
	IdleCPUPercent []float64 `json:"idle_cpu_percent"`        // one table then N
	// Per table beyond the first.
	ExtraTableRSSBytes      int64   `json:"extra_table_rss_bytes"`
	ExtraTableWakeupsPerSec float64 `json:"extra_table_wakeups_per_second"`
}

// tableTopics are the topics of n bench tables fed from topic: topic
// itself for one, else topic-0 … topic-(n-1).
func tableTopics(topic string, n int) []string {
	if n <= 1 {
		return []string{topic}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = topic + "-" + strconv.Itoa(i)
	}
	return out
}

// benchRoutes makes cfg a tables list of n routes, topic-i into the table
// t<i> under uri, each with cfg's table settings, flush and maintenance.
func benchRoutes(cfg *daemon.Config, topic, uri string, n int) {
	for i, t := range tableTopics(topic, n) {
		tc := cfg.Table
		tc.URI, tc.Name = tableURI(uri, i), "bench_t"+strconv.Itoa(i)
		cfg.Tables = append(cfg.Tables, daemon.RouteConfig{TableConfig: tc, Topics: []string{t}, Flush: cfg.Flush,
			Maintenance: cfg.Maintenance})
	}
	cfg.Kafka.Topic = ""
}

// tableURI is table i's URI under uri (a local directory or an s3 prefix).
func tableURI(uri string, i int) string {
	return strings.TrimSuffix(uri, "/") + "/t" + strconv.Itoa(i)
}

// tablesRun drains the topics of n tables with one daemon, then measures an
// idle daemon with one table and with n.
func tablesRun(ctx context.Context, o Options, k *kafkaEnv, rep *Report) error {
	n := o.Tables
	topic := k.prefix + "tables"
	per := o.Events / n
	var bytes int64
	for i, t := range tableTopics(topic, n) {
		if err := k.createTopic(ctx, t, o.Partitions); err != nil {
			return err
		}
		b, err := k.produce(ctx, t, per, o.Devices, 0, int64(10+i))
		if err != nil {
			return fmt.Errorf("produce %s: %w", t, err)
		}
		bytes += b
	}
	uri := filepath.Join(o.Dir, "tables")
	if strings.HasPrefix(o.Table, "s3://") || strings.HasPrefix(o.Table, "s3a://") {
		uri = strings.TrimSuffix(o.Table, "/") + fmt.Sprintf("/bench-tables-%d", time.Now().Unix())
	}
	fmt.Fprintf(o.Log, "bench: %d tables: %d events each ...\n", n, per)
	a := stageArgs{stage: StageE2E, brokers: strings.Join(k.brokers, ","), topic: topic, tables: n,
		group: "bench-tables-" + strconv.FormatInt(time.Now().UnixNano(), 36), events: int64(per * n), flush: o.FlushInterval,
		s3: s3FlagsOf(o.S3), config: o.Config, table: uri, natsDir: natsDirFor(o.Dir, "tables"), untilLatest: true}
	if o.CPUProfile != "" {
		a.cpuProfile = o.CPUProfile + ".tables"
	}
	if o.MemProfile != "" {
		a.memProfile = o.MemProfile + ".tables"
	}
	run, err := runChild(ctx, o, a, nil)
	if err != nil {
		return fmt.Errorf("%d tables: %w", n, err)
	}
	tr := &TablesReport{Tables: n, CPUSeconds: round3(run.cpu.Seconds()), PeakRSSBytes: run.maxRSS}
	var last time.Time
	for i := range n {
		sum, err := summarize(ctx, tableURI(uri, i), o.S3)
		if err != nil {
			return err
		}
		if err := refineCommitTimes(ctx, tableURI(uri, i), o.S3, sum.commits); err != nil {
			return err
		}
		tr.Events += sum.Rows
		tr.Commits += sum.Commits
		if c := len(sum.commits); c > 0 && sum.commits[c-1].At.After(last) {
			last = sum.commits[c-1].At
		}
	}
	if tr.Seconds = round3(last.Sub(run.assigned).Seconds()); tr.Seconds > 0 {
		tr.EPS = float64(tr.Events) / tr.Seconds
	}
	if rep.E2EEPS > 0 {
		tr.VsOneTable = round3(tr.EPS / rep.E2EEPS)
	}
	for _, tables := range []int{1, n} {
		rss, wakeups, cpu, err := idleCost(ctx, o, k, tables)
		if err != nil {
			return fmt.Errorf("idle with %d tables: %w", tables, err)
		}
		tr.IdleRSSBytes, tr.IdleWakeups, tr.IdleCPUPercent = append(tr.IdleRSSBytes, rss), append(tr.IdleWakeups, wakeups),
			append(tr.IdleCPUPercent, cpu)
	}
	tr.IdleSeconds = o.TablesIdle.Seconds()
	tr.ExtraTableRSSBytes = (tr.IdleRSSBytes[1] - tr.IdleRSSBytes[0]) / int64(n-1)
	tr.ExtraTableWakeupsPerSec = round3((tr.IdleWakeups[1] - tr.IdleWakeups[0]) / float64(n-1))
	rep.Tables = tr
	return nil
}

// tablesSettle is how long an idle daemon runs before it is watched (at
// most TablesIdle): its start (the tables' first commits, the group's
// join) is not idleness.
const tablesSettle = 10 * time.Second

// idleCost runs the daemon with tables tables on empty topics and returns
// its average RSS, wake-ups per second and CPU percent over o.TablesIdle.
func idleCost(ctx context.Context, o Options, k *kafkaEnv, tables int) (rss int64, wakeups, cpu float64, err error) {
	d, err := startDaemon(ctx, o, k, "idle"+strconv.Itoa(tables), func(a *stageArgs) { a.tables, a.noProgress = tables, true })
	if err != nil {
		return 0, 0, 0, err
	}
	if err := d.sleep(ctx, min(tablesSettle, o.TablesIdle)); err != nil {
		return 0, 0, 0, d.abort(err)
	}
	pid := d.pid()
	cpu0, sw0, t0 := procCPU(pid), procSwitches(pid), time.Now()
	if err := d.sleep(ctx, o.TablesIdle); err != nil {
		return 0, 0, 0, d.abort(err)
	}
	cpu1, sw1, t1 := procCPU(pid), procSwitches(pid), time.Now()
	rss, _ = d.c.rssBetween(t0, t1)
	secs := t1.Sub(t0).Seconds()
	if _, err := d.stop(); err != nil {
		return 0, 0, 0, err
	}
	return rss, round3(float64(sw1-sw0) / secs), round3(100 * (cpu1 - cpu0).Seconds() / secs), nil
}
