// Package upsert tests write_mode: upsert on the real broker with the real
// binary: the table it keeps is each key's latest value, as delta-rs,
// DuckDB and Spark read it, Spark's own MERGE and deltaflow's upserts
// take turns on one table, deltaflow upserts into a table Spark made
// with deletion vectors, and Spark's OPTIMIZE and REORG compact the table
// while deltaflow upserts into it.
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
	"strconv"
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
	commits map[int64]logCommit // the table's log as read so far (tableLog)
	// produced are the changes produced, by partition in offset order.
	produced map[int32][]keyChange
}

func newRig(t *testing.T) *rig {
	if testing.Short() {
		t.Skip("real servers; skipped with -short")
	}
	r := &rig{t: t, brokers: testenv.Kafka(t), topic: scenario.Unique("accounts"), group: scenario.Unique("accounts-group"),
		dir: filepath.Join(t.TempDir(), "accounts"), rng: rand.New(rand.NewPCG(7, 8)), want: map[int64]account{},
		produced: map[int32][]keyChange{}}
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
	cs := make([]keyChange, n)
	for i := range cs {
		cs[i].id = r.rng.Int64N(int64(keys))
		if r.rng.IntN(10) != 0 {
			cs[i].to = &account{Name: fmt.Sprintf("n%d", r.rng.IntN(1e6)), Balance: r.rng.Int64N(1e9)}
		}
	}
	r.produce(cs...)
}

// keyChange is a keyed change of an account: its new value, or a tombstone
// (to nil).
type keyChange struct {
	id int64
	to *account
}

// produce produces changes in order, key k to partition k % 3, and records
// what they leave.
func (r *rig) produce(cs ...keyChange) {
	r.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(cs))
	for i, c := range cs {
		rec := &kgo.Record{Topic: r.topic, Partition: int32(c.id % 3), Key: fmt.Appendf(nil, `{"id":%d}`, c.id)}
		r.produced[rec.Partition] = append(r.produced[rec.Partition], c)
		if c.to == nil {
			delete(r.want, c.id)
		} else {
			rec.Value, _ = json.Marshal(*c.to)
			r.want[c.id] = *c.to
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
// delta-rs and DuckDB read it; then the table's change data feed is turned
// on, and a second run writes the change data of each of its epochs;
// Spark reads the same rows, runs its own MERGE on the table (updates,
// deletes, inserts), and deltaflow upserts more changes into the table
// Spark changed: every reader agrees with the changes applied in order,
// and Spark's and delta-rs's change data feeds (readChangeFeed, load_cdf)
// hold exactly every change of every version since, a key changed several
// times in an epoch once, deltaflow's change data files shaped as Spark's.
// A second table of the topic, made with column mapping and its change
// data feed on, takes the same two runs: Spark reads its feed too (its
// change data files by physical names; delta-rs reads no column-mapped
// feed).
func TestUpsertTopic(t *testing.T) {
	r := newRig(t)
	mapped, mappedFeed := r.columnMapped()
	r.changes(3000, 500)
	r.run()
	r.check("first run")
	mapped.run()
	mapped.check("first run into the column-mapped table")
	feed := r.enableChangeDataFeed()
	from := feed.next
	r.changes(1000, 500) // a second run: the table's own rows are replaced
	ids := slices.Sorted(maps.Keys(r.want))
	a, b := ids[0], ids[1]
	r.produce(keyChange{a, &account{"first", 1}}, keyChange{a, &account{"second", 2}}, keyChange{a, &account{"third", 3}},
		keyChange{b, &account{"gone", 1}}, keyChange{id: b})
	r.run()
	r.check("second run")
	mapped.run()
	mapped.check("second run into the column-mapped table")
	wantFeed := feed.advance(nil)
	wantMapped := mappedFeed.advance(nil)
	if last, ok := mapped.tableLog().at(mappedFeed.next - 1); !ok || len(last.cdcs) == 0 {
		t.Errorf("the column-mapped table's last epoch (updates of %d, a delete of %d) wrote no change data files", a, b)
	}
	if last, ok := r.tableLog().at(feed.next - 1); !ok || len(last.cdcs) == 0 {
		t.Errorf("the second run's last epoch (updates of %d, a delete of %d) wrote no change data files", a, b)
	}

	// Spark's MERGE: a few updates, deletes and inserts.
	var merge []mergeChange
	for i, id := range ids[2:22] {
		merge = append(merge, mergeChange{ID: id, Name: "spark", Balance: int64(i), Delete: i%4 == 0})
	}
	merge = append(merge, mergeChange{ID: 10_000, Name: "spark-new", Balance: 1})
	changes := filepath.Join(t.TempDir(), "merge.json")
	js, _ := json.Marshal(merge)
	if err := os.WriteFile(changes, js, 0o600); err != nil {
		t.Fatal(err)
	}
	py, dir := testenv.Spark(t)
	var spark struct {
		Before         map[string][]map[string]any
		After, Changes []map[string]any
		Feeds          map[string][]map[string]any
	}
	testenv.RunSparkJSON(t, &spark, py, dir, "upsert_check.py", "--merge", changes, "--changes-from", strconv.FormatInt(from, 10),
		"--feed", mapped.dir+"=1", r.dir)
	checkFeed(t, "Spark's readChangeFeed of the column-mapped table", changeRows(t, spark.Feeds[mapped.dir]), wantMapped)
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
	wantFeed = append(wantFeed, feed.advance(merge)...)
	checkFeed(t, "Spark's readChangeFeed", changeRows(t, spark.Changes), wantFeed)
	r.checkChangeFiles()

	r.changes(1000, 500)
	r.run()
	r.check("deltaflow after Spark's MERGE")
	wantFeed = append(wantFeed, feed.advance(nil)...)
	var rs struct {
		Rows  []map[string]any
		Error string
	}
	if err := json.Unmarshal(testenv.DeltaRS(t, nil, "changes", r.dir, "--start", strconv.FormatInt(from, 10)), &rs); err != nil || rs.Error != "" {
		t.Fatalf("delta-rs load_cdf: %v %s", err, rs.Error)
	}
	checkFeed(t, "delta-rs's load_cdf", changeRows(t, rs.Rows), wantFeed)

	r.verify()
}

// verify asserts `deltaflow verify --deep` passes: it reads every file
// with its deletion vector, and counts and stats hold.
func (r *rig) verify() {
	r.t.Helper()
	out, err := exec.CommandContext(r.t.Context(), scenario.Binary(r.t), "verify", "--table", r.dir, "--deep").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "OK:") {
		r.t.Errorf("verify --deep: %v\n%s", err, out)
	}
}

// TestUpsertIntoSparkTable: Spark creates the accounts table itself with
// deletion vectors on (scripts/spark/upsert_spark_table.py: two INSERTs of
// three files each, then a DELETE and an UPDATE that leave deletion vectors
// on them), and deltaflow, on the real broker, upserts keyed changes into
// it: updates and tombstones of Spark's rows, both in files carrying
// Spark's deletion vectors and in the files of its UPDATE, keys Spark
// deleted coming back, deletes of keys Spark deleted, new keys, keys
// changed twice in a run; then a second run of random changes. delta-rs,
// DuckDB and then Spark read Spark's rows with the changes applied in
// order, and verify --deep passes.
func TestUpsertIntoSparkTable(t *testing.T) {
	r := newRig(t)
	py, dir := testenv.Spark(t)
	var made struct {
		Rows  []map[string]any
		Files []struct {
			Path    string
			DV      *int64
			Records int64
		}
		Protocol struct {
			MinReaderVersion, MinWriterVersion int
			ReaderFeatures, WriterFeatures     []string
		}
		Operations []string
	}
	testenv.RunSparkJSON(t, &made, py, dir, "upsert_spark_table.py", r.dir)
	t.Logf("Spark's table: commits %v, protocol %+v, %d live files", made.Operations, made.Protocol, len(made.Files))

	// What the script leaves: ids 0..399 as s<id>, id*10, less those
	// divisible by 7, those divisible by 5 updated.
	for id := range int64(400) {
		switch {
		case id%7 == 0:
		case id%5 == 0:
			r.want[id] = account{Name: fmt.Sprintf("us%d", id), Balance: -id * 10}
		default:
			r.want[id] = account{Name: fmt.Sprintf("s%d", id), Balance: id * 10}
		}
	}
	if got := accounts(t, made.Rows); !maps.Equal(got, r.want) {
		t.Fatalf("Spark reads %d keys of the table it made, want %d (%s)", len(got), len(r.want), scenario.MapDiff(got, r.want))
	}
	if !slices.Contains(made.Protocol.ReaderFeatures, "deletionVectors") || !slices.Contains(made.Protocol.WriterFeatures, "deletionVectors") {
		t.Fatalf("Spark's table does not have the deletionVectors feature: %+v", made.Protocol)
	}
	withDV := map[string]bool{}
	for _, f := range made.Files {
		if f.DV != nil {
			withDV[filepath.Base(f.Path)] = true
		}
	}
	// Spark's rows by whether their file carries Spark's deletion vector
	// (the INSERTs' files) or not (the UPDATE's).
	var inDV, inPlain []int64
	for _, row := range made.Rows {
		id := int64(row["id"].(float64))
		if withDV[row["file"].(string)] {
			inDV = append(inDV, id)
		} else {
			inPlain = append(inPlain, id)
		}
	}
	if len(withDV) < 6 || len(inDV) < 40 || len(inPlain) < 10 {
		t.Fatalf("want Spark's 6 INSERT files with deletion vectors and the UPDATE's without: %d files with one, %d rows in them, %d in other files (%+v)",
			len(withDV), len(inDV), len(inPlain), made.Files)
	}

	// The first run: every kind of change, on rows of both kinds of file.
	set := func(name string, id int64) *account {
		return &account{Name: fmt.Sprintf("%s%d", name, id), Balance: 1_000_000 + id}
	}
	var cs []keyChange
	for _, id := range inDV[:20] {
		cs = append(cs, keyChange{id, set("df-dv", id)})
	}
	for _, id := range inDV[20:30] {
		cs = append(cs, keyChange{id: id})
	}
	for _, id := range inPlain[:5] {
		cs = append(cs, keyChange{id, set("df-upd", id)})
	}
	for _, id := range inPlain[5:10] {
		cs = append(cs, keyChange{id: id})
	}
	for _, id := range []int64{7, 14, 21} { // deleted by Spark, back
		cs = append(cs, keyChange{id, set("df-back", id)})
	}
	for _, id := range []int64{28, 35} { // deleted by Spark, deleted again
		cs = append(cs, keyChange{id: id})
	}
	for id := int64(1000); id < 1020; id++ {
		cs = append(cs, keyChange{id, set("df-new", id)})
	}
	a, b, c := inDV[30], inDV[31], inDV[32]
	cs = append(cs,
		keyChange{a, set("df-first", a)}, keyChange{id: a}, // updated, then deleted
		keyChange{id: b}, keyChange{b, set("df-second", b)}, // deleted, then back
		keyChange{c, set("df-first", c)}, keyChange{c, set("df-second", c)},
		keyChange{1100, set("df-new", 1100)}, keyChange{id: 1100}) // new, gone in the same run
	r.produce(cs...)
	r.run()
	r.check("deltaflow's first run into Spark's table")

	// A second run, resuming from the first one's offsets: random changes
	// of Spark's keys and new ones.
	r.changes(1000, 600)
	r.run()
	r.check("second run")

	var spark struct {
		Before map[string][]map[string]any
	}
	testenv.RunSparkJSON(t, &spark, py, dir, "upsert_check.py", r.dir)
	if got := accounts(t, spark.Before[r.dir]); !maps.Equal(got, r.want) {
		t.Errorf("Spark reads %d keys, want %d (%s)", len(got), len(r.want), scenario.MapDiff(got, r.want))
	}
	r.verify()
}
