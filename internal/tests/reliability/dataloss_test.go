package reliability

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/sim"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/storage"
)

// lossRig runs `deltaflow run --until-latest` on tables of one topic of the
// real broker, which the test deletes records of and recreates.
type lossRig struct {
	t       *testing.T
	brokers []string
	nats    string
	bin     string
	topic   string
	adm     *kadm.Client
	seed    int64
}

func newLossRig(t *testing.T, brokers []string, nats, bin string) *lossRig {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	r := &lossRig{t: t, brokers: brokers, nats: nats, bin: bin, topic: scenario.Unique("loss"), adm: kadm.NewClient(cl)}
	r.createTopic()
	return r
}

// createTopic creates the rig's topic with one partition.
func (r *lossRig) createTopic() {
	r.t.Helper()
	err := scenario.WaitFor(30*time.Second, func() bool {
		res, err := r.adm.CreateTopic(r.t.Context(), 1, 1, nil, r.topic)
		return err == nil && res.Err == nil
	})
	if err != nil {
		r.t.Fatalf("create topic %s: %v", r.topic, err)
	}
}

// recreateTopic deletes the topic and creates it again: a new topic ID,
// offsets from 0.
func (r *lossRig) recreateTopic() {
	r.t.Helper()
	if _, err := r.adm.DeleteTopics(r.t.Context(), r.topic); err != nil {
		r.t.Fatal(err)
	}
	r.createTopic()
}

// produce writes n valid sensor records to partition 0.
func (r *lossRig) produce(n int) {
	r.t.Helper()
	r.seed++
	s := sim.New(sim.Config{Seed: r.seed, Events: n})
	recs := make([]*kgo.Record, n)
	for i := range recs {
		key, value, _ := s.Next(nil)
		recs[i] = &kgo.Record{Topic: r.topic, Key: key, Value: value}
	}
	// A client of its own: franz-go fails produces to a topic recreated
	// under a client that knew its old ID.
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(r.t.Context(), recs...).FirstErr(); err != nil {
		r.t.Fatal(err)
	}
}

// deleteRecords deletes the records of partition 0 below offset at with
// Kafka's DeleteRecords (what kafka-delete-records.sh and retention do to
// the log start).
func (r *lossRig) deleteRecords(at int64) {
	r.t.Helper()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: r.topic, Partition: 0, At: at})
	res, err := r.adm.DeleteRecords(r.t.Context(), os)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		r.t.Fatal(err)
	}
}

// run runs `deltaflow run --until-latest` on table with the kafka section
// and returns its exit error and output.
func (r *lossRig) run(table string, kafka map[string]any) (error, string) {
	r.t.Helper()
	return r.runWith(table, map[string]any{"kafka": kafka})
}

// runWith is run with these configuration sections.
func (r *lossRig) runWith(table string, sections map[string]any) (error, string) {
	r.t.Helper()
	cfg := scenario.WriteConfig(r.t, "sensor_events", sections)
	srv := scenario.Servers{Brokers: r.brokers, NATSURL: r.nats}
	env := srv.Env(r.topic, scenario.Unique("g"), table, fmt.Sprintf("127.0.0.1:%d", scenario.FreePort(r.t)))
	d := scenario.Start(r.t, "deltaflow", r.bin, env, "run", "--config", cfg, "--until-latest")
	if err := scenario.WaitFor(2*time.Minute, func() bool { _, done := d.Exited(); return done }); err != nil {
		r.t.Fatalf("run --until-latest did not end\n%s", d.Tail(4000))
	}
	err, _ := d.Exited()
	return err, d.Tail(20000)
}

// seek runs `deltaflow seek --offsets 0:next` on table.
func (r *lossRig) seek(table string, next int64) {
	r.t.Helper()
	r.seekWith(table, "--offsets", fmt.Sprintf("0:%d", next))
}

// seekWith runs `deltaflow seek` on table with these arguments.
func (r *lossRig) seekWith(table string, args ...string) {
	r.t.Helper()
	cmd := exec.Command(r.bin, append([]string{"seek", "--table", table, "--topic", r.topic, "--brokers", strings.Join(r.brokers, ","),
		"--config", scenario.WriteConfig(r.t, "sensor_events", nil)}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("seek: %v\n%s", err, out)
	}
}

// table returns the table's snapshot and the Kafka offsets of its rows.
func (r *lossRig) table(dir string) (*delta.Snapshot, []int64) {
	r.t.Helper()
	store, err := storage.NewLocal(dir)
	if err != nil {
		r.t.Fatal(err)
	}
	tbl := delta.NewTable(store)
	s, err := tbl.Snapshot(r.t.Context())
	if err != nil {
		r.t.Fatal(err)
	}
	schema, _ := s.Schema()
	col := slices.IndexFunc(schema.Fields, func(f delta.StructField) bool { return f.Name == scenario.OffsetColumn })
	var offsets []int64
	for _, a := range s.Files() {
		rows, err := delta.ReadDataFile(r.t.Context(), store, schema, s.PartitionColumns(), a)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, row := range rows {
			offsets = append(offsets, row[col].(int64))
		}
	}
	slices.Sort(offsets)
	return s, offsets
}

func span(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// TestKafkaMovesUnderneath runs deltaflow against the real broker while
// Kafka loses what the table's offsets point at: records deleted before
// they were read (DeleteRecords, as retention does to the log start), a
// topic deleted and created again, and a start at "latest" interrupted
// before its first commit. Nothing is skipped silently: the default refuses
// (run exits non-zero naming the partition, the offsets and the count),
// on_data_loss skip reads everything Kafka still holds and records the
// loss, and a resolved "latest" holds across a restart.
func TestKafkaMovesUnderneath(t *testing.T) {
	brokers, nats, bin := testenv.Kafka(t), testenv.NATS(t), scenario.Binary(t)
	t.Run("retention", func(t *testing.T) {
		r := newLossRig(t, brokers, nats, bin)
		r.produce(60)
		failed, skipped := filepath.Join(t.TempDir(), "fail"), filepath.Join(t.TempDir(), "skip")
		r.seek(failed, 30) // as if 0-29 were committed
		r.seek(skipped, 30)
		r.deleteRecords(45)

		err, out := r.run(failed, nil)
		if err == nil || !strings.Contains(out, "offsets 30-44 (15 records)") || !strings.Contains(out, "kafka.on_data_loss: skip") {
			t.Fatalf("run with on_data_loss fail: exit %v; want a refusal naming offsets 30-44 and 15 records, and what to do\n%s", err, out)
		}
		if _, rows := r.table(failed); len(rows) != 0 {
			t.Fatalf("refused run committed offsets %v", rows)
		}

		if err, out := r.run(skipped, map[string]any{"on_data_loss": "skip"}); err != nil {
			t.Fatalf("run with on_data_loss skip: %v\n%s", err, out)
		}
		if _, rows := r.table(skipped); !slices.Equal(rows, span(45, 60)) {
			t.Fatalf("table holds offsets %v; want 45-59 once", rows)
		}
		if !r.hasDataLoss(skipped, 15) {
			t.Error("no DATA_LOSS commit of 15 records in the table's history")
		}
	})
	t.Run("recreated", func(t *testing.T) {
		r := newLossRig(t, brokers, nats, bin)
		r.produce(30)
		failed, skipped := filepath.Join(t.TempDir(), "fail"), filepath.Join(t.TempDir(), "skip")
		for _, dir := range []string{failed, skipped} {
			if err, out := r.run(dir, nil); err != nil {
				t.Fatalf("first run: %v\n%s", err, out)
			}
		}
		r.recreateTopic()
		r.produce(60)

		err, out := r.run(failed, nil)
		if err == nil || !strings.Contains(out, "deleted and created again") {
			t.Fatalf("run on the recreated topic: exit %v; want a refusal naming the recreation\n%s", err, out)
		}
		if _, rows := r.table(failed); !slices.Equal(rows, span(0, 30)) {
			t.Fatalf("refused run: table offsets %v, want the old topic's 0-29 only", rows)
		}

		if err, out := r.run(skipped, map[string]any{"on_data_loss": "skip"}); err != nil {
			t.Fatalf("run with on_data_loss skip: %v\n%s", err, out)
		}
		_, rows := r.table(skipped)
		want := append(span(0, 30), span(0, 60)...)
		slices.Sort(want)
		if !slices.Equal(rows, want) {
			t.Fatalf("table offsets %v; want the old topic's 0-29 and every one of the new topic's 0-59", rows)
		}
		if !r.hasDataLoss(skipped, -1) {
			t.Error("no DATA_LOSS commit for the recreation in the table's history")
		}
	})
	t.Run("app_id changed", func(t *testing.T) {
		r := newLossRig(t, brokers, nats, bin)
		r.produce(30)
		dir := filepath.Join(t.TempDir(), "table")
		if err, out := r.run(dir, nil); err != nil {
			t.Fatalf("first run: %v\n%s", err, out)
		}
		r.produce(10)
		renamed := map[string]any{"table": map[string]any{"app_id": "renamed"}}
		err, out := r.runWith(dir, renamed)
		if err == nil || !strings.Contains(out, `holds the offsets of \"deltaflow\" (next offset 30)`) || !strings.Contains(out, "seek --from-app deltaflow") {
			t.Fatalf("run under a new app_id: exit %v; want a refusal naming the other app, its offset and the way forward\n%s", err, out)
		}
		if _, rows := r.table(dir); !slices.Equal(rows, span(0, 30)) {
			t.Fatalf("refused run: table offsets %v, want 0-29 once", rows)
		}
		r.seekWith(dir, "--app", "renamed", "--from-app", "deltaflow")
		if err, out := r.runWith(dir, renamed); err != nil {
			t.Fatalf("run after seek --from-app: %v\n%s", err, out)
		}
		if _, rows := r.table(dir); !slices.Equal(rows, span(0, 40)) {
			t.Fatalf("table offsets %v; want 0-39 once", rows)
		}
	})
	t.Run("txn retention", func(t *testing.T) {
		// Stopped longer than delta.setTransactionRetentionDuration, and
		// delta-rs checkpointed meanwhile, dropping the expired txns.
		r := newLossRig(t, brokers, nats, bin)
		r.produce(30)
		dir := filepath.Join(t.TempDir(), "table")
		if err, out := r.run(dir, nil); err != nil {
			t.Fatalf("first run: %v\n%s", err, out)
		}
		setProperty(t, dir, "delta.setTransactionRetentionDuration", "interval 3 seconds")
		time.Sleep(4 * time.Second)
		testenv.DeltaRS(t, nil, "checkpoint", dir)
		r.produce(10)
		if err, out := r.run(dir, nil); err != nil {
			t.Fatalf("run after the offsets expired: %v\n%s", err, out)
		}
		if _, rows := r.table(dir); !slices.Equal(rows, span(0, 40)) {
			t.Fatalf("table offsets %v; want 0-39 once", rows)
		}
	})
	t.Run("start_offset latest", func(t *testing.T) {
		r := newLossRig(t, brokers, nats, bin)
		r.produce(10)
		dir := filepath.Join(t.TempDir(), "latest")
		latest := map[string]any{"start_offset": "latest"}
		if err, out := r.run(dir, latest); err != nil {
			t.Fatalf("first run: %v\n%s", err, out)
		}
		r.produce(5) // while deltaflow is down, before it committed any row
		if err, out := r.run(dir, latest); err != nil {
			t.Fatalf("second run: %v\n%s", err, out)
		}
		if _, rows := r.table(dir); !slices.Equal(rows, span(10, 15)) {
			t.Fatalf("table offsets %v; want 10-14, produced after the first run resolved latest", rows)
		}
	})
}

// setProperty commits a table property of the table in dir.
func setProperty(t *testing.T, dir, key, value string) {
	t.Helper()
	store, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	tbl := delta.NewTable(store)
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(t.Context(), s, []delta.Action{{MetaData: s.Metadata().WithProperty(key, value)}}, delta.Operation{Name: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}
}

// hasDataLoss reports whether the history of the table in dir holds a
// DATA_LOSS commit of records lost (-1: uncounted, a recreated topic).
func (r *lossRig) hasDataLoss(dir string, records float64) bool {
	r.t.Helper()
	store, err := storage.NewLocal(dir)
	if err != nil {
		r.t.Fatal(err)
	}
	history, err := delta.NewTable(store).History(r.t.Context(), 0)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, e := range history {
		if e.Operation != "DATA_LOSS" {
			continue
		}
		var lost []struct{ Records float64 }
		if err := json.Unmarshal([]byte(e.OperationParameters["partitions"].(string)), &lost); err != nil {
			r.t.Fatalf("DATA_LOSS partitions: %v", err)
		}
		for _, p := range lost {
			if p.Records == records {
				return true
			}
		}
	}
	return false
}

// TestTransactionalTopic: a transactional producer (franz-go's
// TransactionalID) on the real broker writes committed transactions with an
// aborted one between them. `run --until-latest` returns (its last offsets
// are commit markers), the table holds exactly the committed records, its
// offset past the last marker; with isolation_level read_uncommitted the
// aborted records are read too.
func TestTransactionalTopic(t *testing.T) {
	r := newLossRig(t, testenv.Kafka(t), testenv.NATS(t), scenario.Binary(t))
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokers...), kgo.DefaultProduceTopic(r.topic),
		kgo.TransactionalID(scenario.Unique("bridge")), kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s := sim.New(sim.Config{Seed: 9, Events: 30})
	for i, n := range []int{10, 7, 5} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for range n {
			key, value, _ := s.Next(nil)
			if err := cl.ProduceSync(t.Context(), &kgo.Record{Key: key, Value: value}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(t.Context(), kgo.TransactionEndTry(i != 1)); err != nil {
			t.Fatal(err)
		}
	}
	committed, uncommitted := filepath.Join(t.TempDir(), "committed"), filepath.Join(t.TempDir(), "uncommitted")
	if err, out := r.run(committed, nil); err != nil {
		t.Fatalf("run --until-latest on a transactional topic: %v\n%s", err, out)
	}
	// 10 records, a commit marker, 7 aborted, an abort marker, 5, a commit marker.
	want := append(span(0, 10), span(19, 24)...)
	s1, rows := r.table(committed)
	if !slices.Equal(rows, want) {
		t.Fatalf("read_committed: table offsets %v; want %v", rows, want)
	}
	if v, _ := s1.TxnVersion(ledger.AppID("deltaflow", r.topic, 0)); v != 24 {
		t.Errorf("read_committed: the table's last offset is %d; want 24, the last commit marker", v)
	}
	if err, out := r.run(uncommitted, map[string]any{"isolation_level": "read_uncommitted"}); err != nil {
		t.Fatalf("run --until-latest read_uncommitted: %v\n%s", err, out)
	}
	if _, rows := r.table(uncommitted); !slices.Equal(rows, append(span(0, 10), append(span(11, 18), span(19, 24)...)...)) {
		t.Fatalf("read_uncommitted: table offsets %v; want every record, the aborted ones too", rows)
	}
}
