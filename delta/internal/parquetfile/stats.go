package parquetfile

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta/internal/jsonenc"
	"github.com/deltaflow/deltaflow/delta/schema"
)

// StatsStringPrefix is Spark's delta.dataSkipping.stringPrefixLength: string
// min/max statistics keep this many characters.
const StatsStringPrefix = 32

type statKind uint8

const (
	statNullOnly statKind = iota // nullCount only: boolean, binary, variant, array, map
	statInt                      // integers, date (days), timestamps (µs)
	statFloat
	statString
	statDecimal // unscaled, in 128 bits: INT32, INT64 or FIXED_LEN_BYTE_ARRAY
)

// colStats accumulates the statistics of one stats column: a top-level
// column or struct field that is not a struct (an array or map is one, of
// nullCount only). Strings keep their own copy of the current min and max,
// copied only when they change, so tracking does not allocate per row.
type colStats struct {
	leaf      int // its first leaf
	present   int // the definition level at which it is not null
	typ       schema.DataType
	kind      statKind
	int32Phys bool // values arrive as INT32 (integer, short, byte, date)
	has       bool // at least one non-null value seen
	nonFinite bool // a NaN or ±Inf was seen: min/max cannot be written
	nulls     int64
	minI      int64
	maxI      int64
	minF      float64
	maxF      float64
	minS      []byte
	maxS      []byte
	minD      decimal128
	maxD      decimal128
}

// statsField is a field of the stats objects (minValues, maxValues,
// nullCount), which nest like the schema: a stats column, or a struct of
// fields.
type statsField struct {
	name   []byte // JSON-encoded physical name
	col    int    // index in statsCollector.cols; -1 for a struct
	fields []statsField
	bounds bool // it has min/max: an eligible column, or a struct holding one
}

type statsCollector struct {
	cols   []colStats   // the indexed stats columns, in schema order
	fields []statsField // the top-level columns among them
	// With nested columns a leaf may hold several values in a row, so a
	// row's values are found through first, each leaf's first value.
	nested bool
	first  []int
}

// newStatsCollector collects the stats of the leading statsCols columns of
// ps as Spark's StatisticsCollection does: min/max (of numbers, dates,
// timestamps, strings and decimals, struct fields included) and nullCount
// (of every column and struct field, arrays and maps included, but not of
// anything inside an array or map), for the first numIndexed stats columns
// in schema order, struct fields counted one by one (its truncateSchema).
func newStatsCollector(ps *ParquetSchema, statsCols int, opts WriterOptions) *statsCollector {
	c := &statsCollector{nested: ps.nested}
	if c.nested {
		c.first = make([]int, len(ps.kinds))
	}
	budget := opts.numIndexedCols(countStatsColumns(ps.fields[:statsCols]))
	leaf := 0
	c.fields = c.addFields(nil, ps.fields[:statsCols], true, &leaf, 0, &budget)
	return c
}

func countStatsColumns(fields []schema.StructField) int {
	n := 0
	for _, f := range fields {
		if st, ok := f.Type.(*schema.StructType); ok {
			n += countStatsColumns(st.Fields)
		} else {
			n++
		}
	}
	return n
}

// addFields appends the stats fields of fields, whose leaves start at
// *leaf and are defined at def, while *budget stats columns remain.
// Top-level columns are named as given (physical names under column
// mapping), struct fields by their physical names, as in the file.
func (c *statsCollector) addFields(dst []statsField, fields []schema.StructField, top bool, leaf *int, def int, budget *int) []statsField {
	for i := range fields {
		if *budget == 0 {
			break
		}
		f := &fields[i]
		name := f.Name
		if !top {
			name = schema.PhysicalName(f)
		}
		jname, _ := jsonenc.Marshal(name)
		d := def + boolInt(f.Nullable)
		if st, ok := f.Type.(*schema.StructType); ok {
			sf := statsField{name: jname, col: -1}
			sf.fields = c.addFields(nil, st.Fields, false, leaf, d, budget)
			for _, ch := range sf.fields {
				sf.bounds = sf.bounds || ch.bounds
			}
			dst = append(dst, sf)
			continue
		}
		cs := colStats{leaf: *leaf, present: d, typ: f.Type}
		switch f.Type {
		case schema.Long, schema.Timestamp, schema.TimestampNTZ:
			cs.kind = statInt
		case schema.Integer, schema.Short, schema.Byte, schema.Date:
			cs.kind, cs.int32Phys = statInt, true
		case schema.Float, schema.Double:
			cs.kind = statFloat
		case schema.String:
			cs.kind = statString
		}
		if _, ok := f.Type.(schema.DecimalType); ok {
			cs.kind = statDecimal
		}
		*leaf += typeLeaves(f.Type)
		*budget--
		c.cols = append(c.cols, cs)
		dst = append(dst, statsField{name: jname, col: len(c.cols) - 1, bounds: cs.kind != statNullOnly})
	}
	return dst
}

// add folds one (already validated) row into the statistics.
func (c *statsCollector) add(row parquet.Row) {
	if c.nested {
		for i := len(row) - 1; i >= 0; i-- {
			c.first[row[i].Column()] = i
		}
	}
	for i := range c.cols {
		cs := &c.cols[i]
		p := cs.leaf
		if c.nested {
			p = c.first[cs.leaf]
		}
		// A variant's metadata, an array's or map's first leaf: null
		// below its present level when the column is null. A present
		// empty (or all-null) array or map has a null there too.
		v := row[p]
		if v.IsNull() {
			if v.DefinitionLevel() < cs.present {
				cs.nulls++
			}
			continue
		}
		switch cs.kind {
		case statInt:
			var x int64
			if cs.int32Phys {
				x = int64(v.Int32())
			} else {
				x = v.Int64()
			}
			if !cs.has {
				cs.minI, cs.maxI, cs.has = x, x, true
			} else if x < cs.minI {
				cs.minI = x
			} else if x > cs.maxI {
				cs.maxI = x
			}
		case statFloat:
			var x float64
			if cs.typ == schema.Float {
				x = float64(v.Float())
			} else {
				x = v.Double()
			}
			if math.IsNaN(x) || math.IsInf(x, 0) {
				cs.nonFinite = true
			}
			if !cs.has {
				cs.minF, cs.maxF, cs.has = x, x, true
			} else if x < cs.minF {
				cs.minF = x
			} else if x > cs.maxF {
				cs.maxF = x
			}
		case statString:
			b := v.ByteArray()
			if !cs.has {
				cs.minS = append(cs.minS[:0], b...)
				cs.maxS = append(cs.maxS[:0], b...)
				cs.has = true
			} else if bytes.Compare(b, cs.minS) < 0 {
				cs.minS = append(cs.minS[:0], b...)
			} else if bytes.Compare(b, cs.maxS) > 0 {
				cs.maxS = append(cs.maxS[:0], b...)
			}
		case statDecimal:
			x := decimalValue(v)
			if !cs.has {
				cs.minD, cs.maxD, cs.has = x, x, true
			} else if x.less(cs.minD) {
				cs.minD = x
			} else if cs.maxD.less(x) {
				cs.maxD = x
			}
		default:
			cs.has = true
		}
	}
}

// json renders the Delta stats JSON, columns in schema order, structs as
// nested objects. Shapes follow Spark's StatisticsCollection:
// minValues/maxValues are left out when no indexed column is eligible for
// them (and are {} when all eligible columns are all-null; a struct with
// an eligible field is there, {} too when all its are null), nullCount is
// left out when no column is indexed.
func (c *statsCollector) json(numRecords int64) string {
	b := make([]byte, 0, 64+48*len(c.cols))
	b = append(b, `{"numRecords":`...)
	b = strconv.AppendInt(b, numRecords, 10)
	if slices.ContainsFunc(c.fields, func(f statsField) bool { return f.bounds }) {
		b = append(b, `,"minValues":{`...)
		b = c.appendBounds(b, c.fields, false)
		b = append(b, `},"maxValues":{`...)
		b = c.appendBounds(b, c.fields, true)
		b = append(b, '}')
	}
	if len(c.fields) > 0 {
		b = append(b, `,"nullCount":{`...)
		b = c.appendNullCounts(b, c.fields)
		b = append(b, '}')
	}
	b = append(b, '}')
	return string(b)
}

func (c *statsCollector) appendNullCounts(b []byte, fields []statsField) []byte {
	for i, f := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, f.name...)
		b = append(b, ':')
		if f.col < 0 {
			b = append(b, '{')
			b = c.appendNullCounts(b, f.fields)
			b = append(b, '}')
		} else {
			b = strconv.AppendInt(b, c.cols[f.col].nulls, 10)
		}
	}
	return b
}

func (c *statsCollector) appendBounds(b []byte, fields []statsField, isMax bool) []byte {
	first := true
	for _, f := range fields {
		if !f.bounds {
			continue
		}
		var val []byte
		if f.col < 0 {
			val = append(c.appendBounds(append(val, '{'), f.fields, isMax), '}')
		} else if val = c.cols[f.col].bound(isMax); val == nil {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, f.name...)
		b = append(b, ':')
		b = append(b, val...)
	}
	return b
}

// bound is the JSON of the column's min or max, nil when it has none.
func (cs *colStats) bound(isMax bool) []byte {
	if !cs.has || cs.kind == statNullOnly || cs.nonFinite {
		return nil
	}
	switch cs.kind {
	case statInt:
		x := cs.minI
		if isMax {
			x = cs.maxI
		}
		return appendIntStat(nil, cs.typ, x)
	case statFloat:
		x := cs.minF
		if isMax {
			x = cs.maxF
		}
		return appendFloatStat(nil, x, cs.typ == schema.Float)
	case statString:
		var s string
		if isMax {
			var ok bool
			if s, ok = TruncateMaxString(string(cs.maxS), StatsStringPrefix); !ok {
				return nil // Spark writes no max when no short bound exists
			}
		} else {
			s = TruncateMinString(string(cs.minS), StatsStringPrefix)
		}
		val, _ := jsonenc.Marshal(s)
		return val
	case statDecimal:
		x := cs.minD
		if isMax {
			x = cs.maxD
		}
		return appendDecimalStat(nil, x.big(), cs.typ.(schema.DecimalType).Scale)
	}
	return nil
}

func appendIntStat(b []byte, t schema.DataType, x int64) []byte {
	switch t {
	case schema.Date:
		b = time.Unix(x*86400, 0).UTC().AppendFormat(append(b, '"'), time.DateOnly)
		return append(b, '"')
	case schema.Timestamp, schema.TimestampNTZ:
		// Truncated (floored) to milliseconds like Spark; readers widen the
		// max by 1 ms.
		ms := x / 1000
		if x%1000 < 0 {
			ms--
		}
		layout := "2006-01-02T15:04:05.000Z"
		if t == schema.TimestampNTZ {
			layout = "2006-01-02T15:04:05.000"
		}
		b = time.UnixMilli(ms).UTC().AppendFormat(append(b, '"'), layout)
		return append(b, '"')
	}
	return strconv.AppendInt(b, x, 10)
}

// appendFloatStat writes a finite float as a JSON number, with ".0" on whole
// numbers as Spark writes them.
func appendFloatStat(b []byte, x float64, isFloat32 bool) []byte {
	bits := 64
	if isFloat32 {
		bits = 32
	}
	start := len(b)
	abs := math.Abs(x)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		b = strconv.AppendFloat(b, x, 'e', -1, bits)
	} else {
		b = strconv.AppendFloat(b, x, 'f', -1, bits)
	}
	if !bytes.ContainsAny(b[start:], ".e") {
		b = append(b, ".0"...)
	}
	return b
}

// TruncateMinString cuts a string min statistic to its first prefixLen
// characters (code points), as Spark's substring(min(c), 0, prefixLen).
func TruncateMinString(s string, prefixLen int) string {
	n := 0
	for i := range s {
		if n == prefixLen {
			return s[:i]
		}
		n++
	}
	return s
}

// TruncateMaxString cuts a string max statistic exactly as Spark's
// StatisticsCollection.truncateMaxStringAgg: lengths count UTF-16 code units
// (Java chars), a surrogate pair is never split, and a tie-breaker is
// appended so the result stays ≥ every value with the same prefix: U+007F
// when the first dropped character is below U+007F, otherwise U+10FFFF
// (U+10FFFF characters are kept, as no character sorts above them). ok is
// false when no bound within 2×prefixLen units exists; Spark then writes no
// max for the column.
func TruncateMaxString(s string, prefixLen int) (max string, ok bool) {
	if utf16Len(s) <= prefixLen {
		return s, true
	}
	if prefixLen <= 0 {
		return "", false
	}
	units, i := 0, 0
	for units < prefixLen { // start with the min prefix, pairs kept whole
		r, size := utf8.DecodeRuneInString(s[i:])
		units += utf16RuneLen(r)
		i += size
	}
	for units <= 2*prefixLen {
		if i >= len(s) {
			return s, true
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.MaxRune:
			units += 2
			i += size
		case r < 0x7f:
			return s[:i] + "\x7f", true
		default:
			return s[:i] + string(utf8.MaxRune), true
		}
	}
	return "", false
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16RuneLen(r)
	}
	return n
}

func utf16RuneLen(r rune) int {
	if r >= 0x10000 {
		return 2
	}
	return 1
}
