package filter

import (
	"bytes"
	"cmp"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/deltaflow/deltaflow/delta"
)

// Bound is an Expr checked against a table schema, with each literal
// converted to its column's Go type (see delta.Row). Safe for concurrent use.
type Bound struct {
	expr  *Expr
	conds []boundCond
}

type boundCond struct {
	Cond
	idx       int // column index in the schema (and in rows)
	typ       delta.DataType
	partition bool
	lit       any // nil for null
}

// BindError reports a column or literal that does not fit the schema; Pos is
// the 1-based character position of the comparison.
type BindError struct {
	Pos  int
	Cond string
	Msg  string
}

func (e *BindError) Error() string {
	return fmt.Sprintf("filter: at position %d, %s: %s", e.Pos, e.Cond, e.Msg)
}

// Bind checks e against the table schema: every column must exist (top-level
// fields only) and every literal must convert to its column's type.
func Bind(e *Expr, schema *delta.StructType, partitionColumns []string) (*Bound, error) {
	b := &Bound{expr: e}
	for _, c := range e.Conds {
		fail := func(format string, args ...any) error {
			return &BindError{Pos: c.Pos, Cond: c.String(), Msg: fmt.Sprintf(format, args...)}
		}
		idx := schema.Index(c.Column)
		if idx < 0 {
			names := make([]string, len(schema.Fields))
			for i, f := range schema.Fields {
				names[i] = f.Name
			}
			return nil, fail("no column %q (columns: %s)", c.Column, strings.Join(names, ", "))
		}
		typ := schema.Fields[idx].Type
		lit, err := convert(typ, c.Value)
		if err != nil {
			return nil, fail("column %s is %s: %v", c.Column, typ, err)
		}
		b.conds = append(b.conds, boundCond{Cond: c, idx: idx, typ: typ, partition: slices.Contains(partitionColumns, c.Column), lit: lit})
	}
	return b, nil
}

// String renders the filter (as the commitInfo predicate, for example).
func (b *Bound) String() string { return b.expr.String() }

// OnlyPartitionColumns returns an error naming the first comparison on a
// column that is not a partition column.
func (b *Bound) OnlyPartitionColumns() error {
	for _, c := range b.conds {
		if !c.partition {
			return &BindError{Pos: c.Pos, Cond: c.String(), Msg: fmt.Sprintf("%s is not a partition column", c.Column)}
		}
	}
	return nil
}

// Match reports whether the row (aligned with the schema) satisfies every
// comparison.
func (b *Bound) Match(row delta.Row) bool {
	for i := range b.conds {
		if !b.conds[i].match(row[b.conds[i].idx]) {
			return false
		}
	}
	return true
}

// MatchPartition evaluates the comparisons on partition columns against a
// file's partitionValues; the others cannot be decided there and pass. A
// partition value that does not parse as its column's type is an error.
func (b *Bound) MatchPartition(partitionValues map[string]*string) (bool, error) {
	for i := range b.conds {
		c := &b.conds[i]
		if !c.partition {
			continue
		}
		v, err := delta.ParsePartitionValue(c.typ, partitionValues[c.Column])
		if err != nil {
			return false, fmt.Errorf("partition value of %s: %w", c.Column, err)
		}
		if !c.match(v) {
			return false, nil
		}
	}
	return true, nil
}

// MayMatch reports whether a file with these statistics may hold a matching
// row; false proves it holds none. Bounds are used as writers truncate
// them: a timestamp max is floored to the millisecond (so it is widened by
// 1 ms) and a string max of 32 or more characters may be a cut prefix (so
// it is ignored). Missing or unparseable statistics never skip a file.
func (b *Bound) MayMatch(st *delta.Stats) bool {
	if st == nil {
		return true
	}
	for i := range b.conds {
		c := &b.conds[i]
		if !c.partition && !c.mayMatch(st) {
			return false
		}
	}
	return true
}

func (c *boundCond) match(v any) bool {
	if c.lit == nil {
		return (v == nil) == (c.Op == Eq)
	}
	if v == nil {
		return false
	}
	r, ok := compareValues(c.typ, v, c.lit)
	return ok && opHolds(c.Op, r)
}

func opHolds(op Op, r int) bool {
	switch op {
	case Eq:
		return r == 0
	case Ne:
		return r != 0
	case Lt:
		return r < 0
	case Le:
		return r <= 0
	case Gt:
		return r > 0
	default:
		return r >= 0
	}
}

func (c *boundCond) mayMatch(st *delta.Stats) bool {
	nulls, hasNulls := st.NullCount[c.Column]
	allNull := hasNulls && st.NumRecords >= 0 && nulls >= st.NumRecords
	if c.lit == nil {
		if c.Op == Eq {
			return !hasNulls || nulls > 0
		}
		return !allNull
	}
	if allNull {
		return false // comparisons with null are false
	}
	// vsLo and vsHi compare the literal with the bounds.
	vsLo, hasLo := c.compareStat(st.MinValues[c.Column], false)
	vsHi, hasHi := c.compareStat(st.MaxValues[c.Column], true)
	switch c.Op {
	case Eq:
		return !(hasLo && vsLo < 0 || hasHi && vsHi > 0)
	case Lt: // some v < lit needs min < lit
		return !hasLo || vsLo > 0
	case Le:
		return !hasLo || vsLo >= 0
	case Gt:
		return !hasHi || vsHi < 0
	case Ge:
		return !hasHi || vsHi <= 0
	}
	return true // != : the bounds cannot rule it out
}

// compareStat compares the literal with a min or max statistic made a
// conservative bound; ok is false when there is no usable bound.
func (c *boundCond) compareStat(raw any, isMax bool) (r int, ok bool) {
	if raw == nil {
		return 0, false
	}
	v, err := delta.StatValue(c.typ, raw)
	if err != nil {
		return 0, false
	}
	switch x := v.(type) {
	case time.Time:
		if isMax && (c.typ == delta.Timestamp || c.typ == delta.TimestampNTZ) {
			v = x.Add(time.Millisecond)
		}
	case string:
		if isMax && c.typ == delta.String && utf8.RuneCountInString(x) >= delta.StatsStringPrefix {
			return 0, false
		}
	}
	return compareValues(c.typ, c.lit, v)
}

// Compare compares two non-null values of column type t (Go types per
// delta.Row, integers of any width, decimals as strings); ok is false for
// values that cannot be compared (nested types, mismatched Go types).
func Compare(t delta.DataType, a, b any) (int, bool) { return compareValues(t, a, b) }

func compareValues(t delta.DataType, a, b any) (int, bool) {
	if _, ok := t.(delta.DecimalType); ok {
		x, ok1 := toRat(a)
		y, ok2 := toRat(b)
		if !ok1 || !ok2 {
			return 0, false
		}
		return x.Cmp(y), true
	}
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return strings.Compare(x, y), ok
	case []byte:
		y, ok := b.([]byte)
		return bytes.Compare(x, y), ok
	case bool:
		y, ok := b.(bool)
		return cmpBool(x, y), ok
	case time.Time:
		y, ok := b.(time.Time)
		return x.Compare(y), ok
	case float32, float64:
		fx, _ := delta.AsFloat64(a)
		fy, ok := delta.AsFloat64(b)
		return cmp.Compare(fx, fy), ok
	}
	ix, ok1 := delta.AsInt64(a)
	iy, ok2 := delta.AsInt64(b)
	return cmp.Compare(ix, iy), ok1 && ok2
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

func toRat(v any) (*big.Rat, bool) {
	switch x := v.(type) {
	case *big.Rat:
		return x, true
	case string:
		return new(big.Rat).SetString(x)
	}
	return nil, false
}

// timestampLayouts are accepted for timestamp literals, read as UTC unless
// they carry a zone.
var timestampLayouts = []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999", time.DateOnly}

// convert turns a literal into the Go value of column type t.
func convert(t delta.DataType, lit Literal) (any, error) {
	if lit.Kind == LitNull {
		return nil, nil
	}
	want := func(what string) error { return fmt.Errorf("want %s, got %s", what, lit) }
	if _, ok := t.(delta.DecimalType); ok {
		r, ok := new(big.Rat).SetString(lit.Text)
		if lit.Kind != LitNumber || !ok {
			return nil, want("a number")
		}
		return r, nil
	}
	p, ok := t.(delta.PrimitiveType)
	if !ok || p == delta.Variant {
		return nil, fmt.Errorf("nested and variant columns can only be compared with null")
	}
	switch p {
	case delta.String:
		if lit.Kind != LitString {
			return nil, want("a 'quoted string'")
		}
		return lit.Text, nil
	case delta.Binary:
		if lit.Kind != LitString {
			return nil, want("a 'quoted string'")
		}
		return []byte(lit.Text), nil
	case delta.Boolean:
		if lit.Kind != LitBool {
			return nil, want("true or false")
		}
		return lit.Text == "true", nil
	case delta.Long, delta.Integer, delta.Short, delta.Byte:
		bits := map[delta.PrimitiveType]int{delta.Long: 64, delta.Integer: 32, delta.Short: 16, delta.Byte: 8}[p]
		if lit.Kind != LitNumber {
			return nil, want("an integer")
		}
		n, err := strconv.ParseInt(strings.TrimPrefix(lit.Text, "+"), 10, bits)
		if err != nil {
			return nil, want(fmt.Sprintf("an integer that fits %d bits", bits))
		}
		return n, nil
	case delta.Float, delta.Double:
		if lit.Kind != LitNumber {
			return nil, want("a number")
		}
		bits := 64
		if p == delta.Float {
			bits = 32 // so 0.1 equals the float32 0.1 read from the file
		}
		f, err := strconv.ParseFloat(lit.Text, bits)
		if err != nil {
			return nil, want("a number in range")
		}
		return f, nil
	case delta.Date:
		if lit.Kind == LitString {
			if d, err := time.Parse(time.DateOnly, lit.Text); err == nil {
				return d, nil
			}
		}
		return nil, want("a date 'YYYY-MM-DD'")
	case delta.Timestamp, delta.TimestampNTZ:
		if lit.Kind == LitString {
			for _, layout := range timestampLayouts {
				if ts, err := time.Parse(layout, lit.Text); err == nil {
					return ts.UTC(), nil
				}
			}
		}
		return nil, want("a timestamp such as '2024-06-01T12:00:00Z', '2024-06-01 12:00:00' or '2024-06-01'")
	}
	return nil, fmt.Errorf("type %s cannot be filtered", p)
}

// BoundCond is one comparison of a Bound: its column (and whether it is a
// partition column), its type, and the literal in the column's Go type
// (nil for null), for evaluators of other row layouts.
type BoundCond struct {
	Column    string
	Op        Op
	Type      delta.DataType
	Value     any
	Partition bool
}

// Conds returns b's comparisons.
func (b *Bound) Conds() []BoundCond {
	out := make([]BoundCond, len(b.conds))
	for i, c := range b.conds {
		out[i] = BoundCond{Column: c.Column, Op: c.Op, Type: c.typ, Value: c.lit, Partition: c.partition}
	}
	return out
}
