package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta/internal/parquetfile"
	"github.com/deltaflow/deltaflow/delta/schema"
	"github.com/deltaflow/deltaflow/storage"
)

// NewDataFileKey names a new data file as Spark does:
// "<partition dir>/part-00000-<uuid>.c000.<codec>.parquet".
func NewDataFileKey(partitionColumns []string, partitionValues map[string]*string, c Compression) string {
	name := fmt.Sprintf("part-00000-%s.c000.%s.parquet", uuid.NewString(), c)
	if c == Uncompressed {
		name = fmt.Sprintf("part-00000-%s.c000.parquet", uuid.NewString())
	}
	if dir := PartitionDir(partitionColumns, partitionValues); dir != "" {
		return dir + "/" + name
	}
	return name
}

// StoreFileWriter is a FileWriter whose bytes stream to one store key through
// a pipe: the file is never held in memory, and the object only appears
// (whole) when Close succeeds.
type StoreFileWriter struct {
	*FileWriter
	key             string
	partitionValues map[string]*string
	pw              *io.PipeWriter
	done            chan error
}

// CreateDataFile starts a data file at key (relative to the table root).
// The upload runs while rows are written; Close finishes it, Abort cancels
// it.
func CreateDataFile(ctx context.Context, store storage.Store, key string, dataSchema *StructType, partitionValues map[string]*string, opts WriterOptions) (*StoreFileWriter, error) {
	return createDataFile(ctx, store, key, dataSchema, len(dataSchema.Fields), partitionValues, opts)
}

// createDataFile is CreateDataFile for a file of fileSchema's columns, of
// which the leading statsCols get stats (see newFileWriter).
func createDataFile(ctx context.Context, store storage.Store, key string, fileSchema *StructType, statsCols int, partitionValues map[string]*string, opts WriterOptions) (*StoreFileWriter, error) {
	pr, pw := io.Pipe()
	fw, err := parquetfile.NewWriter(pw, fileSchema, statsCols, opts.WithPartitionValues(partitionValues))
	if err != nil {
		return nil, err
	}
	w := &StoreFileWriter{FileWriter: fw, key: key, partitionValues: partitionValues, pw: pw, done: make(chan error, 1)}
	go func() {
		err := store.PutStream(ctx, key, pr, -1)
		if err == nil {
			// PutStream must have consumed everything; if it returned early,
			// writers must not block forever.
			_, err = pr.Read(make([]byte, 1))
			if errors.Is(err, io.EOF) {
				err = nil
			} else if err == nil {
				err = errors.New("store returned before the end of the data")
			}
		}
		pr.CloseWithError(errOr(err, io.ErrClosedPipe))
		w.done <- err
	}()
	return w, nil
}

func errOr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// Close finishes the file, waits for the upload and returns its add action
// (dataChange true, stats set).
func (w *StoreFileWriter) Close() (*Add, error) {
	st, err := w.FileWriter.Close()
	if err != nil {
		w.pw.CloseWithError(err)
		<-w.done
		return nil, fmt.Errorf("write data file %s: %w", w.key, err)
	}
	w.pw.Close()
	if err := <-w.done; err != nil {
		return nil, fmt.Errorf("upload data file %s: %w", w.key, err)
	}
	pv := w.partitionValues
	if pv == nil {
		pv = map[string]*string{}
	}
	return &Add{
		Path:             EncodePath(w.key),
		PartitionValues:  pv,
		Size:             st.Size,
		ModificationTime: time.Now().UnixMilli(),
		DataChange:       true,
		Stats:            st.Stats,
	}, nil
}

// Abort cancels the upload; no object is created.
func (w *StoreFileWriter) Abort(cause error) {
	w.pw.CloseWithError(errOr(cause, errors.New("data file aborted")))
	<-w.done
}

// WriteDataFile writes rows (aligned with the full table schema; partition
// column entries are ignored, their values come from partitionValues, keyed
// by column name) as one new data file of the partition and returns its add
// action. Under column mapping the file's columns and the add's partition
// values use physical names, and columns carry their ids as field ids.
func WriteDataFile(ctx context.Context, store storage.Store, table *StructType, partitionColumns []string,
	partitionValues map[string]*string, rows []Row, opts WriterOptions) (*Add, error) {
	dataSchema := schema.DataSchema(table, partitionColumns)
	key := NewDataFileKey(partitionColumns, partitionValues, opts.Compression)
	// Under column mapping the file and the add use physical names.
	w, err := CreateDataFile(ctx, store, key, PhysicalSchema(dataSchema), PhysicalPartitionValues(table, partitionValues), opts)
	if err != nil {
		return nil, err
	}
	b := newRowBatcher(w, table, partitionColumns)
	for n, r := range rows {
		if err = b.write(r, nil); err != nil {
			err = fmt.Errorf("row %d: %w", n, err)
			break
		}
	}
	if err == nil {
		err = b.flush()
	}
	if err != nil {
		w.Abort(err)
		return nil, fmt.Errorf("write data file %s: %w", key, err)
	}
	return w.Close()
}

// rowBatcher writes table rows (aligned with the full table schema) to a
// file of the table's data columns, in batches whose parquet rows are
// reused: no allocation a row once the batch has filled.
type rowBatcher struct {
	w       *StoreFileWriter
	ps      *ParquetSchema
	dataIdx []int // the table columns the file holds, in file order
	ncols   int
	batch   []parquet.Row
}

func newRowBatcher(w *StoreFileWriter, table *StructType, partitionColumns []string) *rowBatcher {
	b := &rowBatcher{w: w, ps: w.Schema(), ncols: len(table.Fields), batch: make([]parquet.Row, 0, 256)}
	for i, f := range table.Fields {
		if !slices.Contains(partitionColumns, f.Name) {
			b.dataIdx = append(b.dataIdx, i)
		}
	}
	return b
}

// write adds row r, then extra as the file's next column when not nil
// (a change data file's _change_type).
func (b *rowBatcher) write(r Row, extra any) error {
	if len(r) != b.ncols {
		return fmt.Errorf("%d values, the table has %d columns", len(r), b.ncols)
	}
	var pr parquet.Row
	if len(b.batch) < cap(b.batch) {
		pr = b.batch[:len(b.batch)+1][len(b.batch)][:0]
	}
	var err error
	for col, i := range b.dataIdx {
		if pr, err = b.ps.AppendValue(pr, col, r[i]); err != nil {
			return err
		}
	}
	if extra != nil {
		if pr, err = b.ps.AppendValue(pr, len(b.dataIdx), extra); err != nil {
			return err
		}
	}
	b.batch = append(b.batch, pr)
	if len(b.batch) == cap(b.batch) {
		return b.flush()
	}
	return nil
}

// flush writes the batch's rows.
func (b *rowBatcher) flush() error {
	_, err := b.w.WriteRows(b.batch)
	b.batch = b.batch[:0]
	return err
}
