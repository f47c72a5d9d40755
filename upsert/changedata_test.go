package upsert

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// changeRow is a row of a change data feed: a key's name and the change's
// type, at a commit version (-1: one epoch's file, with no version).
type changeRow struct {
	id      int64
	name    string
	kind    string
	version int64
}

// With a change data feed, an epoch that replaces or deletes rows of the
// table writes one change data file holding every change it makes, inserts
// too, as Spark's MERGE does: a key changed several times is one
// pre-image/post-image pair, a key updated then deleted is the delete of
// its row, a key inserted and deleted in the epoch and a delete of a
// missing key are nothing. An epoch that only inserts writes none (readers
// take its adds as inserts). delta-rs's load_cdf reads the feed.
func TestResolveChangeData(t *testing.T) {
	for _, cow := range []bool{false, true} {
		t.Run(map[bool]string{false: "deletion_vectors", true: "copy_on_write"}[cow], func(t *testing.T) {
			u := newUpsertTableConf(t, cow, map[string]string{"delta.enableChangeDataFeed": "true"})
			if !slices.Contains(u.snap.ActiveFeatures(), "changeDataFeed") {
				t.Fatalf("the table's change data feed is off: %v", u.snap.ActiveFeatures())
			}
			res := u.epoch(change{1, "a", 1}, change{2, "b", 2}, change{3, "c", 3}, change{5, "e", 5})
			if cdc := cdcActions(res.Actions); len(cdc) != 0 || res.ChangeFiles != 0 {
				t.Errorf("an epoch of inserts wrote change data files %v", cdc)
			}
			// Inserts, one key twice: with deletion vectors its file is
			// added with one, and the epoch has change data.
			res = u.epoch(change{8, "h", 6}, change{8, "h2", 7})
			if cdc := cdcActions(res.Actions); cow && len(cdc) != 0 {
				t.Errorf("an epoch of inserts wrote change data files %v", cdc)
			} else if !cow {
				if got, want := u.changeRows(res), []changeRow{{8, "h2", "insert", -1}}; !slices.Equal(got, want) {
					t.Errorf("change data %v, want %v", got, want)
				}
			}
			u.epoch(change{1, "a2", 8})
			res = u.epoch(change{2, "b2", 10}, change{2, "b3", 11}, change{3, "", 12}, change{4, "d", 13},
				change{1, "a3", 14}, change{1, "", 15}, change{6, "f", 16}, change{6, "", 17}, change{9, "", 18})
			want := []changeRow{{1, "a2", "delete", -1}, {2, "b", "update_preimage", -1}, {2, "b3", "update_postimage", -1},
				{3, "c", "delete", -1}, {4, "d", "insert", -1}}
			if got := u.changeRows(res); !slices.Equal(got, want) {
				t.Errorf("change data %v, want %v", got, want)
			}
			u.check(map[int64]string{2: "b3", 4: "d", 5: "e", 8: "h2"})
			// A key updated within the epoch: the update is the epoch's
			// only change, with the insert of a new key.
			res = u.epoch(change{5, "e2", 20}, change{7, "g", 21}, change{7, "g2", 22})
			want = []changeRow{{5, "e", "update_preimage", -1}, {5, "e2", "update_postimage", -1}, {7, "g2", "insert", -1}}
			if got := u.changeRows(res); !slices.Equal(got, want) {
				t.Errorf("change data %v, want %v", got, want)
			}

			var feed struct {
				Rows  []map[string]any
				Error string
			}
			if err := json.Unmarshal(testenv.DeltaRS(t, nil, "changes", u.dir, "--start", "1"), &feed); err != nil {
				t.Fatal(err)
			}
			var got []changeRow
			for _, r := range feed.Rows {
				got = append(got, changeRow{int64(r["id"].(float64)), r["name"].(string), r["_change_type"].(string), int64(r["_commit_version"].(float64))})
			}
			slices.SortFunc(got, compareChanges)
			want = []changeRow{{1, "a", "insert", 1}, {2, "b", "insert", 1}, {3, "c", "insert", 1}, {5, "e", "insert", 1},
				{8, "h2", "insert", 2}, {1, "a", "update_preimage", 3}, {1, "a2", "update_postimage", 3},
				{1, "a2", "delete", 4}, {2, "b", "update_preimage", 4}, {2, "b3", "update_postimage", 4}, {3, "c", "delete", 4}, {4, "d", "insert", 4},
				{5, "e", "update_preimage", 5}, {5, "e2", "update_postimage", 5}, {7, "g2", "insert", 5}}
			slices.SortFunc(want, compareChanges)
			if !slices.Equal(got, want) {
				t.Errorf("delta-rs load_cdf reads %v (%s), want %v", got, feed.Error, want)
			}
		})
	}
}

// Under column mapping the change data files use the physical names and
// column ids of the data files, and read back by the columns' names.
// delta-rs's load_cdf reads the feed by them, once it reads column-mapped
// feeds at all: 1.6 refuses them (delta-io/delta-rs#4474), so Spark's
// readChangeFeed checks the feed in internal/tests/upsert.
func TestResolveChangeDataColumnMapping(t *testing.T) {
	u := newUpsertTable(t, false)
	conf := map[string]string{"delta.columnMapping.mode": "name", "delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true"}
	mapped, conf, err := delta.AssignColumnMapping(u.data, conf)
	if err != nil {
		t.Fatal(err)
	}
	// A table of its own, created with column mapping: the mapped schema
	// is what its files are written and read with.
	u.dir = t.TempDir()
	if u.store, err = storage.NewLocal(u.dir); err != nil {
		t.Fatal(err)
	}
	u.table = delta.NewTable(u.store)
	if u.snap, err = u.table.Create(t.Context(), mapped, nil, conf); err != nil {
		t.Fatal(err)
	}
	u.data = mapped
	u.epoch(change{1, "a", 1}, change{2, "b", 2})
	res := u.epoch(change{1, "a2", 3}, change{2, "", 4}, change{3, "c", 5})
	want := []changeRow{{1, "a", "update_preimage", -1}, {1, "a2", "update_postimage", -1}, {2, "b", "delete", -1}, {3, "c", "insert", -1}}
	if got := u.changeRows(res); !slices.Equal(got, want) {
		t.Errorf("change data %v, want %v", got, want)
	}
	var feed struct {
		Rows  []map[string]any
		Error string
	}
	if err := json.Unmarshal(testenv.DeltaRS(t, nil, "changes", u.dir, "--start", "1"), &feed); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(feed.Error, "Column mapping is not supported") {
		t.Logf("delta-rs: %s", feed.Error)
		return
	}
	var got []changeRow
	for _, r := range feed.Rows {
		id, _ := r["id"].(float64)
		name, _ := r["name"].(string)
		kind, _ := r["_change_type"].(string)
		version, _ := r["_commit_version"].(float64)
		got = append(got, changeRow{int64(id), name, kind, int64(version)})
	}
	slices.SortFunc(got, compareChanges)
	want = []changeRow{{1, "a", "insert", 1}, {2, "b", "insert", 1},
		{1, "a", "update_preimage", 2}, {1, "a2", "update_postimage", 2}, {2, "b", "delete", 2}, {3, "c", "insert", 2}}
	slices.SortFunc(want, compareChanges)
	if !slices.Equal(got, want) {
		t.Errorf("delta-rs load_cdf reads %v (%s), want %v", got, feed.Error, want)
	}
}

// A partitioned table under column mapping, whose adds key their
// partition values by physical name: an epoch replacing rows of two
// partitions writes one change data file for each, in its partition's
// directory, with its partition's values, holding that partition's changes.
func TestResolveChangeDataColumnMappingPartitioned(t *testing.T) {
	table := &delta.StructType{Fields: []delta.StructField{{Name: "id", Type: delta.Long, Nullable: true},
		{Name: "name", Type: delta.String, Nullable: true}, {Name: "p", Type: delta.String, Nullable: true}}}
	mapped, conf, err := delta.AssignColumnMapping(table, map[string]string{"delta.columnMapping.mode": "name",
		"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true"})
	if err != nil {
		t.Fatal(err)
	}
	u := newRawTable(t, mapped, "p", conf, func(r delta.Row) parquet.Value { return parquet.Int64Value(r[0].(int64)) })
	u.epoch(delta.Row{int64(1), "x", "a"}, delta.Row{int64(2), "y", "b"})
	res := u.epoch(delta.Row{int64(1), "x2", "a"}, delta.Row{int64(2), "y2", "b"})
	physP := delta.PhysicalName(&mapped.Fields[2])
	got := map[string][]string{}
	for _, c := range cdcActions(res.Actions) {
		v := c.PartitionValues[physP]
		if v == nil || len(c.PartitionValues) != 1 || !strings.HasPrefix(c.Path, "_change_data/p="+*v+"/") {
			t.Errorf("cdc action %+v: want it in its partition's directory, its partition value by %s", c, physP)
			continue
		}
		rows, err := delta.ReadDataFile(t.Context(), u.store, &delta.StructType{Fields: []delta.StructField{mapped.Fields[0], mapped.Fields[1],
			{Name: delta.ChangeTypeColumn, Type: delta.String, Nullable: true}, mapped.Fields[2]}}, []string{"p"},
			&delta.Add{Path: c.Path, PartitionValues: c.PartitionValues})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			got[*v] = append(got[*v], fmt.Sprintf("%d %s %s %s", r[0], r[1], r[2], r[3]))
		}
	}
	for p := range got {
		slices.Sort(got[p])
	}
	want := map[string][]string{"a": {"1 x update_preimage a", "1 x2 update_postimage a"}, "b": {"2 y update_preimage b", "2 y2 update_postimage b"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("change data by partition %v, want %v", got, want)
	}
}

func compareChanges(a, b changeRow) int {
	if a.version != b.version {
		return int(a.version - b.version)
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

// cdcActions are the cdc actions of actions.
func cdcActions(actions []delta.Action) []*delta.AddCDC {
	var out []*delta.AddCDC
	for _, a := range actions {
		if a.Cdc != nil {
			out = append(out, a.Cdc)
		}
	}
	return out
}

// changeRows checks the epoch's commit holds one cdc action, as the
// protocol and Spark write it (under _change_data, dataChange false, the
// file's size), and returns the rows of its file, sorted.
func (u *upsertTable) changeRows(res Result) []changeRow {
	u.t.Helper()
	cdc := cdcActions(res.Actions)
	if len(cdc) != 1 || res.ChangeFiles != 1 {
		u.t.Fatalf("%d cdc actions (%d counted), want 1", len(cdc), res.ChangeFiles)
	}
	c := cdc[0]
	line, err := json.Marshal(delta.Action{Cdc: c})
	if err != nil {
		u.t.Fatal(err)
	}
	wantLine := fmt.Sprintf(`{"cdc":{"path":%q,"partitionValues":{},"size":%d,"dataChange":false}}`, c.Path, c.Size)
	if !strings.HasPrefix(c.Path, "_change_data/cdc-00000-") || !strings.HasSuffix(c.Path, ".c000.snappy.parquet") || string(line) != wantLine {
		u.t.Errorf("cdc action %s, want one like %s", line, wantLine)
	}
	acts, err := delta.ParseActions("commit", line)
	if err != nil || len(acts) != 1 || acts[0].Cdc == nil || acts[0].Cdc.PartitionValues == nil {
		u.t.Errorf("the cdc action parses as %+v (%v)", acts, err)
	}
	info, err := u.store.Stat(u.t.Context(), c.Path)
	if err != nil || info.Size != c.Size {
		u.t.Errorf("the change data file: %+v (%v), want %d bytes", info, err, c.Size)
	}
	file := &delta.StructType{Fields: append(slices.Clone(u.data.Fields), delta.StructField{Name: "_change_type", Type: delta.String, Nullable: true})}
	rows, err := delta.ReadDataFile(u.t.Context(), u.store, file, nil, &delta.Add{Path: c.Path})
	if err != nil {
		u.t.Fatal(err)
	}
	var out []changeRow
	for _, r := range rows {
		out = append(out, changeRow{r[0].(int64), r[1].(string), r[2].(string), -1})
	}
	slices.SortFunc(out, compareChanges)
	return out
}

// openCounter is a store that counts the opens of each object.
type openCounter struct {
	storage.Store
	opens map[string]int
}

func (c *openCounter) Open(ctx context.Context, key string) (storage.Reader, error) {
	c.opens[key]++
	return c.Store.Open(ctx, key)
}

// With copy-on-write and a change data feed, a table file holding
// replaced rows is read whole once: its rewrite keeps them as the change
// data's pre-images and deletes (besides the read of its key column).
func TestCopyOnWriteChangeDataReadsOnce(t *testing.T) {
	u := newUpsertTableConf(t, true, map[string]string{"delta.enableChangeDataFeed": "true"})
	u.epoch(change{1, "a", 1}, change{2, "b", 2}, change{3, "c", 3})
	old := u.snap.Files()[0].Path
	counter := &openCounter{Store: u.store, opens: map[string]int{}}
	u.store = counter
	res := u.epoch(change{1, "a2", 4}, change{2, "", 5})
	if n := counter.opens[old]; n != 2 {
		t.Errorf("%s opened %d times in the epoch, want 2 (its key column, then its rows)", old, n)
	}
	want := []changeRow{{1, "a", "update_preimage", -1}, {1, "a2", "update_postimage", -1}, {2, "b", "delete", -1}}
	if got := u.changeRows(res); !slices.Equal(got, want) {
		t.Errorf("change data %v, want %v", got, want)
	}
	u.check(map[int64]string{1: "a2", 3: "c"})
}
