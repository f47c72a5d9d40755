package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/storage"
)

// The outage scenarios (outage_test.go) share this rig: one deltaflow run
// process streaming a fresh 3-partition topic into a table on MinIO, a
// producer process writing simulated records at a steady rate, and probes
// of the daemon's /readyz, /metrics and RSS.

const (
	outagePartitions = 3
	// outageWait bounds each wait for the daemon; generous, since the
	// machine is shared and slow.
	outageWait = 3 * time.Minute
)

// outageLong reports whether the long variants run (make reliability).
func outageLong() bool { return os.Getenv("DELTAFLOW_SCENARIO_LONG") == "1" }

// outageRig is one daemon and what a scenario needs to watch it.
type outageRig struct {
	t       *testing.T
	bin     string
	servers scenario.Servers
	table   string // table.name
	topic   string
	uri     string
	store   storage.Store
	http    string // the daemon's /readyz and /metrics
	env     []string
	daemon  *scenario.Daemon
	client  *http.Client
}

// newOutageRig creates the topic, writes the scenario config (sections
// merged over scenario.WriteConfig's) and starts `deltaflow run`; it
// returns once /readyz answers 200.
func newOutageRig(t *testing.T, servers scenario.Servers, table string, sections map[string]any) *outageRig {
	t.Helper()
	r := &outageRig{t: t, bin: scenario.Binary(t), servers: servers, table: table, topic: scenario.Unique("outage"),
		client: &http.Client{Timeout: 5 * time.Second}}
	r.uri = "s3://" + servers.S3.Bucket + "/" + table
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	kcfg := kafka.DefaultConfig()
	kcfg.Brokers = servers.Brokers
	if err := kafka.CreateTopic(ctx, kcfg, r.topic, outagePartitions, -1); err != nil {
		t.Fatal(err)
	}
	store, err := storage.Open(ctx, r.uri, storage.Options{Endpoint: servers.S3.Endpoint,
		AccessKey: servers.S3.AccessKey, SecretKey: string(servers.S3.SecretKey)})
	if err != nil {
		t.Fatalf("open %s: %v", r.uri, err)
	}
	r.store = store
	r.http = fmt.Sprintf("127.0.0.1:%d", scenario.FreePort(t))
	r.env = servers.Env(r.topic, scenario.Unique("outage-group"), r.uri, r.http)
	cfg := scenario.WriteConfig(t, table, sections)
	r.daemon = scenario.Start(t, "deltaflow run", r.bin, r.env, "run", "--config", cfg)
	r.waitFor("/readyz to answer 200", func() bool { ok, _ := r.ready(); return ok })
	return r
}

// produce starts `deltaflow produce` writing count simulated records at
// rate per second (a fraction bad of them malformed) into the topic.
func (r *outageRig) produce(name string, count int, rate, bad float64, seed int) *scenario.Daemon {
	r.t.Helper()
	return scenario.Start(r.t, name, r.bin, r.env, "produce", "--topic", r.topic, "--count", strconv.Itoa(count),
		"--rate", strconv.FormatFloat(rate, 'f', -1, 64), "--bad-ratio", strconv.FormatFloat(bad, 'f', -1, 64),
		"--seed", strconv.Itoa(seed))
}

// waitProduced waits until producer p has written everything and exited 0.
func (r *outageRig) waitProduced(p *scenario.Daemon) {
	r.t.Helper()
	r.waitFor("the producer to finish", func() bool { return !p.Running() })
	if err, _ := p.Exited(); err != nil {
		r.t.Fatalf("producer: %v\n%s", err, p.Tail(4000))
	}
	r.t.Logf("producer: %s", strings.TrimSpace(p.Log.String()))
}

// alive fails the test if the daemon exited.
func (r *outageRig) alive() {
	r.t.Helper()
	if err, exited := r.daemon.Exited(); exited {
		r.t.Fatalf("deltaflow run exited: %v\n%s", err, r.daemon.Tail(8000))
	}
}

// waitFor polls cond (and that the daemon lives) until it holds; after
// outageWait it fails the test with the daemon's log.
func (r *outageRig) waitFor(what string, cond func() bool) {
	r.t.Helper()
	err := scenario.WaitFor(outageWait, func() bool {
		r.alive()
		return cond()
	})
	if err != nil {
		r.t.Fatalf("waiting for %s: %v\n%s", what, err, r.daemon.Tail(8000))
	}
}

// get fetches a path of the daemon's HTTP server.
func (r *outageRig) get(path string) (int, string, error) {
	resp, err := r.client.Get("http://" + r.http + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// ready returns whether /readyz answers 200, and its body (the reasons
// when not ready).
func (r *outageRig) ready() (bool, string) {
	code, body, err := r.get("/readyz")
	if err != nil {
		return false, err.Error()
	}
	return code == http.StatusOK, strings.TrimSpace(body)
}

// metrics returns /metrics as metric name → value, summed over labels
// (nil if unreachable).
func (r *outageRig) metrics() map[string]float64 {
	code, body, err := r.get("/metrics")
	if err != nil || code != http.StatusOK {
		return nil
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		name, _, _ := strings.Cut(series, "{")
		if v, err := strconv.ParseFloat(value, 64); ok && err == nil {
			out[name] += v
		}
	}
	return out
}

// metric is one metric of /metrics, waiting until it answers.
func (r *outageRig) metric(name string) float64 {
	r.t.Helper()
	var m map[string]float64
	r.waitFor("/metrics", func() bool { m = r.metrics(); return m != nil })
	return m[name]
}

// rss is the daemon's resident set size in bytes (VmRSS of /proc/PID/status).
func (r *outageRig) rss() int64 {
	rss, _ := r.daemon.Memory()
	return rss
}

// waitCommit waits for a commit after the commits counted in before and
// returns how long that took from since.
func (r *outageRig) waitCommit(before float64, since time.Time) time.Duration {
	r.t.Helper()
	r.waitFor("a commit", func() bool { return r.metrics()["deltaflow_commits_total"] > before })
	return time.Since(since)
}

// snapshot reads the table's latest snapshot.
func (r *outageRig) snapshot() (*delta.Snapshot, error) {
	ctx, cancel := context.WithTimeout(r.t.Context(), time.Minute)
	defer cancel()
	return delta.NewTable(r.store).Snapshot(ctx)
}

// waitCaughtUp waits until the table's txn version of every partition is
// the partition's last offset: everything the topic holds is committed.
func (r *outageRig) waitCaughtUp() *delta.Snapshot {
	r.t.Helper()
	hw := testenv.HighWatermarks(r.t, r.servers.Brokers, r.topic)
	var snap *delta.Snapshot
	r.waitFor(fmt.Sprintf("the table to reach the end offsets %v", hw), func() bool {
		s, err := r.snapshot()
		if err != nil {
			return false
		}
		for p, end := range hw {
			if v, ok := s.TxnVersion(ledger.AppID("deltaflow", r.topic, p)); end > 0 && (!ok || v != end-1) {
				return false
			}
		}
		snap = s
		return true
	})
	return snap
}

// account stops the daemon (SIGTERM: a clean exit), then checks that every
// record the topic holds is in the table or the DLQ exactly once, and
// prints the figures.
func (r *outageRig) account() scenario.Report {
	r.t.Helper()
	if err := r.daemon.Stop(30 * time.Second); err != nil {
		r.t.Errorf("deltaflow run after SIGTERM: %v\n%s", err, r.daemon.Tail(8000))
	}
	return scenario.Check(r.t, scenario.Source{Brokers: r.servers.Brokers, Topic: r.topic, Store: r.store,
		NATSURL: r.servers.NATSURL, Table: r.table})
}

// outageResult is what outage saw.
type outageResult struct {
	watch    *outageWatch
	commits  float64       // deltaflow_commits_total just before the server came back
	restart  time.Duration // how long the server took to answer again
	recovery time.Duration // from the server answering to the next commit
}

// outage stops server name of priv for down, running during (if set)
// meanwhile, starts it again and waits for the next commit. It fails the
// test unless /readyz reported component degraded during the outage.
func (r *outageRig) outage(priv *testenv.Private, name, component string, down time.Duration, during func()) outageResult {
	r.t.Helper()
	w := r.watch()
	priv.Stop(name)
	stopped := time.Now()
	if during != nil {
		during()
	}
	time.Sleep(time.Until(stopped.Add(down)))
	w.end()
	res := outageResult{watch: w, commits: r.metric("deltaflow_commits_total")}
	restart := time.Now()
	priv.Start(name)
	back := time.Now()
	res.restart = back.Sub(restart)
	res.recovery = r.waitCommit(res.commits, back)
	if !w.degraded(component) {
		r.t.Errorf("%s outage: /readyz never reported %s degraded: %s", name, component, w)
	}
	return res
}

// outageWatch samples the daemon while a server is down: the reasons
// /readyz gave, whether fetching was paused, and the peaks of the buffered
// bytes and the RSS.
type outageWatch struct {
	stop context.CancelFunc
	done chan struct{}

	mu           sync.Mutex
	notReady     []string // distinct /readyz reasons seen
	paused       bool
	peakBuffered float64
	peakRSS      int64
}

func (r *outageRig) watch() *outageWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &outageWatch{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			ok, why := r.ready()
			m := r.metrics()
			rss := r.rss()
			w.mu.Lock()
			for _, reason := range strings.Split(why, "\n") {
				// The component and the start of the error are enough.
				if len(reason) > 72 {
					reason = reason[:72] + "…"
				}
				if !ok && !slices.Contains(w.notReady, reason) {
					w.notReady = append(w.notReady, reason)
				}
			}
			w.paused = w.paused || m["deltaflow_fetch_paused"] == 1
			w.peakBuffered = max(w.peakBuffered, m["deltaflow_buffered_bytes"])
			w.peakRSS = max(w.peakRSS, rss)
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// end stops sampling.
func (w *outageWatch) end() {
	w.stop()
	<-w.done
}

// degraded reports whether /readyz named component (e.g. "storage")
// among its reasons, the process's or a table's ("table t: storage: ...").
func (w *outageWatch) degraded(component string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.notReady, func(s string) bool {
		return strings.HasPrefix(s, component+":") || strings.HasPrefix(s, "table ") && strings.Contains(s, ": "+component+":")
	})
}

func (w *outageWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("readyz reasons %q, fetch paused %t, peak buffered %.1f MiB, peak RSS %.1f MiB",
		w.notReady, w.paused, w.peakBuffered/(1<<20), float64(w.peakRSS)/(1<<20))
}

// outageEvents is a stream on the scenario's NATS server that keeps the
// table's events, so that a scenario sees those published while it was
// not listening (during an outage, nats.go buffers them and sends them on
// reconnect).
type outageEvents struct {
	url, stream string
}

func newOutageEvents(t *testing.T, url, table string) *outageEvents {
	t.Helper()
	e := &outageEvents{url: url, stream: "OUTAGE_EVENTS"}
	_, err := testenv.JetStream(t, url).CreateStream(t.Context(), jetstream.StreamConfig{Name: e.stream,
		Subjects: []string{bridge.EventSubject(table, bridge.KindCommit), bridge.EventSubject(table, bridge.KindDLQ)},
		Storage:  jetstream.FileStorage})
	if err != nil {
		t.Fatalf("create stream %s: %v", e.stream, err)
	}
	return e
}

// read returns the versions of the commit events and the number of dlq
// events of topic.
func (e *outageEvents) read(t *testing.T, topic string) (versions map[int64]bool, letters int) {
	t.Helper()
	js := testenv.JetStream(t, e.url)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := js.Stream(ctx, e.stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	versions = map[int64]bool{}
	for read := uint64(0); read < info.State.Msgs; read++ {
		msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("stream %s: message %d of %d: %v", e.stream, read+1, info.State.Msgs, err)
		}
		var ev struct {
			Type    string `json:"type"`
			Version int64  `json:"version"`
			Topic   string `json:"topic"`
		}
		if err := json.Unmarshal(msg.Data(), &ev); err != nil {
			t.Fatalf("event %s: %v", msg.Data(), err)
		}
		switch {
		case ev.Topic != topic:
		case ev.Type == bridge.KindCommit.Type():
			versions[ev.Version] = true
		case ev.Type == bridge.KindDLQ.Type():
			letters++
		}
	}
	return versions, letters
}
