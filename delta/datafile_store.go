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
	dataIdx := make([]int, 0, len(dataSchema.Fields))
	for i, f := range table.Fields {
		if !slices.Contains(partitionColumns, f.Name) {
			dataIdx = append(dataIdx, i)
		}
	}
	key := NewDataFileKey(partitionColumns, partitionValues, opts.Compression)
	// Under column mapping the file and the add use physical names.
	w, err := CreateDataFile(ctx, store, key, PhysicalSchema(dataSchema), PhysicalPartitionValues(table, partitionValues), opts)
	if err != nil {
		return nil, err
	}
	ps := w.Schema()
	batch := make([]parquet.Row, 0, 256)
	flush := func() error {
		_, err := w.WriteRows(batch)
		batch = batch[:0]
		return err
	}
	for n, r := range rows {
		if len(r) != len(table.Fields) {
			err = fmt.Errorf("row %d has %d values, the table table %d columns", n, len(r), len(table.Fields))
			break
		}
		var pr parquet.Row
		if len(batch) < cap(batch) {
			pr = batch[:len(batch)+1][len(batch)][:0]
		}
		for col, i := range dataIdx {
			if pr, err = ps.AppendValue(pr, col, r[i]); err != nil {
				break
			}
		}
		if err != nil {
			err = fmt.Errorf("row %d: %w", n, err)
			break
		}
		batch = append(batch, pr)
		if len(batch) == cap(batch) {
			if err = flush(); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = flush()
	}
	if err != nil {
		w.Abort(err)
		return nil, fmt.Errorf("write data file %s: %w", key, err)
	}
	return w.Close()
}
