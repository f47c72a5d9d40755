package actors

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/storage"
	"github.com/deltaflow/deltaflow/upsert"
)

// upsertRig is a kfake topic of keyed changes (a JSON key {"id": n}, a
// JSON value or a tombstone) and an upsert table of it, with the state
// the table must reach: each key's latest value.
type upsertRig struct {
	*routesRig
	topic string
	table *routeTable
	rng   *rand.Rand
	want  map[int64]string // name by id
}

func newUpsertRig(t *testing.T) *upsertRig { return newUpsertRigOf(t, false, false) }

// newUpsertRigCOW is newUpsertRig, copy-on-write (no deletion vectors) if
// cow.
func newUpsertRigCOW(t *testing.T, cow bool) *upsertRig { return newUpsertRigOf(t, cow, false) }

// newUpsertRigOf is newUpsertRig, copy-on-write if cow, and if sequenced
// with a column v (the value's "v") ordering the changes, deleted keys
// remembered in the bridge's KV and a name "__deleted" marking a delete.
func newUpsertRigOf(t *testing.T, cow, sequenced bool) *upsertRig {
	const topic = "accounts"
	g := newRoutesRig(t, map[string]int32{topic: 3})
	cols := []mapping.Column{
		{Name: "id", Type: "long", Source: "kafka.key.id"},
		{Name: "name", Type: "string", Required: true},
		{Name: "kafka_offset", Type: "long", Source: "kafka.offset"},
	}
	if sequenced {
		cols = append(cols, mapping.Column{Name: "v", Type: "long", Source: "v"})
	}
	m, err := mapping.New(mapping.Config{Mode: mapping.Strict, KeyFormat: mapping.JSON, Tombstones: true, Columns: cols}, nil)
	if err != nil {
		t.Fatal(err)
	}
	local, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tbl := delta.NewTable(local)
	conf := map[string]string{"delta.enableDeletionVectors": "true"}
	if cow {
		conf = nil
	}
	snap, err := tbl.Create(t.Context(), m.Schema(), nil, conf)
	if err != nil {
		t.Fatal(err)
	}
	rt := &routeTable{store: local, route: Route{Name: "accounts", Topics: []string{topic}, Table: tbl, Mapper: m,
		KeyColumns: []string{"id"}, CopyOnWrite: cow, Outbox: NewOutbox(g.bridge)}}
	if sequenced {
		rt.route.SequenceBy, rt.route.DeleteWhen = "v", "name = '__deleted'"
		if rt.route.DeletedKeys, err = g.bridge.DeletedKeys(t.Context(), snap.Metadata().ID, time.Hour, upsert.AppendToken); err != nil {
			t.Fatal(err)
		}
	}
	g.tables["accounts"] = rt
	return &upsertRig{routesRig: g, topic: topic, table: rt, rng: rand.New(rand.NewPCG(1, 2)), want: map[int64]string{}}
}

// changes produces n random changes of keys 0..keys-1: mostly upserts
// (several of one key close together), a tenth deletes (tombstones), and
// records the state they leave. Key k goes to partition k % 3, so its
// changes keep their order.
func (u *upsertRig) changes(n, keys int) {
	u.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(u.kcfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		u.t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		id := u.rng.Int64N(int64(keys))
		r := &kgo.Record{Topic: u.topic, Partition: int32(id % 3), Key: fmt.Appendf(nil, `{"id": %d}`, id)}
		if u.rng.IntN(10) == 0 {
			delete(u.want, id)
		} else {
			name := "n" + strconv.Itoa(u.rng.IntN(1e6))
			r.Value = fmt.Appendf(nil, `{"name": %q}`, name)
			u.want[id] = name
		}
		recs[i] = r
	}
	if err := cl.ProduceSync(u.t.Context(), recs...).FirstErr(); err != nil {
		u.t.Fatal(err)
	}
}

// caughtUp reports whether the table's offsets reach the topic's end.
func (u *upsertRig) caughtUp() bool {
	u.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(u.kcfg.Brokers...))
	if err != nil {
		u.t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(u.t.Context(), u.topic)
	if err != nil {
		return false
	}
	s, err := delta.NewTable(u.table.store).Snapshot(u.t.Context())
	if err != nil {
		return false
	}
	last := ledger.Last(s, "deltaflow", u.topic)
	caught := true
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 && last[o.Partition] < o.Offset-1 {
			caught = false
		}
	})
	return caught
}

// check asserts the table holds each key's latest value once, and no
// deleted key.
func (u *upsertRig) check() {
	u.t.Helper()
	got := u.state()
	if !maps.Equal(got, u.want) {
		var wrong []string
		for id, name := range u.want {
			if got[id] != name && len(wrong) < 10 {
				wrong = append(wrong, fmt.Sprintf("%d: %q want %q", id, got[id], name))
			}
		}
		for id, name := range got {
			if _, live := u.want[id]; !live && len(wrong) < 20 {
				wrong = append(wrong, fmt.Sprintf("%d: %q, deleted", id, name))
			}
		}
		u.t.Errorf("the table holds %d keys, want %d; first differences: %v", len(got), len(u.want), wrong)
	}
}

// state is the table's rows, name by id; a key twice is an error.
func (u *upsertRig) state() map[int64]string {
	u.t.Helper()
	s, err := delta.NewTable(u.table.store).Snapshot(u.t.Context())
	if err != nil {
		u.t.Fatal(err)
	}
	schema, _ := s.Schema()
	got := map[int64]string{}
	for _, a := range s.Files() {
		rows, err := delta.ReadDataFile(u.t.Context(), u.table.store, schema, nil, a)
		if err != nil {
			u.t.Fatal(err)
		}
		for _, r := range rows {
			id := r[0].(int64)
			if _, twice := got[id]; twice {
				u.t.Errorf("key %d is in the table twice", id)
			}
			got[id] = r[1].(string)
		}
	}
	return got
}

// TestUpsertTable: changes of 300 keys (updates of one key within an
// epoch, deletes by tombstone, deleted keys coming back) streamed into an
// upsert table: it holds each live key once, with its latest value.
func TestUpsertTable(t *testing.T) {
	u := newUpsertRig(t)
	u.changes(2000, 300)
	r := u.start(Config{})
	defer r.stop(t)
	waitFor(t, u.caughtUp)
	u.check()
	for range 3 { // while running, over several epochs
		u.changes(500, 300)
		time.Sleep(150 * time.Millisecond)
	}
	waitFor(t, u.caughtUp)
	u.check()
}

// TestUpsertKeyIndex: the same changes of random keys streamed into an
// upsert table without a key index, with one that holds every file, and
// with one too small for most, leave exactly the same table; the index
// leaves files out (the commits' numTargetFilesAfterSkipping).
func TestUpsertKeyIndex(t *testing.T) {
	var tables []map[int64]string
	for _, limit := range []int64{0, 1 << 20, 2 << 10} {
		u := newUpsertRig(t)
		u.table.route.KeyIndexMemory = limit
		u.changes(2000, 5000)
		r := u.start(Config{})
		waitFor(t, u.caughtUp)
		for range 6 { // small epochs over the table's files
			u.changes(30, 5000)
			time.Sleep(150 * time.Millisecond)
		}
		waitFor(t, u.caughtUp)
		r.stop(t)
		u.check()
		tables = append(tables, u.state())
		before, after := u.filesSkipped()
		t.Logf("key index of %d bytes: %d table files, %d read", limit, before, after)
		if limit > 0 && after >= before { // each epoch's 30 keys miss most 30-key files
			t.Errorf("with a key index of %d bytes every table file was read (%d)", limit, after)
		}
	}
	for i, limit := range []string{"1MiB", "2KiB"} {
		if !maps.Equal(tables[i+1], tables[0]) {
			t.Errorf("with a %s key index the table holds %d keys, without one %d: not the same", limit, len(tables[i+1]), len(tables[0]))
		}
	}
}

// filesSkipped sums the upsert commits' table files and files read
// (numTargetFilesBeforeSkipping, numTargetFilesAfterSkipping).
func (u *upsertRig) filesSkipped() (before, after int) {
	u.t.Helper()
	commits, err := delta.NewTable(u.table.store).History(u.t.Context(), 0)
	if err != nil {
		u.t.Fatal(err)
	}
	for _, c := range commits {
		b, _ := strconv.Atoi(fmt.Sprint(c.OperationMetrics["numTargetFilesBeforeSkipping"]))
		a, _ := strconv.Atoi(fmt.Sprint(c.OperationMetrics["numTargetFilesAfterSkipping"]))
		before, after = before+b, after+a
	}
	return before, after
}

// TestUpsertCopyOnWrite: with copy_on_write, the table reaches the same
// state with no deletion vector: each file holding a replaced row is
// rewritten without it.
func TestUpsertCopyOnWrite(t *testing.T) {
	u := newUpsertRigCOW(t, true)
	u.changes(2000, 300)
	r := u.start(Config{})
	defer r.stop(t)
	for range 3 {
		u.changes(500, 300)
		time.Sleep(150 * time.Millisecond)
	}
	waitFor(t, u.caughtUp)
	u.check()
	s, err := delta.NewTable(u.table.store).Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Files() {
		if f.DeletionVector != nil {
			t.Errorf("%s has a deletion vector", f.Path)
		}
	}
}

// TestUpsertWhereDeletes: in an upsert table with a filter, a change the
// filter leaves out deletes its key (the key's latest state is not the
// table's), and a later one it takes brings the key back.
func TestUpsertWhereDeletes(t *testing.T) {
	u := newUpsertRig(t)
	u.table.route.Where = "name <> 'gone'"
	u.changes(300, 50)
	gone := func(id int64) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(u.kcfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		r := &kgo.Record{Topic: u.topic, Partition: int32(id % 3), Key: fmt.Appendf(nil, `{"id": %d}`, id), Value: []byte(`{"name": "gone"}`)}
		if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		delete(u.want, id)
	}
	for id := range int64(10) {
		gone(id)
	}
	r := u.start(Config{})
	defer r.stop(t)
	waitFor(t, u.caughtUp)
	u.check()
	u.changes(300, 50) // most come back
	waitFor(t, u.caughtUp)
	u.check()
}

// TestUpsertKillLoop: the engine is killed without a final commit again
// and again while changes stream; the table still holds each live key's
// latest value once.
func TestUpsertKillLoop(t *testing.T) {
	u := newUpsertRig(t)
	killWhileProducing(t, u.start, func(int) { u.changes(200, 150) })
	r := u.start(Config{})
	defer r.stop(t)
	waitFor(t, u.caughtUp)
	u.check()
}

// TestUpsertConcurrentOptimize: OPTIMIZE runs on the table again and again
// while upserts stream; an epoch whose files it removed is a conflict,
// re-read, so no delete or update is lost and no key doubled.
func TestUpsertConcurrentOptimize(t *testing.T) {
	u := newUpsertRig(t)
	u.changes(1000, 200)
	r := u.start(Config{FlushInterval: 50 * time.Millisecond})
	defer r.stop(t)
	tbl := delta.NewTable(u.table.store)
	optimized := 0
	for i := range 15 {
		u.changes(200, 200)
		if s, err := tbl.Snapshot(t.Context()); err == nil {
			res, err := tbl.Optimize(t.Context(), s, delta.OptimizeOptions{})
			if err == nil && res.Version >= 0 {
				optimized++
			} else if err != nil && !delta.IsConflict(err) {
				t.Fatalf("optimize %d: %v", i, err)
			}
		}
		time.Sleep(30 * time.Millisecond)
	}
	waitFor(t, u.caughtUp)
	u.check()
	if optimized == 0 {
		t.Error("no OPTIMIZE committed while upserts streamed")
	}
	t.Logf("%d OPTIMIZEs committed, %d epoch conflicts", optimized, int(testutil.ToFloat64(r.metrics().Conflicts)))
}

// sequenced is one change of a sequenced rig: an upsert of id with name,
// or a delete (name ""), at sequence v.
type sequenced struct {
	id   int64
	name string
	v    int64
}

// send produces changes in order, each key's to its partition, and
// records the state they leave by sequence: per key the change with the
// highest v (at equal ones the later), in best.
func (u *upsertRig) send(best map[int64]sequenced, changes ...sequenced) {
	u.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(u.kcfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		u.t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(changes))
	for i, c := range changes {
		name := c.name
		if name == "" {
			name = "__deleted"
		}
		recs[i] = &kgo.Record{Topic: u.topic, Partition: int32(c.id % 3), Key: fmt.Appendf(nil, `{"id": %d}`, c.id),
			Value: fmt.Appendf(nil, `{"name": %q, "v": %d}`, name, c.v)}
		if b, ok := best[c.id]; !ok || c.v >= b.v {
			best[c.id] = c
		}
	}
	if err := cl.ProduceSync(u.t.Context(), recs...).FirstErr(); err != nil {
		u.t.Fatal(err)
	}
	clear(u.want)
	for id, c := range best {
		if c.name != "" {
			u.want[id] = c.name
		}
	}
}

// TestUpsertSequence: with sequence_by, a key's change with the highest
// sequence wins whatever order the changes arrive in, across epochs: a
// late change older than the key's row is ignored, and so is one older
// than the key's delete (remembered in the KV), each counted; a newer one
// brings a deleted key back.
func TestUpsertSequence(t *testing.T) {
	u := newUpsertRigOf(t, false, true)
	r := u.start(Config{})
	defer r.stop(t)
	best := map[int64]sequenced{}
	step := func(name string, wantStale float64, changes ...sequenced) {
		t.Helper()
		u.send(best, changes...)
		waitFor(t, u.caughtUp)
		u.check()
		if got := testutil.ToFloat64(r.metrics().StaleChanges); got != wantStale {
			t.Errorf("%s: %v stale changes counted, want %v", name, got, wantStale)
		}
	}
	step("older within an epoch", 0, sequenced{1, "a", 10}, sequenced{2, "b", 10}, sequenced{3, "c", 10}, sequenced{1, "a-old", 5})
	step("older than the row, a delete older than the row, a delete", 2,
		sequenced{1, "x", 7}, sequenced{3, "", 3}, sequenced{2, "", 20})
	step("older than the delete", 3, sequenced{2, "late", 15})
	keys, err := upsert.NewKeys(u.table.route.Mapper.DataSchema(), []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := keys.AppendColumns(nil, []parquet.Value{parquet.Int64Value(2)})
	seqs, err := u.table.route.DeletedKeys.Sequences(t.Context(), []string{string(key)})
	if err != nil || seqs[string(key)] != 20 {
		t.Errorf("key 2's delete remembered as %v (%v), want 20", seqs, err)
	}
	step("newer than the delete", 3, sequenced{2, "back", 25})
}

// TestUpsertSequenceKillLoop: changes of random sequences, so that most
// arrive out of order, stream while the engine is killed again and again:
// the table ends holding each key's highest-sequence change, no key twice.
func TestUpsertSequenceKillLoop(t *testing.T) {
	u := newUpsertRigOf(t, false, true)
	best := map[int64]sequenced{}
	rng := rand.New(rand.NewPCG(3, 4))
	batch := func(int) {
		changes := make([]sequenced, 150)
		for i := range changes {
			c := sequenced{id: rng.Int64N(60), v: rng.Int64N(1000)}
			if rng.IntN(5) != 0 {
				c.name = "n" + strconv.Itoa(rng.IntN(1e6))
			}
			changes[i] = c
		}
		u.send(best, changes...)
	}
	killWhileProducing(t, u.start, batch)
	r := u.start(Config{})
	defer r.stop(t)
	waitFor(t, u.caughtUp)
	u.check()
}
