package parquetfile

import (
	"bytes"
	"math"
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
	statNullOnly statKind = iota // nullCount only: boolean, binary, variant
	statInt                      // integers, date (days), timestamps (µs)
	statFloat
	statString
	statDecimal // unscaled, in 128 bits: INT32, INT64 or FIXED_LEN_BYTE_ARRAY
)

// colStats accumulates one column's statistics. Strings keep their own copy
// of the current min and max, copied only when they change, so tracking does
// not allocate per row.
type colStats struct {
	name      []byte // JSON-encoded name
	leaf      int    // its (first) value in a row
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

type statsCollector struct {
	cols        []colStats // the indexed (leading) columns only
	anyEligible bool       // some indexed column gets min/max
}

// newStatsCollector collects the stats of the first numIndexed columns of
// dataSchema, whose values start at leaf[i] in each row.
func newStatsCollector(dataSchema *schema.StructType, leaf []int, numIndexed int) *statsCollector {
	c := &statsCollector{cols: make([]colStats, numIndexed)}
	for i := range c.cols {
		f := dataSchema.Fields[i]
		name, _ := jsonenc.Marshal(f.Name)
		cs := colStats{name: name, leaf: leaf[i], typ: f.Type}
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
		if cs.kind != statNullOnly {
			c.anyEligible = true
		}
		c.cols[i] = cs
	}
	return c
}

// add folds one (already validated) row into the statistics.
func (c *statsCollector) add(row parquet.Row) {
	for i := range c.cols {
		cs := &c.cols[i]
		v := row[cs.leaf] // a variant's metadata: null when the variant is
		if v.IsNull() {
			cs.nulls++
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

// json renders the Delta stats JSON, columns in schema order. Shapes follow
// Spark's StatisticsCollection: minValues/maxValues are left out when no
// indexed column is eligible for them (and are {} when all eligible columns
// are all-null), nullCount is left out when no column is indexed.
func (c *statsCollector) json(numRecords int64) string {
	b := make([]byte, 0, 64+48*len(c.cols))
	b = append(b, `{"numRecords":`...)
	b = strconv.AppendInt(b, numRecords, 10)
	if c.anyEligible {
		b = append(b, `,"minValues":{`...)
		b = c.appendBounds(b, false)
		b = append(b, `},"maxValues":{`...)
		b = c.appendBounds(b, true)
		b = append(b, '}')
	}
	if len(c.cols) > 0 {
		b = append(b, `,"nullCount":{`...)
		for i := range c.cols {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, c.cols[i].name...)
			b = append(b, ':')
			b = strconv.AppendInt(b, c.cols[i].nulls, 10)
		}
		b = append(b, '}')
	}
	b = append(b, '}')
	return string(b)
}

func (c *statsCollector) appendBounds(b []byte, isMax bool) []byte {
	first := true
	for i := range c.cols {
		cs := &c.cols[i]
		if !cs.has || cs.kind == statNullOnly || cs.nonFinite {
			continue
		}
		var val []byte
		switch cs.kind {
		case statInt:
			x := cs.minI
			if isMax {
				x = cs.maxI
			}
			val = appendIntStat(nil, cs.typ, x)
		case statFloat:
			x := cs.minF
			if isMax {
				x = cs.maxF
			}
			val = appendFloatStat(nil, x, cs.typ == schema.Float)
		case statString:
			var s string
			if isMax {
				var ok bool
				if s, ok = TruncateMaxString(string(cs.maxS), StatsStringPrefix); !ok {
					continue // Spark writes no max when no short bound exists
				}
			} else {
				s = TruncateMinString(string(cs.minS), StatsStringPrefix)
			}
			val, _ = jsonenc.Marshal(s)
		case statDecimal:
			x := cs.minD
			if isMax {
				x = cs.maxD
			}
			val = appendDecimalStat(nil, x.big(), cs.typ.(schema.DecimalType).Scale)
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, cs.name...)
		b = append(b, ':')
		b = append(b, val...)
	}
	return b
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
