package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"

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
		for r, err := range scanDataFile(ctx, store, schema, partitionColumns, add) {
			if !yield(r.row, err) {
				return
			}
		}
	}
}

// scannedRow is a row of a data file with its physical index in the file
// (deleted rows count), which row tracking's row IDs are based on.
type scannedRow struct {
	index uint64
	row   Row
}

// scanDataFile is DataFileRows with each row's physical index.
func scanDataFile(ctx context.Context, store storage.Store, schema *StructType, partitionColumns []string, add *Add) iter.Seq2[scannedRow, error] {
	return func(yield func(scannedRow, error) bool) {
		key, err := StoreKey(store, add.Path)
		if err != nil {
			yield(scannedRow{}, fmt.Errorf("read data file %s: %w", add.Path, err))
			return
		}
		fail := func(err error) { yield(scannedRow{}, fmt.Errorf("read data file %s: %w", key, err)) }
		r, err := store.Open(ctx, key)
		if err != nil {
			fail(err)
			return
		}
		defer r.Close()
		f, err := parquet.OpenFile(r, r.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
		if err != nil {
			fail(err)
			return
		}
		fr, err := newFileRowReader(f, schema, partitionColumns, add.PartitionValues)
		if err != nil {
			fail(err)
			return
		}
		// Rows the deletion vector marks (by index in the file) are skipped.
		deleted, err := LoadDeletionVector(ctx, store, add.DeletionVector)
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
					row, err := fr.convert(pr)
					if err != nil {
						rows.Close()
						fail(err)
						return
					}
					if !yield(scannedRow{index - 1, row}, nil) {
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

// fileRowReader turns rows of one Parquet file into table rows.
type fileRowReader struct {
	schema *parquet.Schema
	fields []fieldReader // one per table column
	nested bool          // some column needs parquet-go's reconstruction
	start  []int         // per leaf column: first value index in the current row
	end    []int
}

type fieldReader struct {
	kind     int // fieldConst, fieldLeaf, fieldNested, fieldVariant
	constant any
	leaf     int
	conv     func(parquet.Value) (any, error)
	name     string
	typ      DataType
	variant  *variantReader
}

const (
	fieldConst = iota
	fieldLeaf
	fieldNested
	fieldVariant
)

func newFileRowReader(f *parquet.File, schema *StructType, partitionColumns []string, partitionValues map[string]*string) (*fileRowReader, error) {
	fs := f.Schema()
	fr := &fileRowReader{schema: fs, fields: make([]fieldReader, len(schema.Fields))}
	// Leaf column index of each top-level file field.
	leafStart := map[string]int{}
	fileFields := map[string]parquet.Field{}
	byID := map[int]string{} // Parquet field_id → name
	col := 0
	for _, ff := range fs.Fields() {
		leafStart[ff.Name()] = col
		fileFields[ff.Name()] = ff
		if id := ff.ID(); id != 0 {
			byID[id] = ff.Name()
		}
		col += countLeaves(ff)
	}
	fr.start = make([]int, col)
	fr.end = make([]int, col)
	for i, sf := range schema.Fields {
		fd := &fr.fields[i]
		// With column mapping, files, partition values and nested values
		// use physical names; a file without them may still carry the
		// column ids as field ids.
		phys := PhysicalName(&schema.Fields[i])
		fd.name, fd.typ = phys, sf.Type
		if slices.Contains(partitionColumns, sf.Name) {
			v, err := ParsePartitionValue(sf.Type, partitionValues[phys])
			if err != nil {
				return nil, fmt.Errorf("partition column %q: %w", sf.Name, err)
			}
			fd.constant = v
			continue
		}
		ff, ok := fileFields[phys]
		if id, hasID := fieldID(&schema.Fields[i]); !ok && hasID && byID[id] != "" {
			phys = byID[id]
			fd.name, ff, ok = phys, fileFields[phys], true
		}
		if !ok {
			continue // not in this file: null
		}
		if sf.Type == Variant {
			vr, err := newVariantReader(ff, leafStart[phys])
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", sf.Name, err)
			}
			fd.kind, fd.variant = fieldVariant, vr
			continue
		}
		if ff.Leaf() && !ff.Repeated() {
			conv, err := leafConverter(sf.Type, ff)
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", sf.Name, err)
			}
			fd.kind, fd.leaf, fd.conv = fieldLeaf, leafStart[phys], conv
			continue
		}
		fd.kind = fieldNested
		fr.nested = true
	}
	return fr, nil
}

func countLeaves(n parquet.Node) int {
	if n.Leaf() {
		return 1
	}
	c := 0
	for _, f := range n.Fields() {
		c += countLeaves(f)
	}
	return c
}

func (fr *fileRowReader) convert(pr parquet.Row) (Row, error) {
	// Values come in column order; repeated columns may hold several.
	for i := range fr.start {
		fr.start[i], fr.end[i] = -1, -1
	}
	for i, v := range pr {
		c := v.Column()
		if fr.start[c] < 0 {
			fr.start[c] = i
		}
		fr.end[c] = i + 1
	}
	var nested map[string]any
	if fr.nested {
		nested = map[string]any{}
		if err := fr.schema.Reconstruct(&nested, pr); err != nil {
			return nil, fmt.Errorf("reconstruct nested values: %w", err)
		}
	}
	row := make(Row, len(fr.fields))
	for i := range fr.fields {
		fd := &fr.fields[i]
		switch fd.kind {
		case fieldConst:
			row[i] = fd.constant
		case fieldLeaf:
			s := fr.start[fd.leaf]
			if s < 0 || pr[s].IsNull() {
				continue
			}
			v, err := fd.conv(pr[s])
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", fd.name, err)
			}
			row[i] = v
		case fieldNested:
			row[i] = nestedValue(fd.typ, nested[fd.name])
		case fieldVariant:
			v, err := fd.variant.read(pr, fr.start, fr.end)
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", fd.name, err)
			}
			row[i] = v
		}
	}
	return row, nil
}

// leafConverter returns the conversion of a file leaf to the Go value of
// Delta type t, based on the physical and logical types in the file.
func leafConverter(t DataType, node parquet.Node) (func(parquet.Value) (any, error), error) {
	pt := node.Type()
	kind := pt.Kind()
	var lt format.LogicalTypeValue
	if l := pt.LogicalType(); l != nil {
		lt = l.Value
	}
	var ct deprecated.ConvertedType = -1
	if c := pt.ConvertedType(); c != nil {
		ct = *c
	}
	mismatch := fmt.Errorf("file type %s cannot be read as %s", pt, typeName(t))
	intOf := func(v parquet.Value) int64 {
		if kind == parquet.Int32 {
			return int64(v.Int32())
		}
		return v.Int64()
	}
	isInt := kind == parquet.Int32 || kind == parquet.Int64
	switch t {
	case String:
		if kind == parquet.ByteArray || kind == parquet.FixedLenByteArray {
			return func(v parquet.Value) (any, error) { return string(v.ByteArray()), nil }, nil
		}
	case Binary:
		if kind == parquet.ByteArray || kind == parquet.FixedLenByteArray {
			return func(v parquet.Value) (any, error) { return append([]byte{}, v.ByteArray()...), nil }, nil
		}
	case Long:
		if isInt {
			return func(v parquet.Value) (any, error) { return intOf(v), nil }, nil
		}
	case Integer:
		if isInt {
			return func(v parquet.Value) (any, error) { return int32(intOf(v)), nil }, nil
		}
	case Short:
		if isInt {
			return func(v parquet.Value) (any, error) { return int16(intOf(v)), nil }, nil
		}
	case Byte:
		if isInt {
			return func(v parquet.Value) (any, error) { return int8(intOf(v)), nil }, nil
		}
	case Float:
		if kind == parquet.Float {
			return func(v parquet.Value) (any, error) { return v.Float(), nil }, nil
		}
	case Double:
		switch {
		case kind == parquet.Double:
			return func(v parquet.Value) (any, error) { return v.Double(), nil }, nil
		case kind == parquet.Float: // widened column (type widening)
			return func(v parquet.Value) (any, error) { return float64(v.Float()), nil }, nil
		case isInt: // an integer column widened to double
			return func(v parquet.Value) (any, error) { return float64(intOf(v)), nil }, nil
		}
	case Boolean:
		if kind == parquet.Boolean {
			return func(v parquet.Value) (any, error) { return v.Boolean(), nil }, nil
		}
	case Date:
		if kind == parquet.Int32 {
			return func(v parquet.Value) (any, error) {
				return time.Unix(int64(v.Int32())*86400, 0).UTC(), nil
			}, nil
		}
	case Timestamp, TimestampNTZ:
		switch kind {
		case parquet.Int96:
			return func(v parquet.Value) (any, error) { return int96Time(v.Int96()), nil }, nil
		case parquet.Int64:
			unit := time.Microsecond
			if ts, ok := lt.(*format.TimestampType); ok {
				switch ts.Unit.Value.(type) {
				case *format.MilliSeconds:
					unit = time.Millisecond
				case *format.NanoSeconds:
					unit = time.Nanosecond
				}
			} else if ct == deprecated.TimestampMillis {
				unit = time.Millisecond
			}
			return func(v parquet.Value) (any, error) { return unixUnit(v.Int64(), unit), nil }, nil
		}
	}
	if dt, ok := t.(DecimalType); ok {
		scale := 0 // an integer column widened to decimal
		if d, ok := lt.(*format.DecimalType); ok {
			scale = int(d.Scale)
		}
		switch kind {
		case parquet.Int32, parquet.Int64:
			return func(v parquet.Value) (any, error) {
				return formatDecimal(big.NewInt(intOf(v)), scale, dt.Scale), nil
			}, nil
		case parquet.ByteArray, parquet.FixedLenByteArray:
			return func(v parquet.Value) (any, error) {
				return formatDecimal(bigFromTwosComplement(v.ByteArray()), scale, dt.Scale), nil
			}, nil
		}
	}
	return nil, mismatch
}

// int96Time decodes Spark's legacy INT96 timestamp: nanoseconds of the day
// (little-endian int64) then the Julian day number.
func int96Time(x deprecated.Int96) time.Time {
	nanos := int64(uint64(x[1])<<32 | uint64(x[0]))
	days := int64(x[2]) - 2440588 // Julian day of 1970-01-01
	return time.Unix(days*86400, nanos).UTC()
}

func unixUnit(n int64, unit time.Duration) time.Time {
	switch unit {
	case time.Millisecond:
		return time.UnixMilli(n).UTC()
	case time.Nanosecond:
		return time.Unix(0, n).UTC()
	}
	return time.UnixMicro(n).UTC()
}

func bigFromTwosComplement(b []byte) *big.Int {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return n
}

// formatDecimal renders unscaled×10^-fileScale with outScale fraction
// digits, e.g. (1230, 2, 2) → "12.30".
func formatDecimal(unscaled *big.Int, fileScale, outScale int) string {
	if outScale > fileScale {
		unscaled = new(big.Int).Mul(unscaled, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(outScale-fileScale)), nil))
	} else if outScale < fileScale {
		unscaled = new(big.Int).Quo(unscaled, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(fileScale-outScale)), nil))
	}
	s := unscaled.String()
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if outScale > 0 {
		if len(s) <= outScale {
			s = strings.Repeat("0", outScale-len(s)+1) + s
		}
		s = s[:len(s)-outScale] + "." + s[len(s)-outScale:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// nestedValue converts a value reconstructed by parquet-go towards the Go
// types documented on Row, as far as it can: structs become map[string]any,
// arrays []any, maps map[string]any with rendered keys; primitive values are
// converted when their Go type allows, and kept as they are otherwise.
func nestedValue(t DataType, v any) any {
	if v == nil {
		return nil
	}
	switch t := t.(type) {
	case *StructType:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := make(map[string]any, len(t.Fields))
		for i, f := range t.Fields {
			out[f.Name] = nestedValue(f.Type, m[PhysicalName(&t.Fields[i])])
		}
		return out
	case *ArrayType:
		a, ok := v.([]any)
		if !ok {
			return v
		}
		out := make([]any, len(a))
		for i, e := range a {
			out[i] = nestedValue(t.ElementType, e)
		}
		return out
	case *MapType:
		out := map[string]any{}
		switch m := v.(type) {
		case map[string]any:
			for k, e := range m {
				out[k] = nestedValue(t.ValueType, e)
			}
		case map[any]any:
			for k, e := range m {
				out[fmt.Sprint(nestedValue(t.KeyType, k))] = nestedValue(t.ValueType, e)
			}
		default:
			return v
		}
		return out
	case PrimitiveType:
		return nestedPrimitive(t, v)
	}
	return v
}

func nestedPrimitive(t PrimitiveType, v any) any {
	n, isInt := AsInt64(v)
	switch t {
	case Long:
		if isInt {
			return n
		}
	case Integer:
		if isInt {
			return int32(n)
		}
	case Short:
		if isInt {
			return int16(n)
		}
	case Byte:
		if isInt {
			return int8(n)
		}
	case Double:
		if f, ok := AsFloat64(v); ok {
			return f
		}
	case String:
		if b, ok := v.([]byte); ok {
			return string(b)
		}
	case Date:
		if isInt {
			return time.Unix(n*86400, 0).UTC()
		}
	case Timestamp, TimestampNTZ:
		switch x := v.(type) {
		case time.Time:
			return x.UTC()
		case deprecated.Int96:
			return int96Time(x)
		}
		if isInt {
			return time.UnixMicro(n).UTC()
		}
	}
	if tm, ok := v.(time.Time); ok {
		return tm.UTC()
	}
	return v
}
