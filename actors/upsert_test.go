package actors

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/storage"
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

func newUpsertRig(t *testing.T) *upsertRig { return newUpsertRigCOW(t, false) }

// newUpsertRigCOW is newUpsertRig, copy-on-write (no deletion vectors) if
// cow.
func newUpsertRigCOW(t *testing.T, cow bool) *upsertRig {
	const topic = "accounts"
	g := newRoutesRig(t, map[string]int32{topic: 3})
	m, err := mapping.New(mapping.Config{Mode: mapping.Strict, KeyFormat: mapping.JSON, Tombstones: true, Columns: []mapping.Column{
		{Name: "id", Type: "long", Source: "kafka.key.id"},
		{Name: "name", Type: "string", Required: true},
		{Name: "kafka_offset", Type: "long", Source: "kafka.offset"},
	}}, nil)
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
	if _, err := tbl.Create(t.Context(), m.Schema(), nil, conf); err != nil {
		t.Fatal(err)
	}
	rt := &routeTable{store: local, route: Route{Name: "accounts", Topics: []string{topic}, Table: tbl, Mapper: m,
		KeyColumns: []string{"id"}, CopyOnWrite: cow, Outbox: NewOutbox(g.bridge)}}
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
