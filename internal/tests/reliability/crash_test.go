package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/failpoint"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/storage"
)

// crashLong selects the long variants (make reliability).
var crashLong = os.Getenv("DELTAFLOW_SCENARIO_LONG") == "1"

// crashApp is table.app_id's default, the prefix of the txn appIds.
const crashApp = "deltaflow"

// crashRig is one scenario's servers, topic, table and binary: deltaflow
// processes started from it share the topic, consumer group and table.
type crashRig struct {
	t       *testing.T
	bin     string
	servers scenario.Servers
	topic   string
	group   string
	table   string // table.name: names the DLQ stream, KV keys and subjects
	uri     string
	store   storage.Store
	config  string
}

// newCrashRig creates a topic of partitions on the test servers, a bucket
// for the table and a scenario config; tags select the binary's build.
func newCrashRig(t *testing.T, name string, partitions int32, sections map[string]any, tags ...string) *crashRig {
	t.Helper()
	s3 := testenv.MinIO(t)
	r := &crashRig{
		t:       t,
		bin:     scenario.Binary(t, tags...),
		servers: scenario.Servers{Brokers: testenv.Kafka(t), NATSURL: testenv.NATS(t), S3: s3},
		topic:   scenario.Unique(name),
		group:   scenario.Unique(name + "-group"),
		table:   strings.ReplaceAll(scenario.Unique(name), "-", "_"),
		uri:     "s3://" + s3.Bucket + "/sensor_events",
	}
	r.config = scenario.WriteConfig(t, r.table, sections)
	kcfg := kafka.DefaultConfig()
	kcfg.Brokers = r.servers.Brokers
	if err := kafka.CreateTopic(t.Context(), kcfg, r.topic, partitions, -1); err != nil {
		t.Fatal(err)
	}
	store, err := storage.Open(t.Context(), r.uri, storage.Options{Endpoint: s3.Endpoint, AccessKey: s3.AccessKey, SecretKey: string(s3.SecretKey)})
	if err != nil {
		t.Fatal(err)
	}
	r.store = store
	return r
}

func (r *crashRig) env(extra ...string) []string {
	return append(r.servers.Env(r.topic, r.group, r.uri, "127.0.0.1:0"), extra...)
}

// run starts `deltaflow run` on the rig's config.
func (r *crashRig) run(name string, extraEnv ...string) *scenario.Daemon {
	return scenario.Start(r.t, name, r.bin, r.env(extraEnv...), "run", "--config", r.config)
}

// produce starts `deltaflow produce` writing simulated sensor records, a
// few of them malformed (bound for the DLQ), at rate per second; count 0
// means until stopped.
func (r *crashRig) produce(count, rate int) *scenario.Daemon {
	return scenario.Start(r.t, "producer", r.bin, r.env(), "produce", "--count", strconv.Itoa(count),
		"--rate", strconv.Itoa(rate), "--bad-ratio", "0.002", "--seed", strconv.FormatInt(time.Now().UnixNano(), 10))
}

// caughtUp reports whether the table holds every record the topic holds
// now: each partition's txn version is its end offset - 1.
func (r *crashRig) caughtUp(ctx context.Context) bool {
	hw := testenv.HighWatermarks(r.t, r.servers.Brokers, r.topic)
	snap, err := delta.NewTable(r.store).Snapshot(ctx)
	if err != nil {
		return false
	}
	committed := ledger.Next(snap, crashApp, r.topic, slices.Collect(maps.Keys(hw)))
	for p, end := range hw {
		if end > 0 && committed[p] != end {
			return false
		}
	}
	return true
}

// waitCaughtUp waits until the table holds everything the topic holds,
// failing with the daemons' logs otherwise.
func (r *crashRig) waitCaughtUp(timeout time.Duration, daemons ...*scenario.Daemon) time.Duration {
	r.t.Helper()
	start := time.Now()
	if err := scenario.WaitFor(timeout, func() bool { return r.caughtUp(r.t.Context()) }); err != nil {
		r.t.Fatalf("table not caught up with topic %s within %s\n%s", r.topic, timeout, crashTails(daemons))
	}
	return time.Since(start)
}

// account compares topic, table and DLQ, prints the figures and fails
// unless every record is stored exactly once.
func (r *crashRig) account() scenario.Report {
	r.t.Helper()
	rep := scenario.Check(r.t, scenario.Source{Brokers: r.servers.Brokers, Topic: r.topic, Store: r.store,
		NATSURL: r.servers.NATSURL, Table: r.table})
	if rep.Produced == 0 || rep.Rows == 0 || rep.DLQ == 0 {
		r.t.Errorf("scenario too thin to prove anything: %s", rep)
	}
	return rep
}

// mirrorMatchesLog checks that the NATS KV offsets mirror says what the
// table's txn actions say, for every partition: the hint heals whatever a
// kill left half written. It returns the mismatches.
func (r *crashRig) mirrorMatchesLog() []string {
	r.t.Helper()
	ctx := r.t.Context()
	snap, err := delta.NewTable(r.store).Snapshot(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	nc, err := nats.Connect(r.servers.NATSURL)
	if err != nil {
		r.t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		r.t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, bridge.DefaultKVBucket)
	if err != nil {
		r.t.Fatal(err)
	}
	var bad []string
	for p, next := range ledger.Next(snap, crashApp, r.topic, slices.Collect(maps.Keys(testenv.HighWatermarks(r.t, r.servers.Brokers, r.topic)))) {
		key := bridge.OffsetKey(r.table, r.topic, p)
		var rec bridge.OffsetRecord
		entry, err := kv.Get(ctx, key)
		if err == nil {
			err = json.Unmarshal(entry.Value(), &rec)
		}
		if err != nil || rec.Offset != next-1 {
			bad = append(bad, fmt.Sprintf("%s: kv %+v (%v), log %d", key, rec, err, next-1))
		}
	}
	return bad
}

// verify runs `deltaflow verify --deep`: every live file exists with its
// logged size, row counts and stats.
func (r *crashRig) verify() {
	r.t.Helper()
	d := scenario.Start(r.t, "verify", r.bin, r.env(), "verify", "--table", r.uri, "--deep")
	if err := scenario.WaitFor(5*time.Minute, func() bool { return !d.Running() }); err != nil {
		r.t.Fatalf("deltaflow verify still running after 5m\n%s", d.Tail(4000))
	}
	if err, _ := d.Exited(); err != nil {
		r.t.Fatalf("deltaflow verify: %v\n%s", err, d.Tail(4000))
	}
	r.t.Logf("deltaflow verify --deep: %s", strings.TrimSpace(d.Log.String()))
}

// crashCommits returns the table versions a daemon's log says it committed.
func crashCommits(d *scenario.Daemon) []int64 {
	var out []int64
	sc := bufio.NewScanner(strings.NewReader(d.Log.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), `"msg":"committed"`) {
			continue
		}
		var rec struct {
			Version int64 `json:"version"`
		}
		if json.Unmarshal(line, &rec) == nil {
			out = append(out, rec.Version)
		}
	}
	return out
}

func crashTails(daemons []*scenario.Daemon) string {
	var b strings.Builder
	for _, d := range daemons {
		if d != nil {
			b.WriteString(d.Tail(6000))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// crashPlanned is where one life of the daemon is meant to end.
type crashPlanned struct {
	point string // a failpoint, or "" for a random moment
	hit   int    // the failpoint's hit number
	early bool   // random: during startup, before the first commit
}

func (p crashPlanned) String() string {
	switch {
	case p.point != "":
		return fmt.Sprintf("failpoint %s=%d", p.point, p.hit)
	case p.early:
		return "random, during startup"
	default:
		return "random, after a commit"
	}
}

// TestCrashSIGKILL streams simulated sensor records into the topic while
// deltaflow is SIGKILLed again and again — at random moments and, with the
// failpoints build, exactly mid Parquet upload, between upload and commit,
// between the checkpoint file and _last_checkpoint, and between KV mirror
// writes — and restarted each time. At the end every record the topic holds
// must be in the table or the DLQ exactly once.
//
// Short variant: 24 kills over a record stream at 400/s. Long variant
// (DELTAFLOW_SCENARIO_LONG=1): 1,000,000 records at 8,000/s, killed until
// all are written.
func TestCrashSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers; skipped with -short")
	}
	const minKills = 24
	count, rate := 0, 400
	if crashLong {
		count, rate = 1_000_000, 8000
	}
	// A static group member: the restarted process takes the partitions
	// back at once instead of waiting out its dead predecessor's session.
	r := newCrashRig(t, "crash", 3, map[string]any{"kafka": map[string]any{"instance_id": "deltaflow-crash"}}, "failpoints")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 6))
	producer := r.produce(count, rate)
	defer func() {
		if producer.Running() {
			producer.Kill()
		}
	}()

	// Every sixth life ends at a failpoint, in turn; a point not reached
	// (e.g. no checkpoint fell due) is tried again on the next turn.
	points := []string{failpoint.Upload, failpoint.Commit, failpoint.Checkpoint, failpoint.Mirror}
	maxHit := map[string]int{failpoint.Upload: 6, failpoint.Commit: 3, failpoint.Checkpoint: 1, failpoint.Mirror: 6}
	hit := map[string]int{}
	next := 0
	var recoveries []time.Duration // restart → first commit, of each life that committed
	var last *scenario.Daemon
	for i := 0; i < minKills || crashLong && producer.Running(); i++ {
		plan := crashPlanned{early: rng.IntN(3) == 0}
		var env []string
		if i%6 == 5 {
			plan = crashPlanned{point: points[next%len(points)]}
			plan.hit = 1 + rng.IntN(maxHit[plan.point])
			env = append(env, failpoint.Env+"="+plan.point+"="+strconv.Itoa(plan.hit))
		}
		started := time.Now()
		d := r.run(fmt.Sprintf("deltaflow#%d", i+1), env...)
		last = d
		switch {
		case plan.point != "":
			// It dies by itself at the point.
			if err := scenario.WaitFor(2*time.Minute, func() bool { return !d.Running() }); err != nil {
				plan.point += " (not reached)"
				d.Kill()
			} else if want := fmt.Sprintf("failpoint %s hit %d: SIGKILL", plan.point, plan.hit); !strings.Contains(d.Log.String(), want) {
				t.Fatalf("life %d ended without %q\n%s", i+1, want, d.Tail(6000))
			} else {
				hit[plan.point]++
				next++
			}
		case plan.early:
			time.Sleep(time.Duration(rng.Int64N(int64(1500 * time.Millisecond))))
			d.Kill()
		default:
			// (After the producer has finished there may be nothing left
			// to commit.)
			committed := func() bool {
				return len(crashCommits(d)) > 0 || !d.Running() || !producer.Running() && r.caughtUp(t.Context())
			}
			if err := scenario.WaitFor(3*time.Minute, committed); err != nil || !d.Running() {
				t.Fatalf("life %d: no commit within 3m of the start\n%s", i+1, d.Tail(8000))
			}
			time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Second))))
			d.Kill()
		}
		if err, _ := d.Exited(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("life %d: exit %v, want SIGKILL\n%s", i+1, err, d.Tail(6000))
		}
		recovery := "killed before its first commit"
		if commits := crashCommits(d); len(commits) > 0 {
			took := crashFirstCommit(d, started)
			recoveries = append(recoveries, took)
			recovery = fmt.Sprintf("first commit (v%d) %s after the start, %d commits", commits[0], took, len(commits))
		}
		t.Logf("kill %2d: %-34s after %6s of uptime; %s", i+1, plan, time.Since(started).Round(time.Millisecond), recovery)
	}
	for _, p := range points {
		if hit[p] == 0 {
			t.Errorf("failpoint %s never killed deltaflow", p)
		}
	}

	// The last life: let the producer finish (or stop it), then catch up
	// and stop cleanly.
	if !crashLong {
		if err := producer.Stop(time.Minute); err != nil {
			t.Fatalf("producer: %v\n%s", err, producer.Tail(2000))
		}
	} else if err := scenario.WaitFor(10*time.Minute, func() bool { return !producer.Running() }); err != nil {
		t.Fatalf("producer still running\n%s", producer.Tail(2000))
	}
	if err, _ := producer.Exited(); err != nil {
		t.Fatalf("producer: %v\n%s", err, producer.Tail(2000))
	}
	t.Logf("producer: %s", strings.TrimSpace(producer.Log.String()))
	started := time.Now()
	final := r.run("deltaflow#final")
	if err := scenario.WaitFor(3*time.Minute, func() bool { return len(crashCommits(final)) > 0 || !final.Running() }); err != nil || !final.Running() {
		t.Fatalf("final life: no commit within 3m\n%s\n%s", final.Tail(8000), last.Tail(4000))
	}
	recoveries = append(recoveries, crashFirstCommit(final, started))
	took := r.waitCaughtUp(10*time.Minute, final)
	t.Logf("final life: first commit after %s, caught up %s later", recoveries[len(recoveries)-1], took.Round(time.Millisecond))
	if err := final.Stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, final.Tail(8000))
	}
	slowest := time.Duration(0)
	var sum time.Duration
	for _, d := range recoveries {
		sum += d
		slowest = max(slowest, d)
	}
	t.Logf("recovery (restart → first commit) over %d restarts: mean %s, max %s; failpoint kills %v",
		len(recoveries), (sum / time.Duration(len(recoveries))).Round(time.Millisecond), slowest.Round(time.Millisecond), hit)
	if bad := r.mirrorMatchesLog(); len(bad) > 0 {
		t.Errorf("KV offsets mirror differs from the log after the final stop: %v", bad)
	}
	r.account()
	r.verify()
}

// crashFirstCommit is how long after started the daemon logged its first
// commit (the log's own timestamps, so the polling interval does not count).
func crashFirstCommit(d *scenario.Daemon, started time.Time) time.Duration {
	sc := bufio.NewScanner(strings.NewReader(d.Log.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "committed" {
			return rec.Time.Sub(started).Round(time.Millisecond)
		}
	}
	return 0
}
