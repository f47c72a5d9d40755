package reliability

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/ledger"
)

// outagePlan is how long a scenario runs: outages of down each, with the
// producer writing rate records per second from before the first until
// after the last.
type outagePlan struct {
	outages int
	down    time.Duration
	rate    float64
}

func newOutagePlan(down time.Duration, rate float64) outagePlan {
	p := outagePlan{outages: 1, down: down, rate: rate}
	if outageLong() {
		p.outages = 3
	}
	return p
}

// count is how many records the producer writes: enough to keep writing
// through every outage and a little after (the warm-up and each recovery
// take seconds on a quiet machine).
func (p outagePlan) count() int {
	return int(p.rate * (10 + float64(p.outages)*(p.down.Seconds()+10)))
}

// Scenario 2: MinIO stops for a minute mid-ingest, then comes back.
// deltaflow retries its uploads with backoff, pauses reading Kafka once its
// memory budget is full, reports storage as degraded on /readyz, and
// resumes by itself when MinIO is back; nothing is lost or doubled.
func TestOutageMinIO(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers; skipped with -short")
	}
	t.Parallel()
	priv := testenv.PrivateServers(t, "minio")
	servers := scenario.Servers{Brokers: testenv.Kafka(t), NATSURL: testenv.NATS(t), S3: priv.MinIO()}
	const budget = 4 << 20
	// A small budget the outage fills within seconds; one poll (at most
	// max_poll_records rows) is what may pass it before the fetch pauses.
	r := newOutageRig(t, servers, "outage_minio", map[string]any{
		"backpressure": map[string]any{"memory_budget": budget},
		"flush":        map[string]any{"max_bytes": budget / 2},
		"kafka":        map[string]any{"max_poll_records": 1000},
	})
	plan := newOutagePlan(time.Minute, 2000)
	prod := r.produce("producer", plan.count(), plan.rate, 0, 1)
	r.waitCommit(0, time.Now())
	retried := 0 // storage retries logged by the previous outages
	for i := range plan.outages {
		time.Sleep(5 * time.Second) // mid-ingest: epochs are being flushed
		rssBefore := r.rss()
		res := r.outage(priv, "minio", "storage", plan.down, nil)
		w := res.watch
		retries := strings.Count(r.daemon.Log.String(), "failed; retrying")
		t.Logf("outage %d: MinIO down %s; %s; RSS before %.1f MiB; %d storage retries logged; recovery (MinIO back → next commit) %s",
			i+1, plan.down, w, float64(rssBefore)/(1<<20), retries-retried, res.recovery.Round(time.Millisecond))
		if !w.paused {
			t.Errorf("outage %d: fetching never paused (deltaflow_fetch_paused stayed 0): %s", i+1, w)
		}
		if w.peakBuffered > budget+budget/2 {
			t.Errorf("outage %d: %.1f MiB buffered, budget %d MiB", i+1, w.peakBuffered/(1<<20), budget>>20)
		}
		// Unbounded, the minute's records (~50 MiB of rows) would pile up.
		if grown := w.peakRSS - rssBefore; grown > 4*budget {
			t.Errorf("outage %d: RSS grew by %.1f MiB during the outage, budget %d MiB", i+1, float64(grown)/(1<<20), budget>>20)
		}
		// With backoff, a few retries per upload; a retry loop would log
		// hundreds.
		if n := retries - retried; n < 1 || n > 100 {
			t.Errorf("outage %d: %d storage retries logged, want a few (backoff)", i+1, n)
		}
		retried = retries
	}
	r.waitProduced(prod)
	r.waitCaughtUp()
	r.waitFor("/readyz to be ready again", func() bool { ok, _ := r.ready(); return ok })
	r.account()
}

// Scenario 3: the external NATS server stops for a minute, then comes back.
// Ingest goes on (commits land during the outage); an epoch holding bad
// records waits for the DLQ stream to acknowledge them, and says so on
// /readyz, in the log and in deltaflow_dlq_waiting_letters; when NATS is
// back the epoch commits, and the KV offsets mirror and the events catch
// up; nothing is lost or doubled.
func TestOutageNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers; skipped with -short")
	}
	t.Parallel()
	const table = "outage_nats"
	priv := testenv.PrivateServers(t, "nats")
	servers := scenario.Servers{Brokers: testenv.Kafka(t), NATSURL: priv.NATS(), S3: testenv.MinIO(t)}
	natsCLI := testenv.Tool(t, "nats")
	events := newOutageEvents(t, servers.NATSURL, table)
	r := newOutageRig(t, servers, table, nil)
	plan := newOutagePlan(time.Minute, 1000)
	prod := r.produce("producer", plan.count(), plan.rate, 0, 1)
	r.waitCommit(0, time.Now())
	const waits = "epoch waits for the DLQ to acknowledge"
	for i := range plan.outages {
		var during, waiting, stalled float64
		res := r.outage(priv, "nats", "nats", plan.down, func() {
			// Epochs without bad records commit as usual.
			before := r.metric("deltaflow_commits_total")
			r.waitFor("commits during the NATS outage", func() bool { return r.metrics()["deltaflow_commits_total"] >= before+3 })
			during = r.metric("deltaflow_commits_total") - before
			// An epoch with bad records waits for the DLQ, and says so;
			// the commits behind it wait too (the log's order is Kafka's).
			said := strings.Count(r.daemon.Log.String(), waits)
			bad := r.produce("bad producer", 200, 100, 0.5, 100+i)
			r.waitFor("an epoch waiting for the DLQ", func() bool {
				return strings.Count(r.daemon.Log.String(), waits) > said && r.metrics()["deltaflow_dlq_waiting_letters"] > 0
			})
			waiting = r.metric("deltaflow_dlq_waiting_letters")
			stalled = r.metric("deltaflow_commits_total")
			r.waitProduced(bad)
		})
		if res.commits != stalled {
			t.Errorf("outage %d: %v commits while an epoch waited for the DLQ", i+1, res.commits-stalled)
		}
		r.waitFor("the DLQ wait to end", func() bool { return r.metrics()["deltaflow_dlq_waiting_letters"] == 0 })
		t.Logf("outage %d: NATS down %s; %v commits during it before the bad records, then %v dead letters waited; %s; recovery (NATS back → next commit) %s",
			i+1, plan.down, during, waiting, res.watch, res.recovery.Round(time.Millisecond))
	}
	r.waitProduced(prod)
	snap := r.waitCaughtUp()
	r.waitFor("/readyz to be ready again", func() bool { ok, _ := r.ready(); return ok })

	// The KV mirror caught up: each partition's offset is the table's.
	for p := range int32(outagePartitions) {
		key := bridge.OffsetKey(table, r.topic, p)
		want, _ := snap.TxnVersion(ledger.AppID("deltaflow", r.topic, p))
		var rec bridge.OffsetRecord
		r.waitFor("KV "+key+" to catch up", func() bool {
			out, err := exec.Command(natsCLI, "--server", servers.NATSURL, "kv", "get", bridge.DefaultKVBucket, key, "--raw").Output()
			return err == nil && json.Unmarshal(out, &rec) == nil && rec.Offset == want
		})
		t.Logf("nats kv get %s: offset %d (table txn version %d)", key, rec.Offset, want)
	}
	rep := r.account()
	// The events caught up: a commit event for every epoch's commit (not
	// the start offsets' SEEK), and a dlq event for every dead letter.
	versions, letters := events.read(t, r.topic)
	history, err := delta.NewTable(r.store).History(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range history {
		if e.Operation == "STREAMING UPDATE" && !versions[e.Version] {
			t.Errorf("no commit event for version %d (of %d)", e.Version, snap.Version())
		}
	}
	t.Logf("events: %d commit events (table v%d), %d dlq events (%d dead letters)", len(versions), snap.Version(), letters, rep.DLQ)
	if letters != rep.DLQ {
		t.Errorf("%d dlq events for %d dead letters", letters, rep.DLQ)
	}
}

// Scenario 4: the Kafka broker stops mid-ingest (a controlled shutdown)
// and starts again on the same port with the same data. /readyz reports
// Kafka degraded meanwhile; deltaflow's consumer (and the producer)
// reconnect by themselves, the commits go on, and nothing is lost or
// doubled.
func TestOutageKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers; skipped with -short")
	}
	t.Parallel()
	priv := testenv.PrivateServers(t, "kafka")
	servers := scenario.Servers{Brokers: priv.Kafka(), NATSURL: testenv.NATS(t), S3: testenv.MinIO(t)}
	r := newOutageRig(t, servers, "outage_kafka", nil)
	down := 30 * time.Second
	if outageLong() {
		down = time.Minute // past the group's session timeout (45 s): the group reassigns
	}
	plan := newOutagePlan(down, 1000)
	prod := r.produce("producer", plan.count(), plan.rate, 0, 1)
	r.waitCommit(0, time.Now())
	for i := range plan.outages {
		time.Sleep(5 * time.Second) // mid-ingest
		res := r.outage(priv, "kafka", "kafka", plan.down, nil)
		t.Logf("outage %d: Kafka down %s (restart took %s); %s; recovery (broker back → next commit) %s",
			i+1, (plan.down + res.restart).Round(time.Millisecond), res.restart.Round(time.Millisecond), res.watch, res.recovery.Round(time.Millisecond))
	}
	r.waitProduced(prod)
	r.waitCaughtUp()
	r.waitFor("/readyz to be ready again", func() bool { ok, _ := r.ready(); return ok })
	r.account()
}
