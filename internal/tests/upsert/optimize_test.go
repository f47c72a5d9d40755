package upsert

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
)

// TestUpsertWithSparkOptimize: deltaflow (`deltaflow run` in the
// background, an epoch every 200ms: many small files, and a new deletion
// vector on a file for each epoch that replaces or deletes rows in it)
// upserts keyed changes while Spark 3.5 / delta-spark 3.2, in one JVM
// (scripts/spark/upsert_optimize.py), compacts the same table again and
// again: OPTIMIZE, OPTIMIZE, REORG TABLE ... APPLY (PURGE), REORG, ...,
// retrying a round that loses to one of deltaflow's commits.
//
// Each cycle is a burst of updates and tombstones of 400 keys (deleted
// keys coming back), then one of Spark's rounds. During an odd cycle's
// round new keys stream in: deltaflow's epochs of them commit while the
// round runs (Spark's commit absorbs them) and the one in flight when
// Spark commits is reconciled with it. During an even cycle's round
// deltaflow is idle, so the next burst's first epoch, resolved against the
// snapshot before Spark's commit, marks rows in files Spark removed: a
// conflict, re-read, never a lost delete or a key twice.
//
// The bursts wait for Spark's round to end: delta-spark's OPTIMIZE (and
// REORG), after losing to a commit that gave one of its files a new
// deletion vector, retries its commit with the file's old vector
// (OptimizeExecutor.commitAndRetry checks only that the files' paths are
// still in the table): the rows that commit deleted come back, and the
// file's rows are in the table twice. DELTAFLOW_TEST_SPARK_OPTIMIZE_FREE_RUN=1
// lets the rounds run through the bursts, which shows it.
//
// Once the changes stop and deltaflow has caught up and stopped, delta-rs,
// DuckDB and Spark read each live key's latest value once, and verify
// --deep passes. The log shows the race: Spark's OPTIMIZE and REORG
// commits between deltaflow's STREAMING UPDATEs carrying new offsets,
// commits of one writer in flight across the other's, deltaflow's epochs
// lost to Spark's commits, and no commit removing a file (with its
// deletion vector) the table did not hold at the version before it.
func TestUpsertWithSparkOptimize(t *testing.T) {
	r := newRig(t)
	py, sparkDir := testenv.Spark(t)
	const keys = 400
	freeRun := os.Getenv("DELTAFLOW_TEST_SPARK_OPTIMIZE_FREE_RUN") == "1"

	df, metricsAddr := r.start("FLUSH_INTERVAL=200ms")
	r.changes(1500, keys)
	r.waitCaughtUp(df, 2*time.Minute)

	work := t.TempDir()
	stop := filepath.Join(work, "stop")
	args := []string{"--stop", stop, "--ops", "OPTIMIZE,OPTIMIZE,REORG,REORG"}
	if freeRun {
		args = append(args, "--sleep", "1.5")
	} else {
		args = append(args, "--go-dir", work)
	}
	spark := startSpark(t, py, sparkDir, "upsert_optimize.py", append(args, r.dir)...)

	burst := func() { // updates and tombstones, several epochs
		for range 8 {
			r.changes(25, keys)
			time.Sleep(100 * time.Millisecond)
		}
	}
	nextID := int64(100_000) // new keys: above every key the table holds, so epochs of them only append
	insert := func() {
		cs := make([]keyChange, 10)
		for i := range cs {
			cs[i] = keyChange{nextID, &account{Name: fmt.Sprintf("new%d", nextID), Balance: nextID}}
			nextID++
		}
		r.produce(cs...)
	}
	deadline := time.Now().Add(4 * time.Minute)
	for !spark.state(t).ready { // the JVM starting: more small files meanwhile
		burst()
		time.Sleep(time.Second)
		if time.Now().After(deadline) {
			t.Fatalf("Spark not ready\n%s", spark.tail())
		}
	}
	start := time.Now()
	if freeRun {
		deadline = start.Add(2 * time.Minute)
	}
	for cycle := 1; ; cycle++ {
		burst()
		if freeRun {
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
				insert()
				time.Sleep(100 * time.Millisecond)
			}
		} else {
			r.waitCaughtUp(df, 2*time.Minute)
			if err := os.WriteFile(filepath.Join(work, fmt.Sprintf("go-%d", cycle)), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			// During an odd cycle's round new keys stream in: deltaflow's
			// epochs of them commit while Spark's round runs, and the one
			// in flight when Spark commits is reconciled with it. During an
			// even one deltaflow is idle: the next burst's first epoch
			// resolves against the snapshot before Spark's commit, and is
			// its conflict.
			for len(spark.state(t).rounds) < cycle {
				if cycle%2 == 1 {
					insert()
				}
				time.Sleep(100 * time.Millisecond)
				if time.Now().After(deadline) {
					t.Fatalf("Spark's round %d did not end\n%s", cycle, spark.tail())
				}
			}
		}
		if !df.Running() {
			t.Fatalf("deltaflow run exited during the changes\n%s", df.Tail(8000))
		}
		ops := r.tableLog().sparkOps()
		if ops["OPTIMIZE"] >= 2 && ops["REORG"] >= 2 && cycle >= 4 || freeRun && time.Now().After(deadline) {
			t.Logf("%d cycles of changes and Spark's rounds in %s: Spark committed %v", cycle, time.Since(start).Round(time.Second), ops)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Spark committed %v in %d cycles\n%s", ops, cycle, spark.tail())
		}
	}

	burst() // after Spark's last commit
	r.waitCaughtUp(df, 2*time.Minute)
	conflicts := scrapeCounter(t, metricsAddr, "deltaflow_commit_conflicts_total")
	if err := df.Stop(30 * time.Second); err != nil {
		t.Errorf("deltaflow run after SIGTERM: %v\n%s", err, df.Tail(8000))
	}
	dropped := regexp.MustCompile(`epoch \d+ dropped: delta: concurrent commit (\d+)`).FindAllStringSubmatch(df.Log.String(), -1)
	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	done := spark.wait(t)
	for _, rd := range spark.state(t).rounds {
		t.Logf("Spark's round %d, %s: %d attempt(s), %d files added, %d removed, %.1fs %v",
			rd.Round, rd.Op, rd.Attempts, rd.FilesAdded, rd.FilesRemoved, rd.Seconds, rd.Errors)
	}

	// The race: Spark's commits between deltaflow's, and overlapping them.
	tl := r.tableLog()
	race := raceOf(tl)
	var lost []string
	lostTo := map[string]int{} // Spark's operations deltaflow's epochs lost to
	for _, d := range dropped {
		v, _ := strconv.ParseInt(d[1], 10, 64)
		lost = append(lost, fmt.Sprintf("v%d (%s)", v, tl.op(v)))
		if c, ok := tl.at(v); ok && c.fromSpark() {
			lostTo[c.operation]++
		}
	}
	t.Logf("log: %d versions, %d STREAMING UPDATEs of deltaflow, Spark's commits %v; Spark: %d rounds, %d retried, "+
		"%d retries of OPTIMIZE's own; deltaflow: %v conflicts counted, %d logged, epochs lost to %v",
		len(tl), race.streaming, race.spark, done.Rounds, done.Retries, strings.Count(spark.stderr.String(),
			"Retrying commit after checking for semantic conflicts"), conflicts, len(dropped), lost)
	t.Logf("in flight across the other's commit: %d of deltaflow's commits (reconciled), %d of Spark's",
		race.deltaflowOverSpark, race.sparkOverDeltaflow)
	for _, s := range race.stale {
		t.Errorf("%s", s)
	}
	if race.between["OPTIMIZE"] < 2 || race.between["REORG"] < 2 {
		t.Errorf("Spark's commits between deltaflow's STREAMING UPDATEs (later ones carrying new offsets): %v, want 2 OPTIMIZE and 2 REORG; log %v",
			race.between, race.spark)
	}
	if !freeRun && (lostTo["OPTIMIZE"] == 0 || lostTo["REORG"] == 0) || race.deltaflowOverSpark+race.sparkOverDeltaflow == 0 {
		t.Errorf("no race: deltaflow's epochs lost to Spark's %v (want an OPTIMIZE and a REORG), %d commits in flight across the other writer's",
			lostTo, race.deltaflowOverSpark+race.sparkOverDeltaflow)
	}

	if got := accounts(t, done.Rows); !maps.Equal(got, r.want) {
		t.Errorf("Spark reads %d keys, want %d (%s)", len(got), len(r.want), scenario.MapDiff(got, r.want))
	}
	r.check("after Spark's OPTIMIZEs during the upserts")
	r.verify()
}

// start starts `deltaflow run` (no --until-latest) on the rig's config in
// the background with extraEnv, its HTTP endpoints on a free port; it is
// killed at the end of the test if still running. It returns the daemon
// and the address of /metrics.
func (r *rig) start(extraEnv ...string) (*scenario.Daemon, string) {
	r.t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", scenario.FreePort(r.t))
	env := append(r.servers.Env(r.topic, r.group, r.dir, addr), extraEnv...)
	return scenario.Start(r.t, "deltaflow run", scenario.Binary(r.t), env, "run", "--config", r.config), addr
}

// waitCaughtUp waits until the table's log records every partition's end
// offset: the daemon has committed everything produced so far.
func (r *rig) waitCaughtUp(d *scenario.Daemon, timeout time.Duration) {
	r.t.Helper()
	hw := testenv.HighWatermarks(r.t, r.brokers, r.topic)
	err := scenario.WaitFor(timeout, func() bool {
		last := r.tableLog().offsets(r.topic)
		for p, end := range hw {
			if end > 0 && last[p] != end-1 {
				return false
			}
		}
		return d.Running()
	})
	if err != nil || !d.Running() {
		r.t.Fatalf("the table did not reach the end offsets %v within %s (log: %v)\n%s", hw, timeout,
			r.tableLog().offsets(r.topic), d.Tail(8000))
	}
}

// scrapeCounter sums the samples of a metric on /metrics at addr (-1: it
// could not be read).
func scrapeCounter(t *testing.T, addr, name string) float64 {
	t.Helper()
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Logf("scrape %s: %v", name, err)
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for line := range strings.Lines(string(body)) {
		if rest, ok := strings.CutPrefix(line, name); ok && rest != "" && (rest[0] == '{' || rest[0] == ' ') {
			if v, err := strconv.ParseFloat(strings.TrimSpace(rest[strings.LastIndexByte(rest, ' ')+1:]), 64); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// logCommit is one commit of a table's _delta_log, as the test reads it.
type logCommit struct {
	version     int64
	operation   string
	engine      string
	readVersion int64            // -1: none recorded
	txns        map[string]int64 // appId → version
	// adds and removes are the files added and removed, each as its path
	// and deletion vector's unique id (the Delta protocol's identity of a
	// logical file: a new vector on a file is a remove and an add).
	adds, removes []string
	// cdcs are the cdc actions, as written.
	cdcs []json.RawMessage
}

// fileAction is an add or remove action: its path and deletion vector.
type fileAction struct {
	Path           string
	DeletionVector *struct {
		StorageType    string
		PathOrInlineDv string
		Offset         *int32
	}
}

// id is the logical file's identity: the path, and the vector's unique id
// (storage type, path or inline vector, and @offset when it has one).
func (f fileAction) id() string {
	dv := f.DeletionVector
	if dv == nil {
		return f.Path
	}
	id := f.Path + " dv " + dv.StorageType + dv.PathOrInlineDv
	if dv.Offset != nil {
		id += "@" + strconv.Itoa(int(*dv.Offset))
	}
	return id
}

// tableLog is a table's commits by version.
type tableLog []logCommit

// tableLog reads every JSON commit of the rig's table (deltaflow keeps
// them all: log cleanup only removes those older than the log retention),
// each once (a commit file is written whole, and never changes).
func (r *rig) tableLog() tableLog {
	r.t.Helper()
	t := r.t
	if r.commits == nil {
		r.commits = map[int64]logCommit{}
	}
	names, err := filepath.Glob(filepath.Join(r.dir, "_delta_log", "[0-9]*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out tableLog
	for _, name := range names {
		v, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(name), ".json"), 10, 64)
		if err != nil || len(filepath.Base(name)) != 25 {
			continue
		}
		if c, ok := r.commits[v]; ok {
			out = append(out, c)
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		c := logCommit{version: v, readVersion: -1, txns: map[string]int64{}}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var a struct {
				CommitInfo *struct {
					Operation   string `json:"operation"`
					EngineInfo  string `json:"engineInfo"`
					ReadVersion *int64 `json:"readVersion"`
				} `json:"commitInfo"`
				Txn *struct {
					AppID   string `json:"appId"`
					Version int64  `json:"version"`
				} `json:"txn"`
				Add, Remove *fileAction
				Cdc         json.RawMessage
			}
			if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			switch {
			case a.CommitInfo != nil:
				c.operation, c.engine = a.CommitInfo.Operation, a.CommitInfo.EngineInfo
				if a.CommitInfo.ReadVersion != nil {
					c.readVersion = *a.CommitInfo.ReadVersion
				}
			case a.Txn != nil:
				c.txns[a.Txn.AppID] = a.Txn.Version
			case a.Add != nil:
				c.adds = append(c.adds, a.Add.id())
			case a.Remove != nil:
				c.removes = append(c.removes, a.Remove.id())
			case a.Cdc != nil:
				c.cdcs = append(c.cdcs, a.Cdc)
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r.commits[v] = c
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b logCommit) int { return int(a.version - b.version) })
	return out
}

// offsets are the last offsets of topic's partitions the log records
// (deltaflow's txn appIds "deltaflow-<topic>-<partition>").
func (l tableLog) offsets(topic string) map[int32]int64 {
	out := map[int32]int64{}
	for _, c := range l {
		for id, v := range c.txns {
			rest, ok := strings.CutPrefix(id, "deltaflow-"+topic+"-")
			if p, err := strconv.ParseInt(rest, 10, 32); ok && err == nil {
				out[int32(p)] = max(out[int32(p)], v)
			}
		}
	}
	return out
}

// at is the commit at version v.
func (l tableLog) at(v int64) (logCommit, bool) {
	i, ok := slices.BinarySearchFunc(l, v, func(c logCommit, v int64) int { return int(c.version - v) })
	if !ok {
		return logCommit{}, false
	}
	return l[i], true
}

// op names the commit at version v: its writer and operation.
func (l tableLog) op(v int64) string {
	c, ok := l.at(v)
	if !ok {
		return "?"
	}
	return c.engine + " " + c.operation
}

// sparkOps counts Spark's commits by operation.
func (l tableLog) sparkOps() map[string]int {
	ops := map[string]int{}
	for _, c := range l {
		if c.fromSpark() {
			ops[c.operation]++
		}
	}
	return ops
}

// fromSpark reports whether the commit is Spark's (engineInfo
// "Apache-Spark/3.5.1 Delta-Lake/3.2.0").
func (c logCommit) fromSpark() bool { return strings.HasPrefix(c.engine, "Apache-Spark") }

// fromDeltaflow reports whether the commit is one of deltaflow's epochs.
func (c logCommit) fromDeltaflow() bool {
	return strings.HasPrefix(c.engine, "deltaflow") && c.operation == "STREAMING UPDATE"
}

// race is what a log says of two writers: deltaflow's epochs and Spark's
// maintenance.
type race struct {
	streaming int
	spark     []string // Spark's commits, "v<version> <operation>"
	// between counts, by operation, Spark's commits with one of deltaflow's
	// STREAMING UPDATEs before them and one carrying new offsets after.
	between map[string]int
	// deltaflowOverSpark counts deltaflow's commits whose read version is
	// before one of Spark's commits they follow (the epoch was in flight
	// while Spark committed, and was reconciled with it); sparkOverDeltaflow
	// the converse.
	deltaflowOverSpark, sparkOverDeltaflow int
	// stale names each commit that removed a file (with its deletion
	// vector) the table did not hold at the version before it: a writer
	// that committed over a change it did not see.
	stale []string
}

func raceOf(l tableLog) race {
	r := race{between: map[string]int{}}
	// heldAt[i]: the txns the log holds at l[i].
	held := map[string]int64{}
	heldAt := make([]map[string]int64, len(l))
	live := map[string]int64{} // logical file → the version that added it
	gone := map[string]int64{} // … → the version that removed it
	for i, c := range l {
		maps.Copy(held, c.txns)
		heldAt[i] = maps.Clone(held)
		var stale []string
		for _, f := range c.removes {
			if _, ok := live[f]; !ok {
				what := "never added"
				if v, ok := gone[f]; ok {
					what = fmt.Sprintf("removed at v%d", v)
				}
				stale = append(stale, fmt.Sprintf("%s (%s)", f, what))
			}
			delete(live, f)
			gone[f] = c.version
		}
		for _, f := range c.adds {
			live[f] = c.version
		}
		if len(stale) > 0 {
			who := "deltaflow's commit: it removed a file another writer had removed or given a new deletion vector: a lost conflict"
			if c.fromSpark() {
				who = "Spark's commit (delta-spark's OPTIMIZE retried with a file's old deletion vector after a commit gave it a new one: the rows that commit deleted are back, the file's rows twice)"
			}
			r.stale = append(r.stale, fmt.Sprintf("v%d %s (read v%d) removes %d file(s) the table did not hold at v%d: %s; %s",
				c.version, c.operation, c.readVersion, len(stale), c.version-1, strings.Join(stale[:min(len(stale), 3)], ", "), who))
		}
	}
	for i, c := range l {
		switch {
		case c.fromDeltaflow():
			r.streaming++
		case c.fromSpark():
			r.spark = append(r.spark, fmt.Sprintf("v%d %s", c.version, c.operation))
		}
		// Commits in (readVersion, version) are the ones this one absorbed.
		for _, o := range l[:i] {
			if c.readVersion < 0 || o.version <= c.readVersion {
				continue
			}
			if c.fromDeltaflow() && o.fromSpark() {
				r.deltaflowOverSpark++
				break
			}
			if c.fromSpark() && o.fromDeltaflow() {
				r.sparkOverDeltaflow++
				break
			}
		}
		if !c.fromSpark() || c.operation != "OPTIMIZE" && c.operation != "REORG" {
			continue
		}
		before := slices.ContainsFunc(l[:i], logCommit.fromDeltaflow)
		after := slices.ContainsFunc(l[i+1:], func(o logCommit) bool {
			if !o.fromDeltaflow() {
				return false
			}
			for id, v := range o.txns {
				if v > heldAt[i][id] {
					return true
				}
			}
			return false
		})
		if before && after {
			r.between[c.operation]++
		}
	}
	return r
}

// sparkRun is a Spark script running in the background: its JSON lines
// as they come.
type sparkRun struct {
	script         string
	stdout, stderr *testenv.SyncBuffer
	exited         chan struct{}
	err            error // Wait's, valid once exited is closed
}

// sparkRound is a line {"event": "round"} of upsert_optimize.py.
type sparkRound struct {
	Round                    int
	Op                       string
	Attempts                 int
	Errors                   []string
	FilesAdded, FilesRemoved int64
	Seconds                  float64
}

// sparkDone is its last line, {"event": "done"}.
type sparkDone struct {
	Rounds, Retries int
	Rows            []map[string]any
}

// startSpark starts script of the Spark scripts' directory dir under py
// with args, in the background (one JVM, killed at the end of the test if
// still running).
func startSpark(t *testing.T, py, dir, script string, args ...string) *sparkRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	s := &sparkRun{script: script, stdout: &testenv.SyncBuffer{}, stderr: &testenv.SyncBuffer{}, exited: make(chan struct{})}
	cmd := exec.CommandContext(ctx, py, append([]string{filepath.Join(dir, script)}, args...)...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("%s: %v", script, err)
	}
	go func() {
		s.err = cmd.Wait()
		cancel()
		close(s.exited)
	}()
	t.Cleanup(func() {
		cancel()
		<-s.exited
	})
	return s
}

// sparkState is what the script has said so far.
type sparkState struct {
	ready           bool
	rounds          []sparkRound
	optimize, reorg int
	done            *sparkDone
	exited          bool
	exitErr         error
}

func (s *sparkRun) state(t *testing.T) sparkState {
	t.Helper()
	var st sparkState
	select {
	case <-s.exited:
		st.exited, st.exitErr = true, s.err
	default:
	}
	for line := range strings.Lines(s.stdout.String()) {
		var ev struct{ Event string }
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		switch ev.Event {
		case "ready":
			st.ready = true
		case "round":
			var rd sparkRound
			if err := json.Unmarshal([]byte(line), &rd); err != nil {
				t.Fatalf("%s: %v: %s", s.script, err, line)
			}
			st.rounds = append(st.rounds, rd)
			if rd.Op == "REORG" {
				st.reorg++
			} else {
				st.optimize++
			}
		case "done":
			st.done = &sparkDone{}
			if err := json.Unmarshal([]byte(line), st.done); err != nil {
				t.Fatalf("%s: %v", s.script, err)
			}
		}
	}
	if st.exited && (st.exitErr != nil || st.done == nil) {
		t.Fatalf("%s exited: %v\n%s", s.script, st.exitErr, s.tail())
	}
	return st
}

// wait waits for the script to exit and returns its last line.
func (s *sparkRun) wait(t *testing.T) sparkDone {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(5 * time.Minute):
		t.Fatalf("%s did not finish\n%s", s.script, s.tail())
	}
	return *s.state(t).done
}

// tail is the end of the script's stderr and stdout, for failure messages.
func (s *sparkRun) tail() string {
	lines := strings.Split(strings.TrimRight(s.stderr.String(), "\n"), "\n")
	out := s.stdout.String()
	return fmt.Sprintf("--- %s stderr ---\n%s\n--- stdout ---\n%s", s.script, strings.Join(lines[max(0, len(lines)-40):], "\n"), out[max(0, len(out)-4000):])
}
