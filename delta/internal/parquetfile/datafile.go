// Package parquetfile is delta's data file codec: it writes table rows as
// Parquet files the way Spark does (FileWriter: row groups, page codecs,
// field ids, variants) while collecting each file's Delta statistics, and
// reads Parquet files written by any engine back as rows (RowReader). It
// knows the schema (package schema), not the log: where files live, their
// add actions and deletion vectors are delta's.
package parquetfile

import (
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/klauspost/compress/s2"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/format"

	"github.com/deltaflow/deltaflow/delta/internal/pqnode"
	"github.com/deltaflow/deltaflow/delta/schema"
)

// Compression is the codec of a data file's pages.
type Compression int

// The supported codecs. Snappy is what Spark 3.x writes and the zero value.
const (
	Snappy Compression = iota
	Zstd
	Uncompressed
)

// String is the name used in data file names: "snappy", "zstd", "uncompressed".
func (c Compression) String() string {
	switch c {
	case Snappy:
		return "snappy"
	case Zstd:
		return "zstd"
	case Uncompressed:
		return "uncompressed"
	}
	return fmt.Sprintf("Compression(%d)", int(c))
}

func (c Compression) codec() (compress.Codec, error) {
	switch c {
	case Snappy:
		return snappyCodec{}, nil
	case Zstd:
		return &zstd.Codec{}, nil
	case Uncompressed:
		return &parquet.Uncompressed, nil
	}
	return nil, fmt.Errorf("unknown compression %d", int(c))
}

// snappyCodec writes raw snappy blocks with s2's fast snappy-compatible
// encoder: parquet-go's own snappy codec uses the "better" mode, which costs
// ~16% more CPU for ~12% smaller pages, a bad trade on a Raspberry Pi.
type snappyCodec struct{}

func (snappyCodec) String() string                            { return "SNAPPY" }
func (snappyCodec) CompressionCodec() format.CompressionCodec { return format.Snappy }

func (snappyCodec) Encode(dst, src []byte) ([]byte, error) {
	if n := s2.MaxEncodedLen(len(src)); n > cap(dst) {
		dst = make([]byte, n)
	}
	return s2.EncodeSnappy(dst[:cap(dst)], src), nil
}

func (snappyCodec) Decode(dst, src []byte) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if n > cap(dst) {
		dst = make([]byte, n)
	}
	return s2.Decode(dst[:cap(dst)], src)
}

// Defaults of WriterOptions.
const (
	DefaultRowGroupRows   = 64 * 1024
	DefaultPageBufferSize = 256 * 1024
	// DefaultNumIndexedCols is delta.dataSkippingNumIndexedCols' default.
	DefaultNumIndexedCols = 32
)

// WriterOptions configure a data file writer. The zero value is usable:
// snappy, 64 Ki-row row groups, stats on the first 32 columns.
type WriterOptions struct {
	Compression Compression
	// RowGroupRows bounds the rows buffered before a row group is encoded and
	// written out, and so the writer's memory. 0 means DefaultRowGroupRows.
	RowGroupRows int
	// PageBufferSize is the uncompressed size at which a page is cut.
	// 0 means DefaultPageBufferSize.
	PageBufferSize int
	// NumIndexedCols is delta.dataSkippingNumIndexedCols: how many leading
	// (leaf) columns get statistics. 0 means 32, a negative value all
	// columns. See ApplyTableConfig.
	NumIndexedCols int
	// NoColumnStats writes only numRecords, as dataSkippingNumIndexedCols=0.
	NoColumnStats bool
	// Partitions, when set, are the table's partition columns (physical
	// names, column ids), written into every data file behind its other
	// columns, as tables with materializePartitionColumns require (see
	// Snapshot.ApplyWriterOptions). Each file's values are those of
	// WithPartitionValues, or of CreateDataFile's partitionValues.
	Partitions *schema.StructType
	// partitionValues are the file's partition values by physical name.
	partitionValues map[string]*string
}

// WithPartitionValues returns the options for a data file of the partition
// with these values (keyed by physical name, as add actions key them):
// with Partitions set, the file holds them too.
func (o WriterOptions) WithPartitionValues(values map[string]*string) WriterOptions {
	o.partitionValues = values
	return o
}

// ApplyTableConfig sets the options a table's metaData.configuration
// controls: delta.dataSkippingNumIndexedCols.
func (o *WriterOptions) ApplyTableConfig(conf map[string]string) error {
	if s, ok := conf["delta.dataSkippingNumIndexedCols"]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < -1 {
			return fmt.Errorf("delta.dataSkippingNumIndexedCols %q is not an integer ≥ -1", s)
		}
		o.NoColumnStats = n == 0
		o.NumIndexedCols = n
	}
	return nil
}

func (o WriterOptions) numIndexedCols(ncols int) int {
	switch {
	case o.NoColumnStats:
		return 0
	case o.NumIndexedCols == 0:
		return min(DefaultNumIndexedCols, ncols)
	case o.NumIndexedCols < 0:
		return ncols
	}
	return min(o.NumIndexedCols, ncols)
}

// ParquetSchema is the Parquet schema of a data file, built from a Delta
// data schema in declared column order, and the constructors of the
// parquet.Value each column takes. Build rows for FileWriter.WriteRows with it:
// one value per slot, in column order, e.g.
//
//	row = append(row[:0], ps.Text(0, id), ps.Timestamp(1, t), ps.Null(2))
//
// Slots and leaves: a column of a primitive type or decimal is one slot
// and one Parquet leaf; a variant is two of each (see Variant; AppendValue
// appends both); a struct, array or map column is one slot, a byte array
// holding AppendNested's encoding of the values of its leaves (see
// NestedLeaves), or Null when the whole column is null, and as many
// leaves as NestedLeaves lists. A table without nested columns has its
// slots as its leaves, and its rows go to parquet-go as they are; a row
// with nested columns is expanded into its leaves' values by WriteRows.
// The constructors take the column's index in the data schema, set the
// column's (first) leaf index and definition level, and do not check that
// the Go value suits the column (WriteRows does).
type ParquetSchema struct {
	fields []schema.StructField
	schema *parquet.Schema
	leaf   []int // each column's first leaf, and the number of leaves
	slot   []int // each column's first slot, and the number of slots
	nested bool  // some column is a struct, array or map
	// Per leaf: its column, its definition level when not null (1 if
	// optional; NestedLeaf.MaxDef in a nested column), its repetition level
	// (NestedLeaf.MaxRep) and its physical kind.
	column []int
	def    []int
	rep    []int
	kinds  []parquet.Kind
}

// NewParquetSchema maps a Delta data schema (no partition columns) to
// Parquet as Spark does: primitive types, decimals, variants, and structs,
// arrays and maps of them in the layout NestedLeaves describes. Under
// column mapping (field metadata delta.columnMapping.*) top-level columns
// are named as given (PhysicalSchema's names) and nested fields by their
// physical names, and every struct field carries its id as field id, as
// Spark writes them.
func NewParquetSchema(dataSchema *schema.StructType) (*ParquetSchema, error) {
	ps := &ParquetSchema{fields: dataSchema.Fields}
	root := make([]parquet.Field, 0, len(dataSchema.Fields))
	seen := make(map[string]bool, len(dataSchema.Fields))
	slots := 0
	for i := range dataSchema.Fields {
		f := &dataSchema.Fields[i]
		if seen[f.Name] {
			return nil, fmt.Errorf("parquet schema: duplicate column %q", f.Name)
		}
		seen[f.Name] = true
		node, err := fieldNode(f, false)
		if err != nil {
			return nil, fmt.Errorf("parquet schema: column %q: %w", f.Name, err)
		}
		root = append(root, pqnode.Field(f.Name, node))
		col := len(ps.leaf)
		ps.leaf = append(ps.leaf, len(ps.kinds))
		ps.slot = append(ps.slot, slots)
		kinds := leafKinds(node)
		if IsNested(f.Type) {
			leaves, err := NestedLeaves(f)
			if err != nil {
				return nil, fmt.Errorf("parquet schema: column %q: %w", f.Name, err)
			}
			for _, l := range leaves {
				ps.def = append(ps.def, l.MaxDef)
				ps.rep = append(ps.rep, l.MaxRep)
			}
			ps.nested = true
			slots++
		} else {
			for range kinds {
				ps.def = append(ps.def, boolInt(f.Nullable))
				ps.rep = append(ps.rep, 0)
			}
			slots += len(kinds)
		}
		for _, k := range kinds {
			ps.column = append(ps.column, col)
			ps.kinds = append(ps.kinds, k)
		}
	}
	// Ends of the last column's slots and leaves.
	ps.slot = append(ps.slot, slots)
	ps.leaf = append(ps.leaf, len(ps.kinds))
	ps.schema = parquet.NewSchema("spark_schema", pqnode.Group(root...))
	return ps, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fieldNode is the Parquet node of field f, a column or (nested) a struct
// field: optional when nullable, with its column mapping id as field id.
func fieldNode(f *schema.StructField, nested bool) (parquet.Node, error) {
	node, err := typeNode(f.Type, nested)
	if err != nil {
		return nil, err
	}
	node = optionalIf(node, f.Nullable)
	if id, ok := schema.FieldID(f); ok {
		node = parquet.FieldID(node, id) // column mapping: the column id
	}
	return node, nil
}

func optionalIf(n parquet.Node, optional bool) parquet.Node {
	if optional {
		return parquet.Optional(n)
	}
	return parquet.Required(n)
}

// typeNode is the Parquet node of t, below a column when nested: Spark's
// LIST and MAP layouts (those NestedLeaves describes), struct fields by
// their physical names.
func typeNode(t schema.DataType, nested bool) (parquet.Node, error) {
	switch t := t.(type) {
	case *schema.StructType:
		if len(t.Fields) == 0 {
			return nil, fmt.Errorf("%w: an empty struct", ErrNestedType)
		}
		fields := make([]parquet.Field, len(t.Fields))
		for i := range t.Fields {
			f := &t.Fields[i]
			n, err := fieldNode(f, true)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", f.Name, err)
			}
			fields[i] = pqnode.Field(schema.PhysicalName(f), n)
		}
		return pqnode.Group(fields...), nil
	case *schema.ArrayType:
		elem, err := typeNode(t.ElementType, true)
		if err != nil {
			return nil, fmt.Errorf("array element: %w", err)
		}
		return pqnode.ListOf(optionalIf(elem, t.ContainsNull)), nil
	case *schema.MapType:
		key, err := typeNode(t.KeyType, true)
		if err != nil {
			return nil, fmt.Errorf("map key: %w", err)
		}
		value, err := typeNode(t.ValueType, true)
		if err != nil {
			return nil, fmt.Errorf("map value: %w", err)
		}
		return pqnode.MapOf(key, optionalIf(value, t.ValueContainsNull)), nil
	}
	if nested && t == schema.Variant {
		return nil, fmt.Errorf("%w: a variant inside a struct, array or map", ErrNestedType)
	}
	return parquetLeaf(t)
}

// leafKinds are the physical kinds of node's leaves, in column order.
func leafKinds(n parquet.Node) []parquet.Kind {
	if n.Leaf() {
		return []parquet.Kind{n.Type().Kind()}
	}
	var kinds []parquet.Kind
	for _, f := range n.Fields() {
		kinds = append(kinds, leafKinds(f)...)
	}
	return kinds
}

// variantNode is an unshredded variant as the Parquet spec lays it out: a
// VARIANT group of two required binaries, metadata then value (some
// readers, DuckDB among them, want that order; Spark finds them by name).
var variantNode = pqnode.Typed(variantV1{parquet.Variant().Type()},
	pqnode.Field("metadata", parquet.Required(parquet.Encoded(parquet.Leaf(parquet.ByteArrayType), &parquet.Plain))),
	pqnode.Field("value", parquet.Required(parquet.Encoded(parquet.Leaf(parquet.ByteArrayType), &parquet.Plain))),
)

// variantV1 is the VARIANT logical type with its specification version,
// 1: parquet-go writes 0 (or none), which Spark refuses.
type variantV1 struct{ parquet.Type }

func (variantV1) LogicalType() *format.LogicalType {
	return &format.LogicalType{Value: &format.VariantType{SpecificationVersion: 1}}
}

func parquetLeaf(t schema.DataType) (parquet.Node, error) {
	if d, ok := t.(schema.DecimalType); ok {
		return decimalNode(d), nil
	}
	if t == schema.Variant {
		return variantNode, nil
	}
	var n parquet.Node
	switch t {
	case schema.String:
		n = parquet.String()
	case schema.Long:
		n = parquet.Leaf(parquet.Int64Type)
	case schema.Integer:
		n = parquet.Leaf(parquet.Int32Type)
	case schema.Short:
		n = parquet.Int(16)
	case schema.Byte:
		n = parquet.Int(8)
	case schema.Float:
		n = parquet.Leaf(parquet.FloatType)
	case schema.Double:
		n = parquet.Leaf(parquet.DoubleType)
	case schema.Boolean:
		n = parquet.Leaf(parquet.BooleanType)
	case schema.Binary:
		n = parquet.Leaf(parquet.ByteArrayType)
	case schema.Date:
		n = parquet.Date()
	case schema.Timestamp:
		n = parquet.TimestampAdjusted(parquet.Microsecond, true)
	case schema.TimestampNTZ:
		n = parquet.TimestampAdjusted(parquet.Microsecond, false)
	default:
		return nil, fmt.Errorf("type %s cannot be written", schema.TypeName(t))
	}
	if n.Type().Kind() == parquet.ByteArray {
		// parquet-go defaults byte arrays to DELTA_LENGTH_BYTE_ARRAY, which
		// Spark's vectorized reader only supports since 3.3; PLAIN is read
		// by everything.
		n = parquet.Encoded(n, &parquet.Plain)
	}
	return n, nil
}

// Schema is the parquet-go schema.
func (s *ParquetSchema) Schema() *parquet.Schema { return s.schema }

// Field is the Delta field of column col.
func (s *ParquetSchema) Field(col int) *schema.StructField { return &s.fields[col] }

// Null is a null in column col: the whole value of a column of one slot
// (AppendValue appends a variant's two nulls).
func (s *ParquetSchema) Null(col int) parquet.Value { return parquet.Value{}.Level(0, 0, s.leaf[col]) }

// Nested is the slot value of a struct, array or map column: enc is
// AppendNested's encoding of its leaves' values (not copied). Its levels
// are the first leaf's, and unused: the leaves' values carry their own.
func (s *ParquetSchema) Nested(col int, enc []byte) parquet.Value {
	return parquet.ByteArrayValue(enc).Level(0, s.def[s.leaf[col]], s.leaf[col])
}

// Variant is the values of a variant column: its metadata, then its value.
// The byte slices are not copied.
func (s *ParquetSchema) Variant(col int, v VariantValue) [2]parquet.Value {
	l := s.leaf[col]
	return [2]parquet.Value{
		parquet.ByteArrayValue(v.Metadata).Level(0, s.def[l], l),
		parquet.ByteArrayValue(v.Value).Level(0, s.def[l], l+1),
	}
}

// Bool is a boolean value.
func (s *ParquetSchema) Bool(col int, v bool) parquet.Value {
	return parquet.BooleanValue(v).Level(0, s.def[s.leaf[col]], s.leaf[col])
}

// Int32 is a value of an integer, short, byte or date (days since the epoch) column.
func (s *ParquetSchema) Int32(col int, v int32) parquet.Value {
	return parquet.Int32Value(v).Level(0, s.def[s.leaf[col]], s.leaf[col])
}

// Int64 is a value of a long column, or of a timestamp or timestamp_ntz
// column in microseconds since the epoch.
func (s *ParquetSchema) Int64(col int, v int64) parquet.Value {
	return parquet.Int64Value(v).Level(0, s.def[s.leaf[col]], s.leaf[col])
}

// Float32 is a value of a float column.
func (s *ParquetSchema) Float32(col int, v float32) parquet.Value {
	return parquet.FloatValue(v).Level(0, s.def[s.leaf[col]], s.leaf[col])
}

// Float64 is a value of a double column.
func (s *ParquetSchema) Float64(col int, v float64) parquet.Value {
	return parquet.DoubleValue(v).Level(0, s.def[s.leaf[col]], s.leaf[col])
}

// Text is a value of a string column. The value refers to v's bytes without
// copying them; the writer copies them when the row is written.
func (s *ParquetSchema) Text(col int, v string) parquet.Value {
	return parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(v), len(v))).Level(0, s.def[s.leaf[col]], s.leaf[col])
}

// Bytes is a value of a binary (or string) column; b is not copied.
func (s *ParquetSchema) Bytes(col int, b []byte) parquet.Value {
	if b == nil {
		b = []byte{} // a nil slice would be a null-looking value; keep it empty
	}
	return parquet.ByteArrayValue(b).Level(0, s.def[s.leaf[col]], s.leaf[col])
}

// Date is a value of a date column: t's calendar date in its own location,
// stored as days since 1970-01-01 (a time.Time written as such would be
// garbage).
func (s *ParquetSchema) Date(col int, t time.Time) parquet.Value {
	return s.Int32(col, DateDays(t))
}

// Timestamp is a value of a timestamp column (the instant t, in µs) or of a
// timestamp_ntz column (t's wall clock read as UTC, in µs).
func (s *ParquetSchema) Timestamp(col int, t time.Time) parquet.Value {
	if s.fields[col].Type == schema.TimestampNTZ {
		return s.Int64(col, WallClockMicros(t))
	}
	return s.Int64(col, t.UnixMicro())
}

// DateDays is t's calendar date (in t's location) as days since 1970-01-01.
func DateDays(t time.Time) int32 {
	y, m, d := t.Date()
	return int32(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
}

// WallClockMicros is t's wall clock read as UTC, in µs since the epoch: the
// stored form of a timestamp_ntz.
func WallClockMicros(t time.Time) int64 {
	y, mo, d := t.Date()
	h, mi, sec := t.Clock()
	return time.Date(y, mo, d, h, mi, sec, t.Nanosecond(), time.UTC).UnixMicro()
}

func pow10(n int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil) }

// Decimal is a value of a decimal column: v is its text ("12.3", "-0.05"),
// with at most the column's scale of fraction digits and its precision of
// digits in all.
func (s *ParquetSchema) Decimal(col int, v string) (parquet.Value, error) {
	pv, err := parseDecimal(s.fields[col].Type.(schema.DecimalType), v)
	if err != nil {
		return pv, err
	}
	return pv.Level(0, s.def[s.leaf[col]], s.leaf[col]), nil
}

// parseDecimal is the decimal text v in d's physical type (decimalPhysical).
func parseDecimal(d schema.DecimalType, v string) (parquet.Value, error) {
	r, ok := new(big.Rat).SetString(v)
	if !ok {
		return parquet.Value{}, fmt.Errorf("%q is not a number", v)
	}
	r.Mul(r, new(big.Rat).SetInt(pow10(d.Scale)))
	if !r.IsInt() || new(big.Int).Abs(r.Num()).Cmp(pow10(d.Precision)) >= 0 {
		return parquet.Value{}, fmt.Errorf("%s does not fit %s", v, d)
	}
	unscaled := r.Num()
	switch decimalPhysical(d).Kind() {
	case parquet.Int32:
		return parquet.Int32Value(int32(unscaled.Int64())), nil
	case parquet.Int64:
		return parquet.Int64Value(unscaled.Int64()), nil
	}
	// big-endian two's complement, sign-extended to the length
	n := d.FixedLen()
	b := make([]byte, n)
	if unscaled.Sign() < 0 {
		unscaled = new(big.Int).Add(unscaled, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	unscaled.FillBytes(b)
	return parquet.FixedLenByteArrayValue(b), nil
}

// AppendValue appends the value of column col to row, converting the Go value
// v as documented on Row (nil is null). Integers of any Go int type are
// accepted for integer columns when they fit; float32 and float64 for float
// and double columns. A struct, array or map column takes what RowReader
// returns for it (see appendNestedValue) and is appended as its slot: the
// AppendNested encoding of its leaves' values.
func (s *ParquetSchema) AppendValue(row parquet.Row, col int, v any) (parquet.Row, error) {
	if col < 0 || col >= len(s.fields) {
		return row, fmt.Errorf("column %d out of range [0,%d)", col, len(s.fields))
	}
	f := &s.fields[col]
	l := s.leaf[col]
	if v == nil {
		if !f.Nullable {
			return row, fmt.Errorf("column %q: null in a non-nullable column", f.Name)
		}
		for i := s.slot[col]; i < s.slot[col+1]; i++ {
			row = append(row, parquet.Value{}.Level(0, 0, l+i-s.slot[col]))
		}
		return row, nil
	}
	if IsNested(f.Type) {
		enc, err := s.encodeNested(col, v)
		if err != nil {
			return row, fmt.Errorf("column %q: %w", f.Name, err)
		}
		return append(row, s.Nested(col, enc)), nil
	}
	if f.Type == schema.Variant {
		if x, ok := v.(VariantValue); ok {
			if err := x.check(); err != nil {
				return row, fmt.Errorf("column %q: %w", f.Name, err)
			}
			vals := s.Variant(col, x)
			return append(row, vals[:]...), nil
		}
	}
	pv, ok, err := primitiveValue(f.Type, v)
	if err != nil {
		return row, fmt.Errorf("column %q: %w", f.Name, err)
	}
	if !ok {
		return row, fmt.Errorf("column %q (%s): cannot write %v (%T)", f.Name, schema.TypeName(f.Type), v, v)
	}
	return append(row, pv.Level(0, s.def[l], l)), nil
}

// primitiveValue converts the Go value v (not nil) to a value of a
// primitive or decimal column of type t, without levels; ok is false when
// v's Go type does not suit t. Strings are not copied.
func primitiveValue(t schema.DataType, v any) (pv parquet.Value, ok bool, err error) {
	switch t {
	case schema.String, schema.Binary:
		switch x := v.(type) {
		case string:
			return parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(x), len(x))), true, nil
		case []byte:
			if x == nil {
				x = []byte{} // a nil slice would be a null-looking value; keep it empty
			}
			return parquet.ByteArrayValue(x), true, nil
		}
	case schema.Long:
		if n, ok := schema.AsInt64(v); ok {
			return parquet.Int64Value(n), true, nil
		}
	case schema.Integer, schema.Short, schema.Byte:
		bits := 32
		if t == schema.Short {
			bits = 16
		} else if t == schema.Byte {
			bits = 8
		}
		if n, ok := schema.AsInt64(v); ok && n >= -1<<(bits-1) && n < 1<<(bits-1) {
			return parquet.Int32Value(int32(n)), true, nil
		}
	case schema.Float:
		if x, ok := schema.AsFloat64(v); ok {
			return parquet.FloatValue(float32(x)), true, nil
		}
	case schema.Double:
		if x, ok := schema.AsFloat64(v); ok {
			return parquet.DoubleValue(x), true, nil
		}
	case schema.Boolean:
		if b, ok := v.(bool); ok {
			return parquet.BooleanValue(b), true, nil
		}
	case schema.Date:
		if t, ok := v.(time.Time); ok {
			return parquet.Int32Value(DateDays(t)), true, nil
		}
	case schema.Timestamp:
		if t, ok := v.(time.Time); ok {
			return parquet.Int64Value(t.UnixMicro()), true, nil
		}
	case schema.TimestampNTZ:
		if t, ok := v.(time.Time); ok {
			return parquet.Int64Value(WallClockMicros(t)), true, nil
		}
	}
	if d, isDec := t.(schema.DecimalType); isDec {
		if x, ok := v.(string); ok {
			pv, err := parseDecimal(d, x)
			return pv, err == nil, err
		}
	}
	return parquet.Value{}, false, nil
}

// checkRow verifies a row of a table without nested columns has one value
// per leaf in leaf order, with the leaf's physical kind and the right
// definition level: parquet-go silently writes garbage (or panics)
// otherwise.
func (s *ParquetSchema) checkRow(row parquet.Row) error {
	if len(row) != len(s.kinds) {
		return fmt.Errorf("row has %d values, the schema %d leaf columns", len(row), len(s.kinds))
	}
	for i, v := range row {
		if v.Column() != i {
			return fmt.Errorf("value %d has column index %d", i, v.Column())
		}
		if v.Kind() == s.kinds[i] && v.DefinitionLevel() == s.def[i] && !v.IsNull() {
			continue // the common case, without a call
		}
		if err := s.checkFlat(v, i); err != nil {
			return err
		}
	}
	return nil
}

// checkFlat verifies v is a value of leaf l of a column that is not nested.
func (s *ParquetSchema) checkFlat(v parquet.Value, l int) error {
	if v.IsNull() {
		if s.def[l] == 0 {
			return fmt.Errorf("column %q: null in a non-nullable column", s.fields[s.column[l]].Name)
		}
		if v.DefinitionLevel() != 0 {
			return fmt.Errorf("column %q: null with definition level %d", s.fields[s.column[l]].Name, v.DefinitionLevel())
		}
		return nil
	}
	if v.Kind() != s.kinds[l] || v.DefinitionLevel() != s.def[l] {
		return fmt.Errorf("column %q: %s value with definition level %d, want %s at level %d",
			s.fields[s.column[l]].Name, v.Kind(), v.DefinitionLevel(), s.kinds[l], s.def[l])
	}
	return nil
}

// expandRow appends to dst the leaf form of row, the slots of the first
// ncols columns: flat values with their leaf's column index, a nested
// column's encoding decoded into its leaves' values (a null one into a
// null per leaf), each checked against the leaves as checkRow does.
func (s *ParquetSchema) expandRow(dst, row parquet.Row, ncols int) (parquet.Row, error) {
	if len(row) != s.slot[ncols] {
		return dst, fmt.Errorf("row has %d values, the schema %d slots", len(row), s.slot[ncols])
	}
	for col := range ncols {
		f := &s.fields[col]
		first, slot := s.leaf[col], s.slot[col]
		if !IsNested(f.Type) {
			for i := slot; i < s.slot[col+1]; i++ {
				l := first + i - slot
				if err := s.checkFlat(row[i], l); err != nil {
					return dst, err
				}
				dst = append(dst, row[i].Level(0, row[i].DefinitionLevel(), l))
			}
			continue
		}
		v := row[slot]
		if v.IsNull() {
			if !f.Nullable {
				return dst, fmt.Errorf("column %q: null in a non-nullable column", f.Name)
			}
			for l := first; l < s.leaf[col+1]; l++ {
				dst = append(dst, parquet.Value{}.Level(0, 0, l))
			}
			continue
		}
		if v.Kind() != parquet.ByteArray {
			return dst, fmt.Errorf("column %q: a %s value, want the byte array of a nested value", f.Name, v.Kind())
		}
		start := len(dst)
		var err error
		if dst, err = appendDecodedNested(dst, v.ByteArray(), first); err == nil {
			err = s.checkNested(col, dst[start:])
		}
		if err != nil {
			return dst, fmt.Errorf("column %q: %w", f.Name, err)
		}
	}
	return dst, nil
}

// checkNested verifies the decoded values of nested column col: each leaf
// in order, starting a row (repetition level 0) exactly once, with levels
// within the leaf's and its physical kind. parquet-go would write a
// broken file otherwise.
func (s *ParquetSchema) checkNested(col int, vals parquet.Row) error {
	next, end := s.leaf[col], s.leaf[col+1]
	for _, v := range vals {
		l := v.Column()
		switch {
		case l == next && l < end:
			if v.RepetitionLevel() != 0 {
				return fmt.Errorf("leaf %d: the first value has repetition level %d", l-s.leaf[col], v.RepetitionLevel())
			}
			next++
		case l != next-1:
			return fmt.Errorf("leaf %d: a value out of leaf order", l-s.leaf[col])
		case v.RepetitionLevel() == 0:
			return fmt.Errorf("leaf %d: two values at repetition level 0", l-s.leaf[col])
		}
		switch d := v.DefinitionLevel(); {
		case v.RepetitionLevel() > s.rep[l] || d > s.def[l]:
			return fmt.Errorf("leaf %d: levels r%d d%d above its r%d d%d", l-s.leaf[col], v.RepetitionLevel(), d, s.rep[l], s.def[l])
		case v.IsNull() != (d < s.def[l]):
			return fmt.Errorf("leaf %d: definition level %d with a null of %v", l-s.leaf[col], d, v.IsNull())
		case !v.IsNull() && v.Kind() != s.kinds[l]:
			return fmt.Errorf("leaf %d: a %s value, want %s", l-s.leaf[col], v.Kind(), s.kinds[l])
		}
	}
	if next != end {
		return fmt.Errorf("leaf %d has no value", next-s.leaf[col])
	}
	return nil
}

// FileStats is what a finished data file reports for its add action.
type FileStats struct {
	NumRecords int64
	// Stats is the Delta stats JSON (add.stats).
	Stats string
	// Size is the file's length in bytes.
	Size int64
}

// FileWriter encodes one Parquet data file and computes its Delta
// statistics while writing. Rows are buffered up to RowGroupRows and then
// written out as a row group, so memory stays bounded whatever the file size.
// A FileWriter is not safe for concurrent use.
type FileWriter struct {
	ps           *ParquetSchema
	pw           *parquet.Writer
	out          countingWriter
	stats        *statsCollector
	rowGroupRows int
	inGroup      int
	numRows      int64
	rowBuf       []parquet.Row
	cols         int         // columns of the rows written, before partitionRow's
	partitionRow parquet.Row // materialized partition values, added to every row
	leafBuf      []parquet.Row
	err          error // sticky: the file is broken after a write error
	closed       bool
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// NewFileWriter starts a data file for rows of dataSchema (the table schema
// without partition columns) written to w.
func NewFileWriter(w io.Writer, dataSchema *schema.StructType, opts WriterOptions) (*FileWriter, error) {
	return NewWriter(w, dataSchema, len(dataSchema.Fields), opts)
}

// NewWriter starts a data file of the columns of fileSchema, of which
// only the leading statsCols (the data columns, not those written behind
// them for row tracking) get stats, followed by opts.Partitions, whose
// values the writer adds to every row.
func NewWriter(w io.Writer, fileSchema *schema.StructType, statsCols int, opts WriterOptions) (*FileWriter, error) {
	cols := len(fileSchema.Fields)
	if opts.Partitions != nil {
		fileSchema = &schema.StructType{Fields: append(slices.Clone(fileSchema.Fields), opts.Partitions.Fields...)}
	}
	ps, err := NewParquetSchema(fileSchema)
	if err != nil {
		return nil, err
	}
	var partitionRow parquet.Row
	for i := cols; i < len(fileSchema.Fields); i++ {
		f := &fileSchema.Fields[i]
		v, err := schema.ParsePartitionValue(f.Type, opts.partitionValues[f.Name])
		if err == nil {
			partitionRow, err = ps.AppendValue(partitionRow, i, v)
		}
		if err != nil {
			return nil, fmt.Errorf("partition column %s: %w", f.Name, err)
		}
	}
	codec, err := opts.Compression.codec()
	if err != nil {
		return nil, err
	}
	fw := &FileWriter{
		ps:           ps,
		out:          countingWriter{w: w},
		stats:        newStatsCollector(ps, statsCols, opts),
		rowGroupRows: opts.RowGroupRows,
		cols:         cols,
		partitionRow: partitionRow,
	}
	if fw.rowGroupRows <= 0 {
		fw.rowGroupRows = DefaultRowGroupRows
	}
	pageSize := opts.PageBufferSize
	if pageSize <= 0 {
		pageSize = DefaultPageBufferSize
	}
	cfg, err := parquet.NewWriterConfig(
		ps.schema,
		parquet.Compression(codec),
		parquet.DataPageVersion(1), // the Delta protocol asks for V1 pages
		parquet.PageBufferSize(pageSize),
	)
	if err != nil {
		return nil, fmt.Errorf("parquet writer config: %w", err)
	}
	fw.pw = parquet.NewWriter(&fw.out, cfg)
	return fw, nil
}

// Memory parquet-go holds for an open writer whatever its rows: its write
// buffer (parquet.DefaultWriteBufferSize) and a little, and per leaf
// column pooled buffers of its smallest size for the values and levels of
// the open page (four for byte arrays, which keep offsets and bytes apart,
// two for the others). Measured on parquet-go 0.32
// (TestWriterMemoryEstimate keeps it an upper bound).
const (
	writerBaseMemory     = parquet.DefaultWriteBufferSize + 4<<10
	leafBufferMemory     = 4 << 10
	fixedLeafBuffers     = 2
	byteArrayLeafBuffers = 4
)

// FixedMemory estimates what the writer holds in memory besides its rows
// and the encoded bytes it has written out: the cost of having it open,
// which a writer per partition value multiplies. An upper bound, within
// about 10%.
func (w *FileWriter) FixedMemory() int64 {
	n := int64(writerBaseMemory)
	for _, k := range w.ps.kinds {
		if k == parquet.ByteArray || k == parquet.FixedLenByteArray {
			n += byteArrayLeafBuffers * leafBufferMemory
		} else {
			n += fixedLeafBuffers * leafBufferMemory
		}
	}
	return n
}

// Schema is the Parquet schema, with the value constructors for WriteRows.
func (w *FileWriter) Schema() *ParquetSchema { return w.ps }

// NumRows is the number of rows written so far.
func (w *FileWriter) NumRows() int64 { return w.numRows }

// BufferedRows is the number of rows written to the row group still open:
// held by the encoder, not yet in the output.
func (w *FileWriter) BufferedRows() int { return w.inGroup }

// WriteRows writes rows built with the Schema's constructors: one value per
// slot, in column order (see ParquetSchema). A row that does not fit the
// schema is refused (rows before it are written). The rows are not
// retained.
func (w *FileWriter) WriteRows(rows []parquet.Row) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, errors.New("write to a closed data file")
	}
	written := 0
	for len(rows) > 0 {
		chunk := rows[:min(len(rows), w.rowGroupRows-w.inGroup)]
		out, bad := w.leafRows(chunk)
		if bad != nil {
			bad = fmt.Errorf("row %d: %w", written+len(out), bad)
		}
		n, err := w.pw.WriteRows(out)
		written += n
		w.numRows += int64(n)
		w.inGroup += n
		if err != nil {
			w.err = fmt.Errorf("write parquet rows: %w", err)
			return written, w.err
		}
		if bad != nil {
			return written, bad
		}
		if w.inGroup >= w.rowGroupRows {
			if err := w.pw.Flush(); err != nil {
				w.err = fmt.Errorf("flush parquet row group: %w", err)
				return written, w.err
			}
			w.inGroup = 0
		}
		rows = rows[len(chunk):]
	}
	return written, nil
}

// leafRows checks rows and returns them in leaf form, with the
// materialized partition values behind each, and folds them into the
// stats: rows themselves when the file has neither nested nor partition
// columns, else rows built in the writer's own buffers, reused from call
// to call. On a bad row it returns the rows before it and the row's error.
func (w *FileWriter) leafRows(rows []parquet.Row) ([]parquet.Row, error) {
	out := rows
	if w.ps.nested || len(w.partitionRow) > 0 {
		if cap(w.leafBuf) < len(rows) {
			w.leafBuf = append(w.leafBuf[:cap(w.leafBuf)], make([]parquet.Row, len(rows)-cap(w.leafBuf))...)
		}
		out = w.leafBuf[:len(rows)]
	}
	for i, r := range rows {
		var err error
		if w.ps.nested {
			out[i], err = w.ps.expandRow(out[i][:0], r, w.cols)
			out[i] = append(out[i], w.partitionRow...) // primitives: leaves as AppendValue made them
		} else {
			if len(w.partitionRow) > 0 {
				out[i] = append(append(out[i][:0], r...), w.partitionRow...)
			}
			err = w.ps.checkRow(out[i])
		}
		if err != nil {
			return out[:i], err
		}
		w.stats.add(out[i]) // while the row is in cache
	}
	return out, nil
}

// Write writes one row of Go values aligned with the data schema (see Row).
// It allocates; the engine's hot path uses WriteRows.
func (w *FileWriter) Write(r schema.Row) error {
	if len(w.rowBuf) == 0 {
		w.rowBuf = make([]parquet.Row, 1)
	}
	if len(r) != w.cols {
		return fmt.Errorf("row has %d values, the file %d columns before its partition columns", len(r), w.cols)
	}
	row := w.rowBuf[0][:0]
	var err error
	for i, v := range r {
		if row, err = w.ps.AppendValue(row, i, v); err != nil {
			break
		}
	}
	w.rowBuf[0] = row
	if err != nil {
		return err
	}
	_, err = w.WriteRows(w.rowBuf)
	clear(w.rowBuf[0]) // do not pin the caller's strings
	return err
}

// Close writes the last row group and the footer and returns the file's
// statistics. It does not close the underlying writer.
func (w *FileWriter) Close() (FileStats, error) {
	if w.err != nil {
		return FileStats{}, w.err
	}
	if w.closed {
		return FileStats{}, errors.New("data file closed twice")
	}
	w.closed = true
	if err := w.pw.Close(); err != nil {
		w.err = fmt.Errorf("close parquet writer: %w", err)
		return FileStats{}, w.err
	}
	return FileStats{NumRecords: w.numRows, Stats: w.stats.json(w.numRows), Size: w.out.n}, nil
}
