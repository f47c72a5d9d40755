package parquetfile

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta/schema"
)

// TestWriterMemoryEstimate: FileWriter.FixedMemory, which the engine counts
// in its memory budget for every open file, is an upper bound of what an
// open writer with one row really holds (heap measured over 200 writers),
// and not far above it, for fixed-width and byte-array columns and both
// page sizes the engine and OPTIMIZE use. A parquet-go upgrade that
// changes its buffers fails here.
func TestWriterMemoryEstimate(t *testing.T) {
	for _, tc := range []struct {
		types    []schema.PrimitiveType
		pageSize int
	}{
		{[]schema.PrimitiveType{schema.Long}, 32 << 10},
		{[]schema.PrimitiveType{schema.String, schema.String, schema.Timestamp, schema.Integer, schema.Boolean, schema.Integer, schema.Double, schema.Double, schema.Double, schema.Double, schema.String, schema.String}, 32 << 10},
		{[]schema.PrimitiveType{schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long, schema.Long}, 32 << 10},
		{[]schema.PrimitiveType{schema.String, schema.String, schema.String, schema.String, schema.String, schema.String, schema.String, schema.String, schema.String, schema.String, schema.String, schema.String, schema.String, schema.String, schema.String, schema.String, schema.String, schema.String, schema.String, schema.String}, 32 << 10},
		{[]schema.PrimitiveType{schema.String, schema.Long, schema.Double}, DefaultPageBufferSize},
	} {
		name := fmt.Sprintf("%d-columns-%dKiB", len(tc.types), tc.pageSize>>10)
		t.Run(name, func(t *testing.T) {
			var table schema.StructType
			for i, typ := range tc.types {
				table.Fields = append(table.Fields, schema.StructField{Name: fmt.Sprintf("c%d", i), Type: typ, Nullable: true})
			}
			opts := WriterOptions{PageBufferSize: tc.pageSize}
			ps, err := NewParquetSchema(&table)
			if err != nil {
				t.Fatal(err)
			}
			var row parquet.Row
			for c, typ := range tc.types {
				var v any
				switch typ {
				case schema.String:
					v = "smart_plug-0001"
				case schema.Long:
					v = int64(c)
				case schema.Integer:
					v = int32(c)
				case schema.Double:
					v = float64(c)
				case schema.Boolean:
					v = true
				case schema.Timestamp:
					v = time.UnixMicro(1_700_000_000_000_000)
				}
				if row, err = ps.AppendValue(row, c, v); err != nil {
					t.Fatal(err)
				}
			}
			// The least of three rounds: anything else allocating meanwhile
			// only adds.
			var writers []*FileWriter
			measured := int64(math.MaxInt64)
			for range 3 {
				writers = nil
				measured = min(measured, heapPerWriter(t, 200, func() *FileWriter {
					w, err := NewFileWriter(io.Discard, &table, opts)
					if err == nil {
						_, err = w.WriteRows([]parquet.Row{row})
					}
					if err != nil {
						t.Fatal(err)
					}
					writers = append(writers, w)
					return w
				}))
			}
			est := writers[0].FixedMemory()
			t.Logf("estimated %d bytes, measured %d", est, measured)
			if est < measured || est > measured*13/10 {
				t.Fatalf("FixedMemory says %d bytes for an open writer, which holds %d: not an upper bound within 30%%", est, measured)
			}
		})
	}
}

// heapPerWriter is the heap n writers made by open hold, each.
func heapPerWriter(t *testing.T, n int, open func() *FileWriter) int64 {
	t.Helper()
	writers := make([]*FileWriter, n)
	var ms runtime.MemStats
	// Two collections empty parquet-go's buffer pools (sync.Pool keeps a
	// victim cache for one), so the writers allocate their buffers rather
	// than reuse earlier ones.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	for i := range writers {
		writers[i] = open()
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	runtime.KeepAlive(writers)
	return (int64(ms.HeapAlloc) - int64(before)) / int64(n)
}
