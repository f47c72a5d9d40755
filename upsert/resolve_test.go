package upsert

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/messages/keylog"
	"github.com/deltaflow/deltaflow/storage"
)

// upsertTable is a local table in upsert mode (id long key, name string)
// and the epochs written to it.
type upsertTable struct {
	t     *testing.T
	dir   string
	store storage.Store
	table *delta.Table
	snap  *delta.Snapshot
	keys  *Keys
	data  *delta.StructType
	up    *Table
	next  int64 // the offset of the next change
}

// sequenced makes the table's changes ordered by a column v (written with
// each change's sequence) with deleted keys remembered in memory.
func (u *upsertTable) sequenced() *memDeleted {
	u.t.Helper()
	u.data.Fields = append(u.data.Fields, delta.StructField{Name: "v", Type: delta.Long, Nullable: true})
	snap, _, err := u.table.EnsureSchema(u.t.Context(), u.data, nil, nil)
	if err != nil {
		u.t.Fatal(err)
	}
	u.snap = snap
	seq, err := NewSequence(u.data, "v")
	if err != nil {
		u.t.Fatal(err)
	}
	mem := &memDeleted{seqs: map[string]int64{}}
	u.up.Sequence, u.up.Deleted = seq, mem
	return mem
}

// memDeleted is DeletedKeys in a map.
type memDeleted struct{ seqs map[string]int64 }

func (m *memDeleted) Sequences(_ context.Context, keys []string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, k := range keys {
		if s, ok := m.seqs[k]; ok {
			out[k] = s
		}
	}
	return out, nil
}

func (m *memDeleted) Remember(_ context.Context, deletes map[string]int64) error {
	for k, s := range deletes {
		m.seqs[k] = max(m.seqs[k], s)
	}
	return nil
}

func newUpsertTable(t *testing.T, cow bool) *upsertTable { return newUpsertTableConf(t, cow, nil) }

// newUpsertTableConf is newUpsertTable, the table created with the
// properties conf too.
func newUpsertTableConf(t *testing.T, cow bool, props map[string]string) *upsertTable {
	dir := t.TempDir()
	store, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := &delta.StructType{Fields: []delta.StructField{
		{Name: "id", Type: delta.Long, Nullable: true}, {Name: "name", Type: delta.String, Nullable: true}}}
	table := delta.NewTable(store)
	conf := map[string]string{"delta.enableDeletionVectors": "true"}
	if cow {
		conf = map[string]string{}
	}
	maps.Copy(conf, props)
	snap, _, err := table.EnsureSchema(t.Context(), data, nil, conf)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := NewKeys(data, []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	return &upsertTable{t: t, dir: dir, store: store, table: table, snap: snap, keys: keys, data: data, up: &Table{Keys: keys, CopyOnWrite: cow}}
}

// rawTable is a local table in upsert mode of any schema (upsertTable's
// is id long, name string, unpartitioned) keyed by its first column, its
// epochs of upserts resolved and committed.
type rawTable struct {
	t      *testing.T
	store  storage.Store
	table  *delta.Table
	snap   *delta.Snapshot
	schema *delta.StructType
	part   string // the partition column, its last; "" for none
	up     *Table
	key    func(delta.Row) parquet.Value // a row's key column value, as a data file holds it
	offset int64
}

// newRawTable creates a table of schema, partitioned by part (unless ""),
// with properties conf.
func newRawTable(t *testing.T, schema *delta.StructType, part string, conf map[string]string, key func(delta.Row) parquet.Value) *rawTable {
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	u := &rawTable{t: t, store: store, table: delta.NewTable(store), schema: schema, part: part, key: key}
	var parts []string
	data := schema
	if part != "" {
		parts, data = []string{part}, &delta.StructType{Fields: schema.Fields[:len(schema.Fields)-1]}
	}
	if u.snap, err = u.table.Create(t.Context(), schema, parts, conf); err != nil {
		t.Fatal(err)
	}
	keys, err := NewKeys(data, []string{schema.Fields[0].Name})
	if err != nil {
		t.Fatal(err)
	}
	u.up = &Table{Keys: keys}
	return u
}

// epoch upserts rows, one data file per partition value (a row's last
// value), resolved and committed.
func (u *rawTable) epoch(rows ...delta.Row) Result {
	u.t.Helper()
	ctx := u.t.Context()
	byPart := map[string][]delta.Row{}
	for _, r := range rows {
		p := ""
		if u.part != "" {
			p = r[len(r)-1].(string)
		}
		byPart[p] = append(byPart[p], r)
	}
	var ch Changes
	for _, p := range slices.Sorted(maps.Keys(byPart)) {
		var log keylog.Log
		for _, r := range byPart[p] {
			key, err := u.up.Keys.AppendColumns(nil, []parquet.Value{u.key(r)})
			if err != nil {
				u.t.Fatal(err)
			}
			u.offset++
			log.Append(key, u.offset, u.offset)
		}
		var parts []string
		var values map[string]*string
		if u.part != "" {
			parts, values = []string{u.part}, map[string]*string{u.part: &p}
		}
		add, err := delta.WriteDataFile(ctx, u.store, u.schema, parts, values, byPart[p], delta.WriterOptions{})
		if err != nil {
			u.t.Fatal(err)
		}
		ch.Files = append(ch.Files, NewFile{Add: add, Rows: &log})
	}
	res, err := u.up.Resolve(ctx, u.store, u.snap, ch, time.Now())
	if err != nil {
		u.t.Fatal(err)
	}
	if _, err := u.table.Commit(ctx, u.snap, res.Actions, delta.Operation{Name: "WRITE"}); err != nil {
		u.t.Fatal(err)
	}
	return res
}

// rows are the table's rows as our reader reads them, printed, sorted.
func (u *rawTable) rows() []string {
	u.t.Helper()
	var parts []string
	if u.part != "" {
		parts = []string{u.part}
	}
	var out []string
	for _, f := range u.snap.Files() {
		rows, err := delta.ReadDataFile(u.t.Context(), u.store, u.schema, parts, f)
		if err != nil {
			u.t.Fatal(err)
		}
		for _, r := range rows {
			out = append(out, fmt.Sprint(r))
		}
	}
	slices.Sort(out)
	return out
}

// A decimal key column: an epoch's change of a key finds the key's row in
// the table's files, whose key column it reads back (its unscaled values,
// as the mapped rows encode them).
func TestResolveDecimalKeys(t *testing.T) {
	schema := &delta.StructType{Fields: []delta.StructField{{Name: "id", Type: delta.DecimalType{Precision: 10, Scale: 2}, Nullable: true},
		{Name: "name", Type: delta.String, Nullable: true}}}
	unscaled := map[string]int64{"12.50": 1250, "-0.01": -1, "7.00": 700}
	u := newRawTable(t, schema, "", map[string]string{"delta.enableDeletionVectors": "true"},
		func(r delta.Row) parquet.Value { return parquet.Int64Value(unscaled[r[0].(string)]) })
	u.epoch(delta.Row{"12.50", "a"}, delta.Row{"-0.01", "b"})
	res := u.epoch(delta.Row{"12.50", "a2"}, delta.Row{"7.00", "c"})
	if res.Replaced != 1 {
		t.Errorf("%+v: want 12.50's row replaced", res)
	}
	if got, want := u.rows(), []string{"[-0.01 b]", "[12.50 a2]", "[7.00 c]"}; !slices.Equal(got, want) {
		t.Errorf("table %q, want %q", got, want)
	}
}

// change is one change of an epoch: an upsert of id with name, or a
// delete of id (name ""), at sequence seq.
type change struct {
	id   int64
	name string
	seq  int64
}

// epoch writes the upserts of changes as one data file and commits it with
// the deletes, resolved; the changes' offsets follow the last epoch's.
func (u *upsertTable) epoch(changes ...change) Result {
	u.t.Helper()
	ctx := u.t.Context()
	var ch Changes
	var rows []delta.Row
	var keys keylog.Log
	for _, c := range changes {
		key, err := u.keys.AppendColumns(nil, []parquet.Value{parquet.Int64Value(c.id)})
		if err != nil {
			u.t.Fatal(err)
		}
		u.next++
		if c.name == "" {
			ch.Deletes.Append(key, c.seq, u.next)
			continue
		}
		row := delta.Row{c.id, c.name}
		if u.up.Sequence != nil {
			row = append(row, c.seq)
		}
		rows = append(rows, row)
		keys.Append(key, c.seq, u.next)
	}
	if len(rows) > 0 {
		add, err := delta.WriteDataFile(ctx, u.store, u.data, nil, nil, rows, delta.WriterOptions{})
		if err != nil {
			u.t.Fatal(err)
		}
		ch.Files = append(ch.Files, NewFile{Add: add, Rows: &keys})
	}
	res, err := u.up.Resolve(ctx, u.store, u.snap, ch, time.Now())
	if err != nil {
		u.t.Fatal(err)
	}
	if _, err := u.table.Commit(ctx, u.snap, res.Actions, delta.Operation{Name: "WRITE"}); err != nil {
		u.t.Fatal(err)
	}
	res.Index.Committed()
	return res
}

// state is the table as our reader reads it: name by id.
func (u *upsertTable) state() map[int64]string {
	u.t.Helper()
	if err := u.table.Update(u.t.Context(), u.snap); err != nil {
		u.t.Fatal(err)
	}
	out := map[int64]string{}
	for _, f := range u.snap.Files() {
		rows, err := delta.ReadDataFile(u.t.Context(), u.store, u.data, nil, f)
		if err != nil {
			u.t.Fatal(err)
		}
		for _, r := range rows {
			id := r[0].(int64)
			if _, twice := out[id]; twice {
				u.t.Fatalf("key %d twice in the table", id)
			}
			out[id] = r[1].(string)
		}
	}
	return out
}

func (u *upsertTable) check(want map[int64]string) {
	u.t.Helper()
	if got := u.state(); !maps.Equal(got, want) {
		u.t.Fatalf("table %v, want %v", got, want)
	}
}

// An epoch's changes of one key collapse to its latest, which replaces the
// key's row in the table; deletes remove keys (a delete of a key the table
// lacks is nothing), a file whose rows are all gone leaves the table, a
// deleted key can come back; delta-rs reads what our reader reads.
func TestResolve(t *testing.T) {
	for _, cow := range []bool{false, true} {
		t.Run(map[bool]string{false: "deletion_vectors", true: "copy_on_write"}[cow], func(t *testing.T) { testResolve(t, cow) })
	}
}

// testResolve is TestResolve with deletion vectors or copy-on-write; the
// latter leaves no vector, and delta-rs's reader that refuses them
// (to_pyarrow_table) reads the table.
func testResolve(t *testing.T, cow bool) {
	u := newUpsertTable(t, cow)
	res := u.epoch(change{1, "a", 10}, change{2, "b", 11}, change{3, "c", 12}, change{1, "a2", 13})
	if res.Rows != 3 || res.Superseded != 1 || res.Replaced != 0 {
		t.Errorf("epoch 1: %+v, want 3 rows, 1 superseded", res)
	}
	u.check(map[int64]string{1: "a2", 2: "b", 3: "c"})

	res = u.epoch(change{2, "b2", 20}, change{3, "", 21}, change{9, "", 22})
	if res.Rows != 1 || res.Replaced != 2 || res.FilesRead != 1 {
		t.Errorf("epoch 2: %+v, want 1 row, 2 replaced, 1 file read", res)
	}
	u.check(map[int64]string{1: "a2", 2: "b2"})

	// A delete then a later upsert of one key in an epoch: the upsert wins;
	// an upsert then a later delete: the delete does.
	u.epoch(change{1, "", 30}, change{1, "a3", 31}, change{2, "b3", 32}, change{2, "", 33})
	u.check(map[int64]string{1: "a3"})

	u.epoch(change{1, "", 40})
	u.check(map[int64]string{})
	if n := u.snap.NumFiles(); n != 0 {
		t.Errorf("%d files live in an empty table, want 0", n)
	}
	u.epoch(change{3, "c2", 50}, change{4, "d", 51})
	want := map[int64]string{3: "c2", 4: "d"}
	u.check(want)

	var view struct {
		Rows, DuckdbRows       []map[string]any
		RowsError, DuckdbError string
	}
	args := []string{"read", u.dir, "--rows", "--query", "--duckdb"}
	if cow {
		args = []string{"read", u.dir, "--rows", "--duckdb"} // to_pyarrow_table: no deletion vectors
		for _, f := range u.snap.Files() {
			if f.DeletionVector != nil {
				t.Errorf("copy-on-write left a deletion vector on %s", f.Path)
			}
		}
	}
	if err := json.Unmarshal(testenv.DeltaRS(t, nil, args...), &view); err != nil {
		t.Fatal(err)
	}
	for reader, rows := range map[string][]map[string]any{"delta-rs": view.Rows, "DuckDB": view.DuckdbRows} {
		got := map[int64]string{}
		for _, r := range rows {
			got[int64(r["id"].(float64))] = r["name"].(string)
		}
		if !maps.Equal(got, want) || len(rows) != len(want) {
			t.Errorf("%s reads %v, want %v (%s%s)", reader, rows, want, view.RowsError, view.DuckdbError)
		}
	}
}

// With a sequence column, a key's change with the highest sequence wins
// whenever it arrives (an equal one: the later record): a late change
// older than the key's row in the table, or than its remembered delete,
// is stale and leaves the table as it is; so is a late delete older than
// the row.
func TestResolveSequence(t *testing.T) {
	for _, cow := range []bool{false, true} {
		t.Run(map[bool]string{false: "deletion_vectors", true: "copy_on_write"}[cow], func(t *testing.T) {
			u := newUpsertTable(t, cow)
			mem := u.sequenced()
			step := func(name string, wantStale int64, want map[int64]string, changes ...change) {
				t.Helper()
				if res := u.epoch(changes...); res.Stale != wantStale {
					t.Errorf("%s: %+v, want %d stale", name, res, wantStale)
				}
				u.check(want)
			}
			step("older within the epoch", 0, map[int64]string{1: "a", 2: "b"},
				change{1, "a", 10}, change{2, "b", 10}, change{1, "a-old", 5})
			step("older than the table", 1, map[int64]string{1: "a", 2: "b"}, change{1, "x", 7})
			step("equal: the later record", 0, map[int64]string{1: "a", 2: "b2"}, change{2, "b2", 10})
			step("delete", 0, map[int64]string{2: "b2"}, change{1, "", 20})
			if got := mem.seqs[u.key(1)]; got != 20 {
				t.Errorf("key 1's delete remembered at %d, want 20", got)
			}
			step("older than the delete", 1, map[int64]string{2: "b2"}, change{1, "late", 15})
			step("newer than the delete", 0, map[int64]string{1: "new", 2: "b2"}, change{1, "new", 25})
			step("a delete older than the row", 1, map[int64]string{1: "new", 2: "b2"}, change{2, "", 3})
			step("a delete older within the epoch", 0, map[int64]string{1: "new", 2: "b2", 3: "c"},
				change{3, "c", 30}, change{3, "", 29})
			step("a stale upsert and delete of a key", 2, map[int64]string{1: "new", 2: "b2", 3: "c"},
				change{3, "", 28}, change{3, "c-old", 27})
			// An epoch re-read after its commit failed finds its delete
			// remembered already: not stale. An upsert at the delete's
			// sequence came later, and wins.
			mem.seqs[u.key(9)] = 50
			step("a delete remembered at its own sequence", 0, map[int64]string{1: "new", 2: "b2", 3: "c"}, change{9, "", 50})
			step("an upsert at a delete's sequence", 0, map[int64]string{1: "new", 2: "b2", 3: "c", 9: "i"}, change{9, "i", 50})
		})
	}
}

// key is id's encoded key.
func (u *upsertTable) key(id int64) string {
	key, err := u.keys.AppendColumns(nil, []parquet.Value{parquet.Int64Value(id)})
	if err != nil {
		u.t.Fatal(err)
	}
	return string(key)
}

// Files whose first key column's statistics exclude every changed key are
// not read.
func TestResolvePrunesByStats(t *testing.T) {
	u := newUpsertTable(t, false)
	var changes []change
	for i := range int64(10) {
		u.epoch(change{i * 100, "x", i*100 + 1}, change{i*100 + 50, "y", i*100 + 2})
	}
	res := u.epoch(append(changes, change{450, "z", 2000}, change{451, "", 2001})...)
	if res.FilesRead != 1 || res.Replaced != 1 {
		t.Errorf("%+v: want 1 file read (ids 400-450), 1 row replaced", res)
	}
	if got := u.state()[450]; got != "z" {
		t.Errorf("id 450 is %q, want z", got)
	}
}

// String keys prune by their minimum, and by their maximum unless a writer
// may have cut it.
func TestFirstKeysMayHold(t *testing.T) {
	keys := func(ss ...string) firstKeys {
		wins := map[string]winner{}
		for _, s := range ss {
			wins[string(appendString(nil, []byte(s)))] = winner{}
		}
		return newFirstKeys(wins)
	}
	long := fmt.Sprintf("%040d", 5)
	for _, tc := range []struct {
		keys     firstKeys
		min, max string
		want     bool
	}{
		{keys("b"), "a", "c", true},
		{keys("d"), "a", "c", false},
		{keys("0"), "a", "c", false},
		{keys("a", "z"), "b", "c", false},
		{keys("d"), "a", long, true},
		{keys("z"), "a", "a" + long, true}, // a cut maximum bounds nothing
	} {
		stats := fmt.Sprintf(`{"numRecords":1,"minValues":{"k":%q},"maxValues":{"k":%q}}`, tc.min, tc.max)
		if got := tc.keys.mayHold(stats, "k"); got != tc.want {
			t.Errorf("keys %v, [%s, %s]: %v, want %v", tc.keys.strings, tc.min, tc.max, got, tc.want)
		}
	}
	if !slices.Equal(keys("b", "a").strings, []string{"a", "b"}) {
		t.Error("first keys not sorted")
	}
}
