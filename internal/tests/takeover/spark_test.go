package takeover

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// rig is one test's servers, topic and deltaflow binary.
type rig struct {
	t       *testing.T
	brokers []string
	nats    string
	topic   string
	bin     string
	py, dir string // Python with pyspark, scripts/spark
}

func newRig(t *testing.T, name string) *rig {
	t.Helper()
	py, dir := testenv.Spark(t)
	r := &rig{t: t, brokers: testenv.Kafka(t), nats: testenv.NATS(t), topic: scenario.Unique(name), bin: scenario.Binary(t), py: py, dir: dir}
	return r
}

// produce writes n simulator records (seed picks them) to the rig's topic,
// creating it with 3 partitions.
func (r *rig) produce(n, seed int) {
	r.t.Helper()
	out, err := exec.Command(r.bin, "produce", "--brokers", strings.Join(r.brokers, ","), "--topic", r.topic,
		"--count", strconv.Itoa(n), "--seed", strconv.Itoa(seed), "--partitions", "3").CombinedOutput()
	if err != nil {
		r.t.Fatalf("produce: %v\n%s", err, out)
	}
}

// produceDevice writes one valid record of device id to partition p.
func (r *rig) produceDevice(id string, p int32) {
	r.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	v := fmt.Sprintf(`{"device_id":%q,"device_type":"smart_plug","ingested_at":%q,"payload":"{\"power\": 1.5, \"state\": \"ON\"}"}`,
		id, time.Now().UTC().Format(time.RFC3339Nano))
	if err := cl.ProduceSync(r.t.Context(), &kgo.Record{Topic: r.topic, Partition: p, Key: []byte(id), Value: []byte(v)}).FirstErr(); err != nil {
		r.t.Fatalf("produce %s: %v", id, err)
	}
}

// sparkRun is one run of the seed's job (a JVM).
type sparkRun struct {
	d       *scenario.Daemon
	started time.Time
}

// startSpark runs scripts/spark/sensor_stream.py against the rig's topic
// with the table and checkpoint on disk, a 1 s trigger and the Kafka
// coordinate columns.
func (r *rig) startSpark(table, checkpoint string, extra ...string) *sparkRun {
	r.t.Helper()
	args := append([]string{filepath.Join(r.dir, "sensor_stream.py"), "--brokers", strings.Join(r.brokers, ","), "--topic", r.topic,
		"--table", table, "--checkpoint", checkpoint, "--trigger", "1", "--max-offsets", "100000", "--kafka-columns"}, extra...)
	return &sparkRun{d: scenario.Start(r.t, "spark", r.py, os.Environ(), args...), started: time.Now()}
}

// wait waits for the Spark process to exit and returns its error.
func (s *sparkRun) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	if err := scenario.WaitFor(timeout, func() bool { _, done := s.d.Exited(); return done }); err != nil {
		t.Fatalf("spark did not exit within %s\n%s", timeout, s.d.Tail(6000))
	}
	err, _ := s.d.Exited()
	t.Logf("spark ran %s", time.Since(s.started).Round(100*time.Millisecond))
	return err
}

// waitFile waits until path exists (Spark wrote it), failing if Spark exits.
func (s *sparkRun) waitFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	err := scenario.WaitFor(timeout, func() bool {
		_, err := os.Stat(path)
		if _, done := s.d.Exited(); done && err != nil {
			t.Fatalf("spark exited before writing %s\n%s", path, s.d.Tail(6000))
		}
		return err == nil
	})
	if err != nil {
		t.Fatalf("spark did not write %s within %s\n%s", path, timeout, s.d.Tail(6000))
	}
	t.Logf("spark wrote %s %s after its start", filepath.Base(filepath.Dir(path))+"/"+filepath.Base(path), time.Since(s.started).Round(100*time.Millisecond))
}

// deltaflow runs the binary with args and returns its combined output and
// error.
func (r *rig) deltaflow(args ...string) (string, error) {
	r.t.Helper()
	return r.deltaflowIn(os.Environ(), args...)
}

// deltaflowIn is deltaflow in the environment env.
func (r *rig) deltaflowIn(env []string, args ...string) (string, error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// takeover runs `deltaflow takeover` on table and checkpoint.
func (r *rig) takeover(table, checkpoint string, extra ...string) (string, error) {
	r.t.Helper()
	return r.deltaflow(append([]string{"takeover", "--from-spark-checkpoint", checkpoint, "--table", table,
		"--topic", r.topic, "--brokers", strings.Join(r.brokers, ",")}, extra...)...)
}

// with returns the rig for subtest t.
func (r *rig) with(t *testing.T) *rig {
	c := *r
	c.t = t
	return &c
}

// run runs `deltaflow run --until-latest` on table with the scenario
// config (Kafka coordinate columns) plus sections, and fails the test
// unless it exits 0.
func (r *rig) run(table string, sections map[string]any) {
	r.t.Helper()
	d := r.startRun(table, sections, "--until-latest")
	if err := scenario.WaitFor(2*time.Minute, func() bool { _, done := d.Exited(); return done }); err != nil {
		r.t.Fatalf("run --until-latest did not finish\n%s", d.Tail(4000))
	}
	if err, _ := d.Exited(); err != nil {
		r.t.Fatalf("run --until-latest: %v\n%s", err, d.Tail(4000))
	}
}

// startRun starts `deltaflow run` on table with the scenario config plus
// sections, in its own consumer group.
func (r *rig) startRun(table string, sections map[string]any, extra ...string) *scenario.Daemon {
	r.t.Helper()
	cfg := scenario.WriteConfig(r.t, "sensor_events", sections)
	srv := scenario.Servers{Brokers: r.brokers, NATSURL: r.nats}
	env := srv.Env(r.topic, scenario.Unique("deltaflow"), table, fmt.Sprintf("127.0.0.1:%d", scenario.FreePort(r.t)))
	return scenario.Start(r.t, "deltaflow", r.bin, env, append([]string{"run", "--config", cfg}, extra...)...)
}

// check accounts the topic against table: every record exactly once.
func (r *rig) check(table string) scenario.Report {
	r.t.Helper()
	store, err := storage.NewLocal(table)
	if err != nil {
		r.t.Fatal(err)
	}
	return scenario.Check(r.t, scenario.Source{Brokers: r.brokers, Topic: r.topic, Store: store, NATSURL: r.nats, Table: "sensor_events"})
}

// txns returns the table's deltaflow txn versions by partition, and the
// Spark query's txn version (-1: none).
func (r *rig) txns(table, queryID string) (map[int32]int64, int64) {
	r.t.Helper()
	store, err := storage.NewLocal(table)
	if err != nil {
		r.t.Fatal(err)
	}
	s, err := delta.NewTable(store).Snapshot(r.t.Context())
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[int32]int64{}
	prefix := "deltaflow-" + r.topic + "-"
	spark := int64(-1)
	for id, v := range s.Txns() {
		if rest, ok := strings.CutPrefix(id, prefix); ok {
			p, _ := strconv.Atoi(rest)
			out[int32(p)] = v
		}
		if id == queryID {
			spark = v
		}
	}
	return out, spark
}

// sparkOffsets reads the end offsets of batch n from Spark's checkpoint.
func sparkOffsets(t *testing.T, checkpoint string, n int64) map[int32]int64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(checkpoint, "offsets", strconv.FormatInt(n, 10)))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var topics map[string]map[string]int64
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &topics); err != nil {
		t.Fatalf("offsets/%d: %v", n, err)
	}
	out := map[int32]int64{}
	for _, parts := range topics {
		for p, o := range parts {
			n, _ := strconv.Atoi(p)
			out[int32(n)] = o
		}
	}
	return out
}

// queryID reads the Spark query id from the checkpoint's metadata.
func queryID(t *testing.T, checkpoint string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(checkpoint, "metadata"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ ID string }
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// copyDir copies a directory tree (a table or a checkpoint) with its
// modification times.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v\n%s", src, dst, err, out)
	}
}

// deleteRecords advances partition p's log start offset to at, as
// retention would.
func (r *rig) deleteRecords(p int32, at int64) {
	r.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokers...))
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	var o kadm.Offsets
	o.Add(kadm.Offset{Topic: r.topic, Partition: p, At: at})
	res, err := kadm.NewClient(cl).DeleteRecords(r.t.Context(), o)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		r.t.Fatalf("delete records of %s[%d] below %d: %v", r.topic, p, at, err)
	}
}
