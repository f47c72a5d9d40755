package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta/internal/parquetfile"
	"github.com/deltaflow/deltaflow/storage"
)

// ReadDataFile reads all rows of the data file of add, aligned with the full
// table schema: file columns are matched by name (a column missing from the
// file reads as null, for schema evolution), partition columns come from
// add.PartitionValues, rows add's deletion vector marks are left out, and
// values have the Go types documented on Row.
func ReadDataFile(ctx context.Context, store storage.Store, schema *StructType, partitionColumns []string, add *Add) ([]Row, error) {
	var rows []Row
	for r, err := range DataFileRows(ctx, store, schema, partitionColumns, add) {
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// DataFileRows iterates over the rows of add's data file (see ReadDataFile),
// one row group in memory at a time. Each Row is freshly allocated. After an
// error the iteration stops.
func DataFileRows(ctx context.Context, store storage.Store, schema *StructType, partitionColumns []string, add *Add) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		for r, err := range DataFileIndexedRows(ctx, store, schema, partitionColumns, add) {
			if !yield(r.Row, err) {
				return
			}
		}
	}
}

// IndexedRow is a row of a data file with its physical index in the file
// (deleted rows count), which row tracking's row IDs and deletion vectors
// address.
type IndexedRow struct {
	Index uint64
	Row   Row
}

// DataFileIndexedRows is DataFileRows with each row's physical index: what
// a writer of deletion vectors needs to name the rows it deletes. schema
// may hold only the columns the caller reads.
func DataFileIndexedRows(ctx context.Context, store storage.Store, schema *StructType, partitionColumns []string, add *Add) iter.Seq2[IndexedRow, error] {
	return func(yield func(IndexedRow, error) bool) {
		df, err := openDataFile(ctx, store, add)
		if err != nil {
			yield(IndexedRow{}, err)
			return
		}
		defer df.close()
		fail := func(err error) { yield(IndexedRow{}, df.errorf(err)) }
		f, deleted := df.file, df.deleted
		fr, err := parquetfile.NewRowReader(f, schema, partitionColumns, add.PartitionValues)
		if err != nil {
			fail(err)
			return
		}
		var index uint64
		buf := make([]parquet.Row, 256)
		for _, rg := range f.RowGroups() {
			rows := rg.Rows()
			for {
				if err := ctx.Err(); err != nil {
					rows.Close()
					fail(err)
					return
				}
				n, rerr := rows.ReadRows(buf)
				for _, pr := range buf[:n] {
					if index++; deleted.Contains(index - 1) {
						continue
					}
					row, err := fr.Convert(pr)
					if err != nil {
						rows.Close()
						fail(err)
						return
					}
					if !yield(IndexedRow{index - 1, row}, nil) {
						rows.Close()
						return
					}
				}
				if errors.Is(rerr, io.EOF) {
					break
				}
				if rerr != nil {
					rows.Close()
					fail(rerr)
					return
				}
			}
			rows.Close()
		}
	}
}

// dataFile is an open data file: its Parquet footer read, the rows its
// deletion vector deletes loaded (by physical index).
type dataFile struct {
	key     string
	file    *parquet.File
	deleted *RowIndexSet
	close   func() error
}

// openDataFile opens add's data file in store and loads its deletion
// vector; errors name the file. The caller closes it.
func openDataFile(ctx context.Context, store storage.Store, add *Add) (*dataFile, error) {
	key, err := StoreKey(store, add.Path)
	if err != nil {
		return nil, fmt.Errorf("read data file %s: %w", add.Path, err)
	}
	df := &dataFile{key: key}
	r, err := store.Open(ctx, key)
	if err != nil {
		return nil, df.errorf(err)
	}
	df.close = r.Close
	if df.file, err = parquet.OpenFile(r, r.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true)); err == nil {
		df.deleted, err = LoadDeletionVector(ctx, store, add.DeletionVector)
	}
	if err != nil {
		r.Close()
		return nil, df.errorf(err)
	}
	return df, nil
}

// errorf wraps err with the file's name.
func (df *dataFile) errorf(err error) error { return fmt.Errorf("read data file %s: %w", df.key, err) }
