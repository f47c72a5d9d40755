package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta/internal/pqguard"
	"github.com/deltaflow/deltaflow/storage"
)

// ReadCheckpoint reads a checkpoint, single-file, multi-part (keys lists
// every part, in order) or V2 (JSON or Parquet, with the sidecar files it
// names, see checkpoint_v2.go), and calls fn for each action in it; rows
// holding no action this package knows (cdc, commitInfo, ...) are skipped.
// fn may keep the *Action.
//
// Columns are found by path in each file's own schema, so any writer's
// subset of fields, field order, map/list naming (key_value or entries,
// 2- or 3-level lists) and INT32 or INT64 integers are accepted;
// stats_parsed and partitionValues_parsed are ignored. Row groups are
// streamed page by page, never decoded whole.
//
// A missing file gives an error wrapping storage.ErrNotExist; a file that
// cannot be decoded gives *CorruptLogError, never fewer actions (fn may have
// seen some actions before the error). An error from fn is returned as is.
func ReadCheckpoint(ctx context.Context, store storage.Store, keys []string, fn func(*Action) error) error {
	for _, key := range keys {
		if err := readCheckpointPart(ctx, store, key, fn); err != nil {
			return err
		}
	}
	return nil
}

// callbackError marks an error returned by the caller's fn, so that it is
// passed through instead of being reported as corruption.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

func readCheckpointFile(ctx context.Context, store storage.Store, key string, fn func(*Action) error) (err error) {
	r, err := store.Open(ctx, key)
	if err != nil {
		return fmt.Errorf("read checkpoint %s: %w", key, err)
	}
	defer r.Close()

	inFn := false
	defer func() {
		// parquet-go panics on some malformed input; a panic in fn is a bug
		// of the caller and must not look like corruption.
		if p := recover(); p != nil {
			if inFn {
				panic(p)
			}
			err = &CorruptLogError{File: key, Err: fmt.Errorf("decode: %v", p)}
		}
	}()
	call := func(a *Action) error {
		inFn = true
		err := fn(a)
		inFn = false
		if err != nil {
			return callbackError{err}
		}
		return nil
	}

	err = decodeCheckpoint(ctx, r, call)
	var cb callbackError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &cb):
		return cb.err
	case ctx.Err() != nil:
		return fmt.Errorf("read checkpoint %s: %w", key, ctx.Err())
	default:
		return &CorruptLogError{File: key, Err: err}
	}
}

func decodeCheckpoint(ctx context.Context, r storage.Reader, fn func(*Action) error) error {
	// The footer and page headers are checked before parquet-go trusts
	// them (see internal/pqguard).
	if err := pqguard.CheckFooter(r, r.Size()); err != nil {
		return err
	}
	f, err := parquet.OpenFile(r, r.Size(),
		parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return err
	}
	var b binder
	decode := bindCheckpoint(&b, f.Root())
	if b.err != nil {
		return b.err
	}
	if err := pqguard.CheckPages(r, r.Size(), f.Metadata(), b.used); err != nil {
		return err
	}
	rowValues := make([][]parquet.Value, len(f.Schema().Columns()))
	var total int64
	for g, rg := range f.RowGroups() {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := decodeRowGroup(rg, &b, rowValues, decode, fn)
		total += n
		if err != nil {
			return fmt.Errorf("row group %d: %w", g, err)
		}
	}
	if total != f.NumRows() {
		return fmt.Errorf("read %d rows, footer says %d", total, f.NumRows())
	}
	return nil
}

func decodeRowGroup(rg parquet.RowGroup, b *binder, rv [][]parquet.Value,
	decode func([][]parquet.Value, func(*Action) error) error, fn func(*Action) error) (int64, error) {
	chunks, used := rg.ColumnChunks(), b.used
	cursors := make([]*columnCursor, len(used))
	for i, idx := range used {
		cursors[i] = &columnCursor{pages: chunks[idx].Pages(), buf: make([]parquet.Value, 0, 256),
			repeated: b.repeated[i]}
		defer cursors[i].pages.Close()
	}
	numRows := rg.NumRows()
	for row := range numRows {
		for i, c := range cursors {
			v, err := c.next()
			if err != nil {
				return row, fmt.Errorf("row %d: %w", row, err)
			}
			rv[used[i]] = v
		}
		if err := decode(rv, fn); err != nil {
			if _, ok := err.(callbackError); ok {
				return row, err
			}
			return row, fmt.Errorf("row %d: %w", row, err)
		}
	}
	for i, c := range cursors {
		if c.more() {
			return numRows, fmt.Errorf("column %d has values past row %d", used[i], numRows)
		}
	}
	return numRows, nil
}

// columnCursor streams the values of one column chunk a row at a time. Values
// keep pointing into page buffers, which stay valid because pages are never
// released back to parquet-go's pools.
type columnCursor struct {
	pages    parquet.Pages
	values   parquet.ValueReader // of the current page; nil before the next one
	buf      []parquet.Value
	pos      int
	row      []parquet.Value
	repeated bool // values of one row may span batches
}

// next returns the values of the next row: one value, or for a repeated
// column every value up to the next repetition level 0. The slice is valid
// until the next call.
func (c *columnCursor) next() ([]parquet.Value, error) {
	// Fast path: the whole row is in buf (always, for a non-repeated column
	// once buf is filled), so return a window of it without copying.
	if start := c.pos; start < len(c.buf) {
		end := start + 1
		for end < len(c.buf) && c.buf[end].RepetitionLevel() != 0 {
			end++
		}
		if end < len(c.buf) || !c.repeated {
			c.pos = end
			return c.buf[start:end:end], nil
		}
	}
	// The row may continue in the next page or batch: collect it in row.
	c.row = c.row[:0]
	for {
		for ; c.pos < len(c.buf); c.pos++ {
			v := c.buf[c.pos]
			if v.RepetitionLevel() == 0 && len(c.row) > 0 {
				return c.row, nil
			}
			c.row = append(c.row, v)
		}
		switch err := c.fill(); {
		case err == io.EOF && len(c.row) > 0:
			return c.row, nil
		case err == io.EOF:
			return nil, errors.New("column ends before its row group")
		case err != nil:
			return nil, err
		}
	}
}

// more reports whether values are left after the last row.
func (c *columnCursor) more() bool {
	return c.pos < len(c.buf) || c.fill() == nil
}

// fill reads the next values into buf; io.EOF at the end of the chunk.
func (c *columnCursor) fill() error {
	for {
		if c.values == nil {
			p, err := c.pages.ReadPage()
			if err != nil {
				return err
			}
			c.values = p.Values()
		}
		n, err := c.values.ReadValues(c.buf[:cap(c.buf)])
		c.buf, c.pos = c.buf[:n], 0
		if err == io.EOF {
			c.values = nil
		} else if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
	}
}

// Bound columns. A column missing from the file has idx -1 and reads as null.
type (
	// ckLeaf is a primitive column; a row's value is non-null at maxDef.
	ckLeaf struct {
		idx, maxDef int
		kind        parquet.Kind
	}
	// ckGroup tells whether a struct is non-null, from any leaf below it.
	ckGroup struct{ idx, def int }
	// ckMap is a MAP<string,string>: null below def, empty below entryDef.
	ckMap struct {
		key, value    ckLeaf
		def, entryDef int
	}
	// ckList is a LIST<string>: null below def, empty below entryDef.
	ckList struct {
		elem          ckLeaf
		def, entryDef int
	}
)

// binder looks columns up in a file schema and records which leaves are used.
type binder struct {
	used     []int  // leaf column indexes
	repeated []bool // of each used column
	seen     map[int]bool
	err      error
}

func (b *binder) use(c *parquet.Column) int {
	idx := c.Index()
	if b.seen == nil {
		b.seen = map[int]bool{}
	}
	if !b.seen[idx] {
		b.seen[idx] = true
		b.used = append(b.used, idx)
		b.repeated = append(b.repeated, c.MaxRepetitionLevel() > 0)
	}
	return idx
}

func (b *binder) fail(c *parquet.Column, format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("column %v: %s", c.Path(), fmt.Sprintf(format, args...))
	}
}

func child(parent *parquet.Column, name string) *parquet.Column {
	if parent == nil {
		return nil
	}
	return parent.Column(name)
}

const (
	kindString = 1 << iota
	kindInt
	kindBool
)

func (b *binder) leafCol(c *parquet.Column, kinds int) ckLeaf {
	if c == nil {
		return ckLeaf{idx: -1}
	}
	if !c.Leaf() || c.Repeated() {
		b.fail(c, "not a primitive field")
		return ckLeaf{idx: -1}
	}
	k := c.Type().Kind()
	ok := k == parquet.ByteArray && kinds&kindString != 0 ||
		(k == parquet.Int32 || k == parquet.Int64) && kinds&kindInt != 0 ||
		k == parquet.Boolean && kinds&kindBool != 0
	if !ok {
		b.fail(c, "unexpected type %v", c.Type())
		return ckLeaf{idx: -1}
	}
	return ckLeaf{idx: b.use(c), maxDef: c.MaxDefinitionLevel(), kind: k}
}

func (b *binder) leaf(parent *parquet.Column, name string, kinds int) ckLeaf {
	return b.leafCol(child(parent, name), kinds)
}

func (b *binder) group(c *parquet.Column) ckGroup {
	if c == nil {
		return ckGroup{idx: -1}
	}
	if c.Leaf() || c.Repeated() {
		b.fail(c, "not a struct")
		return ckGroup{idx: -1}
	}
	first := c
	for !first.Leaf() {
		if len(first.Columns()) == 0 {
			return ckGroup{idx: -1} // an empty struct carries no data
		}
		first = first.Columns()[0]
	}
	return ckGroup{idx: b.use(first), def: c.MaxDefinitionLevel()}
}

// mapOf binds a MAP by position (the repeated group's first two fields are
// key and value), since writers name the group key_value, entries or map.
func (b *binder) mapOf(parent *parquet.Column, name string) ckMap {
	c := child(parent, name)
	if c == nil {
		return ckMap{key: ckLeaf{idx: -1}, value: ckLeaf{idx: -1}}
	}
	if c.Leaf() || len(c.Columns()) != 1 || !c.Columns()[0].Repeated() || len(c.Columns()[0].Columns()) != 2 {
		b.fail(c, "not a map")
		return ckMap{key: ckLeaf{idx: -1}, value: ckLeaf{idx: -1}}
	}
	kv := c.Columns()[0]
	return ckMap{
		key:      b.leafCol(kv.Columns()[0], kindString),
		value:    b.leafCol(kv.Columns()[1], kindString),
		def:      c.MaxDefinitionLevel(),
		entryDef: kv.MaxDefinitionLevel(),
	}
}

// listOf binds a LIST of strings, 3-level (list.element, list.item, ...)
// or legacy 2-level (a repeated primitive).
func (b *binder) listOf(parent *parquet.Column, name string) ckList {
	c := child(parent, name)
	if c == nil {
		return ckList{elem: ckLeaf{idx: -1}}
	}
	if c.Leaf() || len(c.Columns()) != 1 || !c.Columns()[0].Repeated() {
		b.fail(c, "not a list")
		return ckList{elem: ckLeaf{idx: -1}}
	}
	rep := c.Columns()[0]
	elem := rep
	if !rep.Leaf() {
		if len(rep.Columns()) != 1 {
			b.fail(c, "not a list")
			return ckList{elem: ckLeaf{idx: -1}}
		}
		elem = rep.Columns()[0]
	}
	l := ckList{def: c.MaxDefinitionLevel(), entryDef: rep.MaxDefinitionLevel()}
	if elem == rep { // 2-level: the element itself is repeated
		if elem.Type().Kind() != parquet.ByteArray {
			b.fail(elem, "unexpected type %v", elem.Type())
			return ckList{elem: ckLeaf{idx: -1}}
		}
		l.elem = ckLeaf{idx: b.use(elem), maxDef: elem.MaxDefinitionLevel(), kind: parquet.ByteArray}
	} else {
		l.elem = b.leafCol(elem, kindString)
	}
	return l
}

// Accessors of one row; rv holds the row's values by column index.

func (g ckGroup) present(rv [][]parquet.Value) bool {
	return g.idx >= 0 && rv[g.idx][0].DefinitionLevel() >= g.def
}

func (l ckLeaf) get(rv [][]parquet.Value) (parquet.Value, bool) {
	if l.idx < 0 {
		return parquet.Value{}, false
	}
	v := rv[l.idx][0]
	return v, v.DefinitionLevel() == l.maxDef
}

func (l ckLeaf) str(rv [][]parquet.Value) string {
	v, ok := l.get(rv)
	if !ok {
		return ""
	}
	return string(v.ByteArray())
}

func (l ckLeaf) strPtr(rv [][]parquet.Value) *string {
	v, ok := l.get(rv)
	if !ok {
		return nil
	}
	s := string(v.ByteArray())
	return &s
}

func intOf(v parquet.Value) int64 {
	if v.Kind() == parquet.Int32 {
		return int64(v.Int32())
	}
	return v.Int64()
}

func (l ckLeaf) i64(rv [][]parquet.Value) int64 {
	v, ok := l.get(rv)
	if !ok {
		return 0
	}
	return intOf(v)
}

func (l ckLeaf) i64Ptr(rv [][]parquet.Value) *int64 {
	v, ok := l.get(rv)
	if !ok {
		return nil
	}
	n := intOf(v)
	return &n
}

func (l ckLeaf) i32Ptr(rv [][]parquet.Value) (*int32, error) {
	v, ok := l.get(rv)
	if !ok {
		return nil, nil
	}
	n := intOf(v)
	if n < math.MinInt32 || n > math.MaxInt32 {
		return nil, fmt.Errorf("value %d out of int32 range", n)
	}
	i := int32(n)
	return &i, nil
}

func (l ckLeaf) i32(rv [][]parquet.Value) (int32, error) {
	p, err := l.i32Ptr(rv)
	if p == nil {
		return 0, err
	}
	return *p, err
}

func (l ckLeaf) boolean(rv [][]parquet.Value) bool {
	v, ok := l.get(rv)
	return ok && v.Boolean()
}

func (l ckLeaf) boolPtr(rv [][]parquet.Value) *bool {
	v, ok := l.get(rv)
	if !ok {
		return nil
	}
	b := v.Boolean()
	return &b
}

// entries returns the key and value values of a map in this row, nil when
// the map is null.
func (m ckMap) entries(rv [][]parquet.Value) (keys, values []parquet.Value, err error) {
	if m.key.idx < 0 {
		return nil, nil, nil
	}
	keys = rv[m.key.idx]
	if keys[0].DefinitionLevel() < m.def {
		return nil, nil, nil
	}
	if keys[0].DefinitionLevel() < m.entryDef {
		return []parquet.Value{}, nil, nil
	}
	if m.value.idx >= 0 {
		values = rv[m.value.idx]
		if len(values) != len(keys) {
			return nil, nil, fmt.Errorf("map has %d keys but %d values", len(keys), len(values))
		}
	}
	return keys, values, nil
}

// nullable reads a map whose null values stay nil (partitionValues).
func (m ckMap) nullable(rv [][]parquet.Value) (map[string]*string, error) {
	keys, values, err := m.entries(rv)
	if keys == nil {
		return nil, err
	}
	out := make(map[string]*string, len(keys))
	for i, k := range keys {
		var val *string
		if values != nil && values[i].DefinitionLevel() == m.value.maxDef {
			s := string(values[i].ByteArray())
			val = &s
		}
		out[string(k.ByteArray())] = val
	}
	return out, nil
}

// plain reads a map whose null values become "" (tags, configuration).
func (m ckMap) plain(rv [][]parquet.Value) (map[string]string, error) {
	keys, values, err := m.entries(rv)
	if keys == nil {
		return nil, err
	}
	out := make(map[string]string, len(keys))
	for i, k := range keys {
		var val string
		if values != nil && values[i].DefinitionLevel() == m.value.maxDef {
			val = string(values[i].ByteArray())
		}
		out[string(k.ByteArray())] = val
	}
	return out, nil
}

// strings reads a list, nil when it is null; null elements are dropped.
func (l ckList) strings(rv [][]parquet.Value) []string {
	if l.elem.idx < 0 {
		return nil
	}
	vals := rv[l.elem.idx]
	if vals[0].DefinitionLevel() < l.def {
		return nil
	}
	out := make([]string, 0, len(vals))
	if vals[0].DefinitionLevel() < l.entryDef {
		return out
	}
	for _, v := range vals {
		if v.DefinitionLevel() == l.elem.maxDef {
			out = append(out, string(v.ByteArray()))
		}
	}
	return out
}
