package upsert

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/storage"
)

// changeData writes the change data files of an epoch's commit that
// replaces or deletes rows of a table with a change data feed (old), or
// adds a file with a deletion vector, and returns their cdc actions.
// Readers of the feed take such a commit's changes from its change data
// files alone, so they hold every change, as Spark's MERGE writes them: a
// key's winning row is an insert, or the update_postimage of the table's
// row it replaces (its update_preimage); a winning delete is the delete of
// the key's row. Superseded and stale changes are none: a key changed
// several times in the epoch is one change. (A commit that only adds whole
// files writes none: readers take its adds as the inserts.) One file per
// partition, written one at a time, rows streamed from the table's and the
// epoch's files: memory holds one row group and one file's write buffer.
func (t *Table) changeData(ctx context.Context, store storage.Store, snap *delta.Snapshot, ch Changes, wins map[string]winner,
	kept []bool, old []oldRows) ([]delta.Action, error) {
	schema, err := snap.Schema()
	if err != nil {
		return nil, err
	}
	parts := snap.PartitionColumns()
	// The files of each partition: old ones by index into old, new ones by
	// index into ch.Files (as -1-i); by their partition values keyed by
	// column name (adds key them by physical name under column mapping).
	byPartition := map[string][]int{}
	values := map[string]map[string]*string{}
	group := func(add *delta.Add, i int) {
		pv := snap.PartitionValues(add)
		dir := delta.PartitionDir(parts, pv)
		byPartition[dir] = append(byPartition[dir], i)
		values[dir] = pv
	}
	for i := range old {
		group(old[i].add, i)
	}
	for i, f := range ch.Files {
		if kept[i] {
			group(f.Add, -1-i)
		}
	}
	var acts []delta.Action
	for _, dir := range slices.Sorted(maps.Keys(byPartition)) {
		w, err := delta.CreateChangeDataFile(ctx, store, schema, parts, values[dir], t.Writer)
		if err != nil {
			return nil, err
		}
		for _, i := range byPartition[dir] {
			if i >= 0 {
				err = oldChanges(ctx, store, schema, parts, old[i], w)
			} else {
				err = newChanges(ctx, store, schema, parts, ch.Files[-1-i], -1-i, wins, w)
			}
			if err != nil {
				w.Abort(err)
				return nil, err
			}
		}
		cdc, err := w.Close()
		if err != nil {
			return nil, err
		}
		acts = append(acts, delta.Action{Cdc: cdc})
	}
	return acts, nil
}

// oldChanges writes the replaced rows of a table file, whole, with their
// change types: those its rewrite kept, else read from the file.
func oldChanges(ctx context.Context, store storage.Store, schema *delta.StructType, parts []string, o oldRows, w *delta.ChangeDataWriter) error {
	if o.images != nil {
		if len(o.images) != len(o.rows) {
			return fmt.Errorf("change data of %s: %d of its %d replaced rows are gone", o.add.Path, len(o.rows)-len(o.images), len(o.rows))
		}
		for i, r := range o.images {
			if err := w.Write(r, o.kinds[i]); err != nil {
				return err
			}
		}
		return nil
	}
	next := 0 // o.rows ascend, as the file's rows were read
	for r, err := range delta.DataFileIndexedRows(ctx, store, schema, parts, o.add) {
		if err != nil {
			return fmt.Errorf("change data of %s: %w", o.add.Path, err)
		}
		if r.Index != o.rows[next] {
			continue
		}
		if err := w.Write(r.Row, o.kinds[next]); err != nil {
			return err
		}
		if next++; next == len(o.rows) {
			return nil
		}
	}
	return fmt.Errorf("change data of %s: %d of its %d replaced rows are gone", o.add.Path, len(o.rows)-next, len(o.rows))
}

// newChanges writes the winning rows of the epoch's file f (the i-th):
// update post-images of keys whose table rows they replace, else inserts.
func newChanges(ctx context.Context, store storage.Store, schema *delta.StructType, parts []string, f NewFile, i int,
	wins map[string]winner, w *delta.ChangeDataWriter) error {
	for r, err := range delta.DataFileIndexedRows(ctx, store, schema, parts, f.Add) {
		if err != nil {
			return fmt.Errorf("change data of %s: %w", f.Add.Path, err)
		}
		key, _, _ := f.Rows.At(int(r.Index))
		win := wins[string(key)]
		if win.stale || int(win.file) != i || uint64(win.row) != r.Index {
			continue
		}
		kind := delta.ChangeInsert
		if win.replaced {
			kind = delta.ChangeUpdatePostimage
		}
		if err := w.Write(r.Row, kind); err != nil {
			return err
		}
	}
	return nil
}
