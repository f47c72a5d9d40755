package upsert

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/storage"
)

// Result is an epoch's changes resolved against the table: the actions
// that make them the table's state, and what they did.
type Result struct {
	// Actions add the new files (without their rows that a later change
	// of the same key superseded: a deletion vector, or a rewrite; none
	// for a file whose every row was), and remove each table file some of
	// whose rows the epoch replaced or deleted, adding it back with its
	// new deletion vector, or its rewrite (nothing when no row is left).
	Actions []delta.Action
	// Rows is the number of rows the epoch adds to the table (its winning
	// upserts); Superseded the epoch's rows a later change of their key
	// replaced within it; Stale the changes (rows and deletes) older than
	// their key's row in the table or its remembered delete, ignored;
	// Replaced the table's rows the epoch marked deleted (updated or
	// deleted keys); FilesRead the table files whose key columns were
	// read; FilesSkipped those the key index left out (their filters hold
	// none of the epoch's keys); ChangeFiles the change data files written
	// (cdc actions).
	Rows, Superseded, Stale, Replaced    int64
	FilesRead, FilesSkipped, ChangeFiles int
	// Index is what the commit changes in the table's key index, to apply
	// once it has landed.
	Index IndexUpdate
}

// winner is a key's latest change in an epoch: row of new file file, or a
// delete (file < 0); stale when the table holds a newer state of the key.
type winner struct {
	seq, off  int64
	file, row int32 // 32 bits: a map of an epoch's keys holds one each
	stale     bool
	inTable   bool // the table holds a row of the key (read with a Sequence)
	replaced  bool // a row of the key in the table is replaced (read with a change data feed)
}

// after reports whether change w comes after o: a higher sequence, or an
// equal one and a later record.
func (w winner) after(o winner) bool {
	return w.seq > o.seq || w.seq == o.seq && w.off >= o.off
}

// Table is an upsert table's settings: its keys, how changes are ordered,
// and how its rows are deleted.
type Table struct {
	Keys *Keys
	// Sequence, if set, orders the changes of a key (else the Kafka offset
	// does: a key's records share a partition, and the table's rows are
	// older than any change read after them). Deleted, with Sequence,
	// remembers deleted keys.
	Sequence *Sequence
	Deleted  DeletedKeys
	// CopyOnWrite rewrites a file without its deleted rows (a new file
	// written with Writer) instead of giving it a deletion vector: for
	// readers that have none (polars' scan_delta, Presto).
	CopyOnWrite bool
	Writer      delta.WriterOptions
	// Index, if set, is the table's key index: the files whose key columns
	// are read are the candidates it cannot rule out.
	Index *KeyIndex
}

// Resolve turns an epoch's changes into the actions of its commit after
// snap: for every key changed, its latest change wins and every other row
// of the key, in the epoch's files and in the table, is deleted: marked in
// a deletion vector (written to store), or with CopyOnWrite left out of a
// rewrite of its file. Table files are pruned by the first key column's
// statistics, and by the key Index when there is one, and only their key
// columns (and sequence column) are read.
// With a Sequence, a key whose row in the table, or whose remembered
// delete, is newer than the epoch's latest change keeps its state (the
// change is stale), and the deletes that win are remembered before the
// commit (a commit that fails is re-read, and deletes its keys again).
// A table with a change data feed gets the change data files of a commit
// that replaces or deletes rows of the table, or adds a file with a
// deletion vector (changeData).
func (t *Table) Resolve(ctx context.Context, store storage.Store, snap *delta.Snapshot, ch Changes, now time.Time) (Result, error) {
	res := Result{Index: IndexUpdate{index: t.Index}}
	if t.CopyOnWrite && snap.ColumnMappingMode() != "none" {
		return res, fmt.Errorf("copy-on-write upserts into a table with column mapping (%s) are not supported", snap.ColumnMappingMode())
	}
	n := ch.Deletes.Len()
	for _, f := range ch.Files {
		n += f.Rows.Len()
	}
	wins := make(map[string]winner, n) // sized once: most changes are of distinct keys
	take := func(key []byte, w winner) {
		if old, ok := wins[string(key)]; !ok || w.after(old) {
			wins[string(key)] = w
		}
	}
	for i, f := range ch.Files {
		for j := range f.Rows.Len() {
			key, seq, off := f.Rows.At(j)
			take(key, winner{seq: seq, off: off, file: int32(i), row: int32(j)})
		}
	}
	for j := range ch.Deletes.Len() {
		key, seq, off := ch.Deletes.At(j)
		take(key, winner{seq: seq, off: off, file: -1, row: int32(j)})
	}
	if len(wins) == 0 {
		return res, nil
	}
	cdf := slices.Contains(snap.ActiveFeatures(), "changeDataFeed")
	old, err := t.replacedRows(ctx, store, snap, wins, cdf, &res)
	if err != nil {
		return res, err
	}
	if t.Sequence != nil && t.Deleted != nil {
		if err := t.deletedKeys(ctx, wins); err != nil {
			return res, err
		}
	}
	kept := make([]bool, len(ch.Files)) // whether a row of the file wins
	// An epoch file added with a deletion vector needs change data even in
	// a commit of inserts: delta-rs's load_cdf reads such an add's deleted
	// rows instead of its live ones.
	dvAdded := false
	for i, f := range ch.Files {
		var superseded []uint64
		for j := range f.Rows.Len() {
			key, _, _ := f.Rows.At(j)
			switch w := wins[string(key)]; {
			case w.stale:
				res.Stale++
			case int(w.file) == i && int(w.row) == j:
				continue
			default:
				res.Superseded++
			}
			superseded = append(superseded, uint64(j))
		}
		res.Rows += int64(f.Rows.Len() - len(superseded))
		kept[i] = len(superseded) < f.Rows.Len()
		dvAdded = dvAdded || !t.CopyOnWrite && len(superseded) > 0 && kept[i]
		acts := []delta.Action{{Add: f.Add}}
		switch {
		case len(superseded) == f.Rows.Len(): // left out: VACUUM deletes it
			continue
		case len(superseded) > 0:
			var err error
			if acts, err = t.without(ctx, store, snap, f.Add, superseded, false, now, nil); err != nil {
				return res, err
			}
		}
		res.Actions = append(res.Actions, acts...)
		res.Index.addNew(f, acts)
	}
	for j := range ch.Deletes.Len() {
		if key, _, _ := ch.Deletes.At(j); wins[string(key)].stale {
			res.Stale++
		}
	}
	for i := range old {
		o := &old[i]
		res.Replaced += int64(len(o.rows))
		// A rewrite reads the file's rows whole: it keeps the replaced
		// ones for the change data, which need not read them again.
		var images *[]delta.Row
		if cdf && t.CopyOnWrite {
			images = &o.images
		}
		acts, err := t.without(ctx, store, snap, o.add, o.rows, true, now, images)
		if err != nil {
			return res, err
		}
		res.Actions = append(res.Actions, acts...)
		res.Index.track(o.add, acts)
	}
	if cdf && (len(old) > 0 || dvAdded) {
		cdc, err := t.changeData(ctx, store, snap, ch, wins, kept, old)
		if err != nil {
			return res, err
		}
		res.Actions, res.ChangeFiles = append(res.Actions, cdc...), len(cdc)
	}
	return res, nil
}

// oldRows are the rows of a table file that the epoch replaces, and with
// a change data feed what each becomes: a delete, or an update's
// pre-image; and the rows themselves when a copy-on-write rewrite read
// them (else the change data reads them from the file).
type oldRows struct {
	add    *delta.Add
	rows   []uint64
	kinds  []delta.ChangeType
	images []delta.Row
}

// replacedRows finds the live rows of the table whose key the epoch
// changed, file by file. With a sequence column, a row newer than its
// key's winning change stays, and marks the change stale in wins (a key
// has one row, so no row of it was taken before; if another writer left
// several, the newest stays). With cdf, the winners of the keys whose rows
// are replaced say so, and each row's change type is kept. With a key
// index, a file whose filter holds none of the keys is not read, and a
// file read that it does not know yet gets its filter.
func (t *Table) replacedRows(ctx context.Context, store storage.Store, snap *delta.Snapshot, wins map[string]winner, cdf bool,
	res *Result) ([]oldRows, error) {
	schema, err := snap.Schema()
	if err != nil {
		return nil, err
	}
	keys := t.Keys
	cols, nkeys := keys.Names(), len(keys.Names())
	if t.Sequence != nil {
		cols = append(slices.Clone(cols), t.Sequence.Name())
	}
	bounds := newFirstKeys(wins)
	pruneByName := snap.ColumnMappingMode() == "none"
	idx := t.Index
	var hashes []uint64 // of the epoch's keys, for the index's filters
	if idx != nil {
		idx.begin()
		hashes = make([]uint64, 0, len(wins))
		for key := range wins {
			hashes = append(hashes, maphash.String(indexSeed, key))
		}
	}
	var out []oldRows
	var buf []byte
	for _, add := range snap.Files() {
		var known, fill bloom // the file's filter; the one its read makes
		if idx != nil {
			known = idx.filter(add.Path) // before pruning: it marks the file live
		}
		if pruneByName && !bounds.mayHold(add.Stats, cols[0]) {
			continue
		}
		if known != nil && !known.mayHoldAny(hashes) {
			res.FilesSkipped++
			continue
		}
		if idx != nil && known == nil {
			fill = idx.newFilter(add)
		}
		res.FilesRead++
		o := oldRows{add: add}
		for r, err := range delta.DataFileColumns(ctx, store, schema, cols, add) {
			if err != nil {
				return nil, fmt.Errorf("read the keys of %s: %w", add.Path, err)
			}
			if buf, err = keys.AppendColumns(buf[:0], r.Values[:nkeys]); err != nil {
				return nil, fmt.Errorf("%s row %d: %w", add.Path, r.Index, err)
			}
			if fill != nil {
				fill.add(keyHash(buf))
			}
			w, changed := wins[string(buf)]
			if !changed {
				continue
			}
			if t.Sequence != nil {
				// A null sequence (a row written before the column was) is
				// older than any change.
				seq, ok := sequenceValue(r.Values[nkeys])
				w.inTable, w.stale = true, w.stale || ok && seq > w.seq
				wins[string(buf)] = w
				if w.stale {
					continue
				}
			}
			o.rows = append(o.rows, r.Index)
			if cdf {
				kind := delta.ChangeUpdatePreimage
				if w.file < 0 {
					kind = delta.ChangeDelete
				}
				o.kinds = append(o.kinds, kind)
				if !w.replaced {
					w.replaced = true
					wins[string(buf)] = w
				}
			}
		}
		if fill != nil {
			idx.put(add.Path, fill)
		}
		if len(o.rows) > 0 {
			out = append(out, o)
		}
	}
	if idx != nil {
		idx.end()
	}
	return out, nil
}

// deletedKeys settles the epoch's changes against the keys' remembered
// deletes: a change of a key the table holds no row of is stale when the
// key was deleted with a higher sequence; then the winning deletes are
// remembered.
func (t *Table) deletedKeys(ctx context.Context, wins map[string]winner) error {
	var ask []string
	for key, w := range wins {
		if !w.stale && !w.inTable {
			ask = append(ask, key)
		}
	}
	if len(ask) > 0 {
		seqs, err := t.Deleted.Sequences(ctx, ask)
		if err != nil {
			return fmt.Errorf("deleted keys: %w", err)
		}
		for key, deleted := range seqs {
			// Not at an equal sequence: an epoch re-read after a failed
			// commit finds its own deletes remembered.
			if w := wins[key]; deleted > w.seq {
				w.stale = true
				wins[key] = w
			}
		}
	}
	deletes := map[string]int64{}
	for key, w := range wins {
		if w.file < 0 && !w.stale {
			deletes[key] = w.seq
		}
	}
	if len(deletes) > 0 {
		if err := t.Deleted.Remember(ctx, deletes); err != nil {
			return fmt.Errorf("remember deleted keys: %w", err)
		}
	}
	return nil
}

// without is the actions that leave rows out of file add: a live file of
// the table is removed, and added back with a deletion vector holding
// rows too, or rewritten without them (CopyOnWrite, the rows left out
// appended to images unless nil); an epoch's new file is added so.
// Nothing is added when no row is left.
func (t *Table) without(ctx context.Context, store storage.Store, snap *delta.Snapshot, add *delta.Add, rows []uint64, live bool,
	now time.Time, images *[]delta.Row) ([]delta.Action, error) {
	var acts []delta.Action
	if live {
		acts = append(acts, delta.Action{Remove: add.Remove(now)})
	}
	var next *delta.Add
	var err error
	if t.CopyOnWrite {
		next, err = t.rewrite(ctx, store, snap, add, rows, images)
	} else {
		next, err = withDeletionVector(ctx, store, add, rows, now)
	}
	if err != nil || next == nil {
		return acts, err
	}
	return append(acts, delta.Action{Add: next}), nil
}

// withDeletionVector is add with a deletion vector of its own deleted rows
// plus rows, nil when that is every row of the file.
func withDeletionVector(ctx context.Context, store storage.Store, add *delta.Add, rows []uint64, now time.Time) (*delta.Add, error) {
	dv, err := deletions(ctx, store, add, rows)
	if err != nil || dv == nil {
		return nil, err
	}
	_, next, err := add.WithDeletionVector(dv, now)
	return next, err
}

// rewrite writes add's live rows but rows as a new file of its partition,
// nil when none is left; the rows left out are appended to images, unless
// nil, in the file's order.
func (t *Table) rewrite(ctx context.Context, store storage.Store, snap *delta.Snapshot, add *delta.Add, rows []uint64,
	images *[]delta.Row) (*delta.Add, error) {
	schema, err := snap.Schema()
	if err != nil {
		return nil, err
	}
	gone := delta.NewRowIndexSet(rows)
	var keep []delta.Row
	for r, err := range delta.DataFileIndexedRows(ctx, store, schema, snap.PartitionColumns(), add) {
		if err != nil {
			return nil, fmt.Errorf("rewrite %s: %w", add.Path, err)
		}
		switch {
		case !gone.Contains(r.Index):
			keep = append(keep, r.Row)
		case images != nil:
			*images = append(*images, r.Row)
		}
	}
	if len(keep) == 0 {
		return nil, nil
	}
	next, err := delta.WriteDataFile(ctx, store, schema, snap.PartitionColumns(), add.PartitionValues, keep, t.Writer)
	if err != nil {
		return nil, fmt.Errorf("rewrite %s: %w", add.Path, err)
	}
	return next, nil
}

// deletions writes the deletion vector of add's own deleted rows plus
// rows, or returns nil when that is every row of the file.
func deletions(ctx context.Context, store storage.Store, add *delta.Add, rows []uint64) (*delta.DeletionVector, error) {
	set, err := delta.LoadDeletionVector(ctx, store, add.DeletionVector)
	if err != nil {
		return nil, fmt.Errorf("deletion vector of %s: %w", add.Path, err)
	}
	set = set.Union(delta.NewRowIndexSet(rows))
	if st, err := delta.ParseStats(add.Stats); err == nil && st.NumRecords >= 0 && set.Cardinality() >= st.NumRecords {
		return nil, nil
	}
	dv, err := delta.WriteDeletionVector(ctx, store, set)
	if err != nil {
		return nil, fmt.Errorf("deletion vector of %s: %w", add.Path, err)
	}
	return dv, nil
}

// firstKeys are the first key column's values of an epoch's keys, sorted,
// to prune the table's files by their statistics.
type firstKeys struct {
	longs   []int64
	strings []string
}

func newFirstKeys(wins map[string]winner) firstKeys {
	var fk firstKeys
	for key := range wins {
		switch key[0] {
		case 'l':
			fk.longs = append(fk.longs, int64(binary.BigEndian.Uint64([]byte(key[1:9]))))
		case 's':
			n, w := binary.Uvarint([]byte(key[1:]))
			fk.strings = append(fk.strings, key[1+w:1+w+int(n)])
		}
	}
	slices.Sort(fk.longs)
	slices.Sort(fk.strings)
	return fk
}

// statsTruncation is the length in characters past which a writer may
// have cut a string statistic (Spark and delta-rs cut at 32): such a
// maximum is no bound.
const statsTruncation = 32

// mayHold reports whether a file with stats may hold a row whose first key
// column, col, has one of the values: false only when its statistics
// exclude every value.
func (fk firstKeys) mayHold(stats, col string) bool {
	st, err := delta.ParseStats(stats)
	if err != nil || stats == "" {
		return true
	}
	lo, hasLo := st.MinValues[col]
	hi, hasHi := st.MaxValues[col]
	if len(fk.longs) > 0 {
		l, okL := asLong(lo, hasLo)
		h, okH := asLong(hi, hasHi)
		if !okL || !okH {
			return true
		}
		i, _ := slices.BinarySearch(fk.longs, l)
		return i < len(fk.longs) && fk.longs[i] <= h
	}
	l, okL := lo.(string)
	h, okH := hi.(string)
	if !okL || !hasLo {
		return true
	}
	i, _ := slices.BinarySearch(fk.strings, l)
	if i == len(fk.strings) {
		return false
	}
	if !okH || utf8.RuneCountInString(h) >= statsTruncation {
		return true
	}
	return strings.Compare(fk.strings[i], h) <= 0
}

func asLong(v any, ok bool) (int64, bool) {
	n, isNum := v.(json.Number)
	if !ok || !isNum {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}
