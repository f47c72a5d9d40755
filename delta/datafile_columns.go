package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta/internal/parquetfile"
	"github.com/deltaflow/deltaflow/storage"
)

// ColumnRow is a live row of a data file as DataFileColumns reads it: its
// physical index in the file (deleted rows count) and the values of the
// columns asked for, in that order. Values is reused for the next row.
type ColumnRow struct {
	Index  uint64
	Values []parquet.Value
}

// DataFileColumns reads only the columns cols (top-level primitive columns
// of schema, by logical name; physical names under column mapping) of
// add's data file, and yields each row its deletion vector leaves, one row
// group in memory at a time: what finding rows by key needs, without
// decoding the rest of the file. A column the file lacks reads null.
func DataFileColumns(ctx context.Context, store storage.Store, schema *StructType, cols []string, add *Add) iter.Seq2[ColumnRow, error] {
	return func(yield func(ColumnRow, error) bool) {
		df, err := openDataFile(ctx, store, add)
		if err != nil {
			yield(ColumnRow{}, err)
			return
		}
		defer df.close()
		fail := func(err error) { yield(ColumnRow{}, df.errorf(err)) }
		f, deleted := df.file, df.deleted
		leaves, err := leafColumns(f, schema, cols)
		if err != nil {
			fail(err)
			return
		}
		row := ColumnRow{Values: make([]parquet.Value, len(cols))}
		chunks := make([][]parquet.Value, len(cols))
		for _, rg := range f.RowGroups() {
			if err := ctx.Err(); err != nil {
				fail(err)
				return
			}
			n := int(rg.NumRows())
			for i, leaf := range leaves {
				if chunks[i], err = chunkValues(rg, leaf, n, chunks[i][:0]); err != nil {
					fail(fmt.Errorf("column %s: %w", cols[i], err))
					return
				}
			}
			for j := range n {
				index := row.Index
				row.Index++
				if deleted.Contains(index) {
					continue
				}
				for i := range chunks {
					row.Values[i] = chunks[i][j]
				}
				if !yield(ColumnRow{Index: index, Values: row.Values}, nil) {
					return
				}
			}
		}
	}
}

// leafColumns finds the leaf column of each of cols in f: -1 when f lacks
// it. A column that is not a top-level primitive is refused.
func leafColumns(f *parquet.File, schema *StructType, cols []string) ([]int, error) {
	leafOf := map[string]int{}
	leaf := 0
	for _, ff := range f.Schema().Fields() {
		if ff.Leaf() {
			leafOf[ff.Name()] = leaf
		}
		leaf += parquetfile.CountLeaves(ff)
	}
	out := make([]int, len(cols))
	for i, name := range cols {
		field := schema.Field(name)
		if field == nil {
			return nil, fmt.Errorf("no column %q in the table's schema", name)
		}
		// A decimal is one leaf too (INT32, INT64 or FIXED_LEN_BYTE_ARRAY).
		_, decimal := field.Type.(DecimalType)
		if _, ok := field.Type.(PrimitiveType); !decimal && (!ok || field.Type == Variant) {
			return nil, fmt.Errorf("column %q is not a primitive column", name)
		}
		l, ok := leafOf[PhysicalName(field)]
		out[i] = -1
		if ok {
			out[i] = l
		}
	}
	return out, nil
}

// chunkValues appends the n values of leaf column leaf of rg to dst (n
// nulls for -1). Byte array values point into the pages read, which stay
// alive while dst refers to them.
func chunkValues(rg parquet.RowGroup, leaf, n int, dst []parquet.Value) ([]parquet.Value, error) {
	if leaf < 0 {
		for range n {
			dst = append(dst, parquet.NullValue())
		}
		return dst, nil
	}
	pages := rg.ColumnChunks()[leaf].Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return dst, err
		}
		start := len(dst)
		dst = slices.Grow(dst, int(p.NumValues()))[:start+int(p.NumValues())]
		got, err := p.Values().ReadValues(dst[start:])
		if err != nil && !errors.Is(err, io.EOF) {
			return dst, err
		}
		dst = dst[:start+got]
	}
	if len(dst) != n {
		return dst, fmt.Errorf("%d values in a row group of %d rows", len(dst), n)
	}
	return dst, nil
}
