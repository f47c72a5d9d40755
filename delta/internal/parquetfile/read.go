package parquetfile

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"

	"github.com/deltaflow/deltaflow/delta/schema"
)

// RowReader turns rows of one Parquet file into table rows.
type RowReader struct {
	fields []fieldReader // one per table column
	start  []int         // per leaf column: first value index in the current row
	end    []int
	pos    []int // per leaf column: the next value a nested column reads
}

type fieldReader struct {
	kind     int // fieldConst, fieldLeaf, fieldNested, fieldVariant
	constant any
	leaf     int
	conv     func(parquet.Value) (any, error)
	name     string
	variant  *variantReader
	nested   *nestedReader
}

const (
	fieldConst = iota
	fieldLeaf
	fieldNested
	fieldVariant
)

// NewRowReader reads f's rows as rows of table: file columns matched by
// physical name or field id (a column missing from the file reads as
// null), partition columns from partitionValues.
func NewRowReader(f *parquet.File, table *schema.StructType, partitionColumns []string, partitionValues map[string]*string) (*RowReader, error) {
	fs := f.Schema()
	fr := &RowReader{fields: make([]fieldReader, len(table.Fields))}
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
		col += CountLeaves(ff)
	}
	fr.start = make([]int, col)
	fr.end = make([]int, col)
	fr.pos = make([]int, col)
	for i, sf := range table.Fields {
		fd := &fr.fields[i]
		// With column mapping, files, partition values and nested values
		// use physical names; a file without them may still carry the
		// column ids as field ids.
		phys := schema.PhysicalName(&table.Fields[i])
		fd.name = phys
		if slices.Contains(partitionColumns, sf.Name) {
			v, err := schema.ParsePartitionValue(sf.Type, partitionValues[phys])
			if err != nil {
				return nil, fmt.Errorf("partition column %q: %w", sf.Name, err)
			}
			fd.constant = v
			continue
		}
		ff, ok := fileFields[phys]
		if id, hasID := schema.FieldID(&table.Fields[i]); !ok && hasID && byID[id] != "" {
			phys = byID[id]
			fd.name, ff, ok = phys, fileFields[phys], true
		}
		if !ok {
			continue // not in this file: null
		}
		if sf.Type == schema.Variant {
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
		nr, err := newNestedReader(sf.Type, ff, leafStart[phys], 0, 0)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", sf.Name, err)
		}
		fd.kind, fd.nested = fieldNested, nr
	}
	return fr, nil
}

// CountLeaves is the number of leaf columns of n.
func CountLeaves(n parquet.Node) int {
	if n.Leaf() {
		return 1
	}
	c := 0
	for _, f := range n.Fields() {
		c += CountLeaves(f)
	}
	return c
}

func (fr *RowReader) Convert(pr parquet.Row) (schema.Row, error) {
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
	copy(fr.pos, fr.start)
	row := make(schema.Row, len(fr.fields))
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
			cur := nestedCursor{row: pr, pos: fr.pos, end: fr.end}
			v, err := cur.read(fd.nested)
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", fd.name, err)
			}
			row[i] = v
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
func leafConverter(t schema.DataType, node parquet.Node) (func(parquet.Value) (any, error), error) {
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
	mismatch := fmt.Errorf("file type %s cannot be read as %s", pt, schema.TypeName(t))
	intOf := func(v parquet.Value) int64 {
		if kind == parquet.Int32 {
			return int64(v.Int32())
		}
		return v.Int64()
	}
	isInt := kind == parquet.Int32 || kind == parquet.Int64
	switch t {
	case schema.String:
		if kind == parquet.ByteArray || kind == parquet.FixedLenByteArray {
			return func(v parquet.Value) (any, error) { return string(v.ByteArray()), nil }, nil
		}
	case schema.Binary:
		if kind == parquet.ByteArray || kind == parquet.FixedLenByteArray {
			return func(v parquet.Value) (any, error) { return append([]byte{}, v.ByteArray()...), nil }, nil
		}
	case schema.Long:
		if isInt {
			return func(v parquet.Value) (any, error) { return intOf(v), nil }, nil
		}
	case schema.Integer:
		if isInt {
			return func(v parquet.Value) (any, error) { return int32(intOf(v)), nil }, nil
		}
	case schema.Short:
		if isInt {
			return func(v parquet.Value) (any, error) { return int16(intOf(v)), nil }, nil
		}
	case schema.Byte:
		if isInt {
			return func(v parquet.Value) (any, error) { return int8(intOf(v)), nil }, nil
		}
	case schema.Float:
		if kind == parquet.Float {
			return func(v parquet.Value) (any, error) { return v.Float(), nil }, nil
		}
	case schema.Double:
		switch {
		case kind == parquet.Double:
			return func(v parquet.Value) (any, error) { return v.Double(), nil }, nil
		case kind == parquet.Float: // widened column (type widening)
			return func(v parquet.Value) (any, error) { return float64(v.Float()), nil }, nil
		case isInt: // an integer column widened to double
			return func(v parquet.Value) (any, error) { return float64(intOf(v)), nil }, nil
		}
	case schema.Boolean:
		if kind == parquet.Boolean {
			return func(v parquet.Value) (any, error) { return v.Boolean(), nil }, nil
		}
	case schema.Date:
		if kind == parquet.Int32 {
			return func(v parquet.Value) (any, error) {
				return time.Unix(int64(v.Int32())*86400, 0).UTC(), nil
			}, nil
		}
	case schema.Timestamp, schema.TimestampNTZ:
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
	if dt, ok := t.(schema.DecimalType); ok {
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
