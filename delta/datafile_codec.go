package delta

import (
	"io"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta/internal/parquetfile"
)

// The data file codec (Parquet writer and reader, stats collection) lives
// in internal/parquetfile, which knows the schema and not the log; these
// names keep its writer in delta's API.
type (
	WriterOptions = parquetfile.WriterOptions
	FileWriter    = parquetfile.FileWriter
	FileStats     = parquetfile.FileStats
	Compression   = parquetfile.Compression
	VariantValue  = parquetfile.VariantValue
	ParquetSchema = parquetfile.ParquetSchema
	NestedLeaf    = parquetfile.NestedLeaf
)

// The page codecs.
const (
	Snappy       = parquetfile.Snappy
	Zstd         = parquetfile.Zstd
	Uncompressed = parquetfile.Uncompressed
)

// StatsStringPrefix is how many characters of a string column its stats
// keep (parquetfile.StatsStringPrefix).
const StatsStringPrefix = parquetfile.StatsStringPrefix

// NewFileWriter starts a data file of dataSchema's columns written to w
// (see parquetfile.NewFileWriter).
func NewFileWriter(w io.Writer, dataSchema *StructType, opts WriterOptions) (*FileWriter, error) {
	return parquetfile.NewFileWriter(w, dataSchema, opts)
}

// NewParquetSchema is parquetfile.NewParquetSchema.
func NewParquetSchema(dataSchema *StructType) (*ParquetSchema, error) {
	return parquetfile.NewParquetSchema(dataSchema)
}

// TruncateMinString is parquetfile.TruncateMinString.
func TruncateMinString(s string, prefixLen int) string {
	return parquetfile.TruncateMinString(s, prefixLen)
}

// NestedLeaves is parquetfile.NestedLeaves: the Parquet leaves of a
// struct, array or map column.
func NestedLeaves(f *StructField) ([]NestedLeaf, error) { return parquetfile.NestedLeaves(f) }

// AppendNested is parquetfile.AppendNested: the encoding of one nested
// column value that a mapped row carries.
func AppendNested(dst []byte, leaves []parquet.Value) []byte {
	return parquetfile.AppendNested(dst, leaves)
}

// IsNested is parquetfile.IsNested.
func IsNested(t DataType) bool { return parquetfile.IsNested(t) }
