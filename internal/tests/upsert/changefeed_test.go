package upsert

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/storage"
)

// changeRow is a row of a table's change data feed.
type changeRow struct {
	Version int64
	ID      int64
	Type    string
	Account account
}

func compareChangeRows(a, b changeRow) int {
	return cmp.Or(cmp.Compare(a.Version, b.Version), cmp.Compare(a.ID, b.ID), cmp.Compare(a.Type, b.Type),
		cmp.Compare(a.Account.Name, b.Account.Name), cmp.Compare(a.Account.Balance, b.Account.Balance))
}

// changeRows are a feed's rows as Spark and deltars.py render them,
// sorted.
func changeRows(t *testing.T, rows []map[string]any) []changeRow {
	t.Helper()
	out := make([]changeRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, changeRow{Version: int64(r["_commit_version"].(float64)), ID: int64(r["id"].(float64)),
			Type: r["_change_type"].(string), Account: account{Name: r["name"].(string), Balance: int64(r["balance"].(float64))}})
	}
	slices.SortFunc(out, compareChangeRows)
	return out
}

// mergeChange is a change of Spark's MERGE (upsert_check.py --merge).
type mergeChange struct {
	ID      int64  `json:"id"`
	Name    string `json:"name"`
	Balance int64  `json:"balance"`
	Delete  bool   `json:"delete"`
}

// feed computes the change data feed a table must have: each of
// deltaflow's epochs, from the records its txns say it consumed, collapsed
// to each key's last change; Spark's MERGE from its changes; as Spark's
// MERGE reports changes: a key's update is its old row's update_preimage
// and its new row's update_postimage, a new key's row an insert, a deleted
// key's row a delete.
type feed struct {
	r      *rig
	state  map[int64]account
	offset map[int32]int64 // the last offset each partition's commits took
	next   int64           // the next version to account for
}

// enableChangeDataFeed turns the table's change data feed on (the
// property and the writer feature, as Spark's ALTER TABLE ... SET
// TBLPROPERTIES commits them) and returns the feed from the next version.
func (r *rig) enableChangeDataFeed() *feed {
	r.t.Helper()
	local, err := storage.NewLocal(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	tbl := delta.NewTable(local)
	s, err := tbl.Snapshot(r.t.Context())
	if err != nil {
		r.t.Fatal(err)
	}
	p := s.Protocol()
	p.WriterFeatures = append(slices.Clone(p.WriterFeatures), "changeDataFeed")
	meta := s.Metadata().WithProperty("delta.enableChangeDataFeed", "true")
	v, err := tbl.Commit(r.t.Context(), s, []delta.Action{{Protocol: &p}, {MetaData: meta}}, delta.Operation{Name: "SET TBLPROPERTIES"})
	if err != nil {
		r.t.Fatal(err)
	}
	return &feed{r: r, state: maps.Clone(r.want), offset: r.tableLog().offsets(r.topic), next: v + 1}
}

// columnMapped is a second table of r's topic, read by a group of its
// own: made before deltaflow's first run with column mapping (physical
// names col-<uuid>, column ids), deletion vectors and its change data
// feed on, as Spark's CREATE TABLE ... TBLPROPERTIES makes one; and the
// feed it must have from its first version.
func (r *rig) columnMapped() (*rig, *feed) {
	r.t.Helper()
	m := *r
	m.dir, m.group, m.commits = filepath.Join(r.t.TempDir(), "accounts_mapped"), scenario.Unique("accounts-mapped-group"), nil
	table := &delta.StructType{Fields: []delta.StructField{{Name: "id", Type: delta.Long, Nullable: true},
		{Name: "name", Type: delta.String, Nullable: true}, {Name: "balance", Type: delta.Long, Nullable: true}}}
	mapped, conf, err := delta.AssignColumnMapping(table, map[string]string{"delta.columnMapping.mode": "name",
		"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true"})
	if err != nil {
		r.t.Fatal(err)
	}
	local, err := storage.NewLocal(m.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := delta.NewTable(local).Create(r.t.Context(), mapped, nil, conf); err != nil {
		r.t.Fatal(err)
	}
	return &m, &feed{r: &m, state: map[int64]account{}, offset: map[int32]int64{}, next: 1}
}

// advance returns the feed of the table's commits after the last it
// accounted for; merge is what a MERGE of Spark's among them merged.
func (f *feed) advance(merge []mergeChange) []changeRow {
	f.r.t.Helper()
	var out []changeRow
	for _, c := range f.r.tableLog() {
		if c.version < f.next {
			continue
		}
		f.next = c.version + 1
		switch {
		case c.fromDeltaflow():
			out = append(out, f.epoch(c)...)
		case c.fromSpark() && c.operation == "MERGE":
			for _, m := range merge {
				var to *account
				if !m.Delete {
					to = &account{Name: m.Name, Balance: m.Balance}
				}
				out = append(out, f.change(c.version, m.ID, to)...)
			}
		}
	}
	return out
}

// epoch is the feed of deltaflow's commit c: the records its txns took,
// each key's last.
func (f *feed) epoch(c logCommit) []changeRow {
	last := map[int64]*account{}
	for id, v := range c.txns {
		rest, ok := strings.CutPrefix(id, "deltaflow-"+f.r.topic+"-")
		p, err := strconv.ParseInt(rest, 10, 32)
		if !ok || err != nil {
			continue
		}
		from, seen := f.offset[int32(p)]
		if !seen {
			from = -1
		}
		for _, kc := range f.r.produced[int32(p)][from+1 : v+1] {
			last[kc.id] = kc.to
		}
		f.offset[int32(p)] = v
	}
	var out []changeRow
	for id, to := range last {
		out = append(out, f.change(c.version, id, to)...)
	}
	return out
}

// change is the feed of key id becoming to (nil: deleted) at version v.
func (f *feed) change(v, id int64, to *account) []changeRow {
	old, had := f.state[id]
	switch {
	case to == nil && had:
		delete(f.state, id)
		return []changeRow{{v, id, "delete", old}}
	case to == nil:
		return nil
	case had:
		f.state[id] = *to
		return []changeRow{{v, id, "update_preimage", old}, {v, id, "update_postimage", *to}}
	}
	f.state[id] = *to
	return []changeRow{{v, id, "insert", *to}}
}

// checkFeed compares a reader's feed with the one the table must have.
func checkFeed(t *testing.T, reader string, got, want []changeRow) {
	t.Helper()
	slices.SortFunc(want, compareChangeRows)
	if len(got) == 0 {
		t.Errorf("%s reads no change", reader)
		return
	}
	if slices.Equal(got, want) {
		kinds := map[string]int{}
		for _, c := range got {
			kinds[c.Type]++
		}
		t.Logf("%s reads the %d changes of versions %d to %d: %v", reader, len(got), got[0].Version, got[len(got)-1].Version, kinds)
		return
	}
	var diff []string
	for _, c := range want {
		if !slices.Contains(got, c) && len(diff) < 10 {
			diff = append(diff, fmt.Sprintf("missing %+v", c))
		}
	}
	for _, c := range got {
		if !slices.Contains(want, c) && len(diff) < 20 {
			diff = append(diff, fmt.Sprintf("extra %+v", c))
		}
	}
	t.Errorf("%s reads %d changes, want %d: %v", reader, len(got), len(want), diff)
}

// checkChangeFiles compares deltaflow's change data files with those of
// Spark's MERGE in the table's log: the same action fields (dataChange
// false, {} partition values), the files under _change_data, holding
// the data columns then _change_type, of the same types.
func (r *rig) checkChangeFiles() {
	r.t.Helper()
	var ours, spark json.RawMessage
	for _, c := range r.tableLog() {
		if len(c.cdcs) > 0 && c.fromDeltaflow() {
			ours = c.cdcs[0]
		} else if len(c.cdcs) > 0 && c.fromSpark() {
			spark = c.cdcs[0]
		}
	}
	if ours == nil || spark == nil {
		r.t.Fatalf("want change data files of deltaflow's and of Spark's: %s, %s", ours, spark)
	}
	shape := func(raw json.RawMessage) (fields string, columns []string) {
		var a map[string]any
		if err := json.Unmarshal(raw, &a); err != nil {
			r.t.Fatal(err)
		}
		for _, k := range slices.Sorted(maps.Keys(a)) {
			if k != "path" && k != "size" {
				fields += fmt.Sprintf("%s=%v ", k, a[k])
			}
		}
		path := a["path"].(string)
		if !strings.HasPrefix(path, "_change_data/cdc-") {
			r.t.Errorf("change data file %s is not under _change_data", path)
		}
		f, err := os.Open(filepath.Join(r.dir, path))
		if err != nil {
			r.t.Fatal(err)
		}
		defer f.Close()
		info, _ := f.Stat()
		if size := int64(a["size"].(float64)); info.Size() != size {
			r.t.Errorf("%s has %d bytes, its action says %d", path, info.Size(), size)
		}
		pf, err := parquet.OpenFile(f, info.Size())
		if err != nil {
			r.t.Fatal(err)
		}
		for _, col := range pf.Schema().Fields() {
			columns = append(columns, fmt.Sprintf("%s %v %v", col.Name(), col.Type().Kind(), col.Type().LogicalType()))
		}
		return fields, columns
	}
	of, oc := shape(ours)
	sf, sc := shape(spark)
	if of != sf || !slices.Equal(oc, sc) {
		r.t.Errorf("deltaflow's cdc action %s, file columns %v; Spark's %s, %v", ours, oc, spark, sc)
	}
}
