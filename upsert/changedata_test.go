package upsert

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
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
