package delta

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/deltaflow/deltaflow/delta/schema"
	"github.com/deltaflow/deltaflow/storage"
)

// Change data files (the change data feed): a commit that updates or
// deletes rows of a table with delta.enableChangeDataFeed writes every
// change it makes as rows of files under _change_data, each row with its
// _change_type, and names them in cdc actions; readers of the feed then
// take that commit's changes from them alone.

// ChangeType is a change data row's _change_type.
type ChangeType uint8

// The change types, as the protocol names them.
const (
	ChangeInsert ChangeType = iota
	ChangeUpdatePreimage
	ChangeUpdatePostimage
	ChangeDelete
)

// changeTypeValues are the change types' column values, made interface
// values once so that writing a row allocates none.
var changeTypeValues = [...]any{"insert", "update_preimage", "update_postimage", "delete"}

// ChangeTypeColumn is the column of a change data file that holds each
// row's change type, after the table's data columns.
const ChangeTypeColumn = "_change_type"

// ChangeDataDir is the directory of the change data files, at the table
// root, with the partition directories below it.
const ChangeDataDir = "_change_data"

// ChangeDataWriter writes one change data file of a partition: the table's
// data columns, then _change_type, as Spark writes them. Its rows stream to
// the store (see CreateDataFile).
type ChangeDataWriter struct {
	w   *StoreFileWriter
	b   *rowBatcher
	key string
}

// CreateChangeDataFile starts a change data file of the partition with
// partitionValues (keyed by column name) of a table with schema table,
// named as Spark names them:
// "_change_data/<partition dir>/cdc-00000-<uuid>.c000.<codec>.parquet".
// The file has no statistics (its action carries none) and no
// materialized partition columns. Under column mapping its data columns
// and its action's partition values use physical names, and columns carry
// their ids as field ids, as the table's data files (WriteDataFile);
// _change_type keeps its name and has no id: Spark reads it by name in
// every mapping mode (DeltaColumnMapping's internal columns).
func CreateChangeDataFile(ctx context.Context, store storage.Store, table *StructType, partitionColumns []string,
	partitionValues map[string]*string, opts WriterOptions) (*ChangeDataWriter, error) {
	data := PhysicalSchema(schema.DataSchema(table, partitionColumns))
	file := &StructType{Fields: append(data.Fields, StructField{Name: ChangeTypeColumn, Type: String, Nullable: true})}
	name := fmt.Sprintf("cdc-00000-%s.c000.%s.parquet", uuid.NewString(), opts.Compression)
	if opts.Compression == Uncompressed {
		name = fmt.Sprintf("cdc-00000-%s.c000.parquet", uuid.NewString())
	}
	key := ChangeDataDir + "/" + name
	if dir := PartitionDir(partitionColumns, partitionValues); dir != "" {
		key = ChangeDataDir + "/" + dir + "/" + name
	}
	opts.NoColumnStats, opts.Partitions = true, nil
	w, err := createDataFile(ctx, store, key, file, 0, PhysicalPartitionValues(table, partitionValues), opts)
	if err != nil {
		return nil, fmt.Errorf("change data file %s: %w", key, err)
	}
	return &ChangeDataWriter{w: w, b: newRowBatcher(w, table, partitionColumns), key: key}, nil
}

// Write adds row r (aligned with the full table schema, as ReadDataFile
// reads it) as a change of type c.
func (w *ChangeDataWriter) Write(r Row, c ChangeType) error {
	if err := w.b.write(r, changeTypeValues[c]); err != nil {
		return fmt.Errorf("change data file %s: %w", w.key, err)
	}
	return nil
}

// Close finishes the file and returns its cdc action.
func (w *ChangeDataWriter) Close() (*AddCDC, error) {
	if err := w.b.flush(); err != nil {
		w.w.Abort(err)
		return nil, fmt.Errorf("change data file %s: %w", w.key, err)
	}
	add, err := w.w.Close()
	if err != nil {
		return nil, err
	}
	return &AddCDC{Path: add.Path, PartitionValues: add.PartitionValues, Size: add.Size}, nil
}

// Abort cancels the file; no object is created.
func (w *ChangeDataWriter) Abort(cause error) { w.w.Abort(cause) }
