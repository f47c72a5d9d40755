// Package upsert tests write_mode: upsert on the real broker with the real
// binary: the table it keeps is each key's latest value, as delta-rs,
// DuckDB and Spark read it, and Spark's own MERGE and deltaflow's upserts
// take turns on one table.
package upsert

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
)

// account is a row of the table: name and balance by id.
type account struct {
	Name    string `json:"name"`
	Balance int64  `json:"balance"`
}

// rig is a topic of keyed changes, an upsert table of it in a local
// directory, and the state the table must reach.
type rig struct {
	t       *testing.T
	brokers []string
	topic   string
	group   string
	dir     string
	config  string
	servers scenario.Servers
	rng     *rand.Rand
	want    map[int64]account
}

func newRig(t *testing.T) *rig {
	if testing.Short() {
		t.Skip("real servers; skipped with -short")
	}
	r := &rig{t: t, brokers: testenv.Kafka(t), topic: scenario.Unique("accounts"), group: scenario.Unique("accounts-group"),
		dir: filepath.Join(t.TempDir(), "accounts"), rng: rand.New(rand.NewPCG(7, 8)), want: map[int64]account{}}
	kcfg := kafka.DefaultConfig()
	kcfg.Brokers = r.brokers
	if err := kafka.CreateTopic(t.Context(), kcfg, r.topic, 3, -1); err != nil {
		t.Fatal(err)
	}
	r.config = filepath.Join(t.TempDir(), "deltaflow.yaml")
	yaml := `table:
  name: accounts
  write_mode: upsert
  key_columns: [id]
  key_format: json
  partition_columns: []
  columns:
    - {name: id, type: long, source: kafka.key.id}
    - {name: name, type: string, required: true}
    - {name: balance, type: long}
flush:
  interval: 1s
log:
  format: text
`
	if err := os.WriteFile(r.config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	r.servers = scenario.Servers{Brokers: r.brokers, NATSURL: testenv.NATS(t), S3: testenv.MinIO(t)}
	return r
}

// changes produces n random changes of keys 0..keys-1, a tenth of them
// tombstones, key k to partition k % 3, and records what they leave.
func (r *rig) changes(n, keys int) {
	r.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		id := r.rng.Int64N(int64(keys))
		rec := &kgo.Record{Topic: r.topic, Partition: int32(id % 3), Key: fmt.Appendf(nil, `{"id":%d}`, id)}
		if r.rng.IntN(10) == 0 {
			delete(r.want, id)
		} else {
			a := account{Name: fmt.Sprintf("n%d", r.rng.IntN(1e6)), Balance: r.rng.Int64N(1e9)}
			rec.Value, _ = json.Marshal(a)
			r.want[id] = a
		}
		recs[i] = rec
	}
	if err := cl.ProduceSync(r.t.Context(), recs...).FirstErr(); err != nil {
		r.t.Fatal(err)
	}
}

// run is `deltaflow run --until-latest`.
func (r *rig) run() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, scenario.Binary(r.t), "run", "--config", r.config, "--until-latest")
	cmd.Env = r.servers.Env(r.topic, r.group, r.dir, "127.0.0.1:0")
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("run --until-latest: %v\n%s", err, out)
	}
}

// check asserts delta-rs and DuckDB read each live key's latest value
// once, and nothing else.
func (r *rig) check(when string) {
	r.t.Helper()
	var view struct {
		Rows, DuckdbRows []map[string]any
	}
	read := testenv.DeltaRS(r.t, nil, "read", r.dir, "--rows", "--query", "--duckdb")
	testenv.CheckDuckDB(r.t, read)
	if err := json.Unmarshal(read, &view); err != nil {
		r.t.Fatal(err)
	}
	for reader, rows := range map[string][]map[string]any{"delta-rs": view.Rows, "DuckDB": view.DuckdbRows} {
		if got := accounts(r.t, rows); !maps.Equal(got, r.want) {
			r.t.Errorf("%s: %s reads %d keys, want %d (%s)", when, reader, len(got), len(r.want), scenario.MapDiff(got, r.want))
		}
	}
}

// accounts are rows (as deltars.py or Spark render them) by id; a key
// twice fails the test.
func accounts(t *testing.T, rows []map[string]any) map[int64]account {
	t.Helper()
	out := map[int64]account{}
	for _, row := range rows {
		id := int64(row["id"].(float64))
		if _, twice := out[id]; twice {
			t.Errorf("key %d twice", id)
		}
		out[id] = account{Name: row["name"].(string), Balance: int64(row["balance"].(float64))}
	}
	return out
}

// TestUpsertTopic: keyed JSON changes of 500 accounts (updates of a key
// within an epoch, tombstones, deleted keys coming back), on the real
// broker, become an upsert table holding each live key's latest value, as
// delta-rs and DuckDB read it; then Spark reads the same, runs its own
// MERGE on the table (updates, deletes, inserts), and deltaflow upserts
// more changes into the table Spark changed: every reader agrees with the
// changes applied in order.
func TestUpsertTopic(t *testing.T) {
	r := newRig(t)
	r.changes(3000, 500)
	r.run()
	r.check("first run")
	r.changes(1000, 500) // a second run: the table's own rows are replaced
	r.run()
	r.check("second run")

	// Spark's MERGE: a few updates, deletes and inserts.
	type change struct {
		ID      int64  `json:"id"`
		Name    string `json:"name"`
		Balance int64  `json:"balance"`
		Delete  bool   `json:"delete"`
	}
	var merge []change
	ids := slices.Sorted(maps.Keys(r.want))
	for i, id := range ids[:20] {
		merge = append(merge, change{ID: id, Name: "spark", Balance: int64(i), Delete: i%4 == 0})
	}
	merge = append(merge, change{ID: 10_000, Name: "spark-new", Balance: 1})
	changes := filepath.Join(t.TempDir(), "merge.json")
	b, _ := json.Marshal(merge)
	if err := os.WriteFile(changes, b, 0o600); err != nil {
		t.Fatal(err)
	}
	py, dir := testenv.Spark(t)
	var spark struct {
		Before map[string][]map[string]any
		After  []map[string]any
	}
	testenv.RunSparkJSON(t, &spark, py, dir, "upsert_check.py", "--merge", changes, r.dir)
	if got := accounts(t, spark.Before[r.dir]); !maps.Equal(got, r.want) {
		t.Errorf("Spark reads %d keys, want %d (%s)", len(got), len(r.want), scenario.MapDiff(got, r.want))
	}
	for _, c := range merge {
		if c.Delete {
			delete(r.want, c.ID)
		} else {
			r.want[c.ID] = account{Name: c.Name, Balance: c.Balance}
		}
	}
	if got := accounts(t, spark.After); !maps.Equal(got, r.want) {
		t.Errorf("after its MERGE Spark reads %d keys, want %d (%s)", len(got), len(r.want), scenario.MapDiff(got, r.want))
	}
	r.changes(1000, 500)
	r.run()
	r.check("deltaflow after Spark's MERGE")

	// verify --deep reads every file with its deletion vector: counts and
	// stats hold.
	out, err := exec.CommandContext(t.Context(), scenario.Binary(t), "verify", "--table", r.dir, "--deep").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "OK:") {
		t.Errorf("verify --deep: %v\n%s", err, out)
	}
}
