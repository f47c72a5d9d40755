package mapping

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math/big"
	"strconv"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/delta/filter"
)

// Where is a route's row filter: comparisons joined by AND, in the
// language of `deltaflow cat --where`, over the columns of the rows a
// Mapper maps, evaluated on those rows as they are (no allocation per
// row). A comparison with null is false but `col = null` and `col !=
// null`, as SQL's.
type Where struct {
	src   string
	conds []whereCond
}

type whereCond struct {
	op   filter.Op
	kind kind
	name string
	data int // leaf in Row.Values, or -1
	part int // index in Row.PartitionValues, or -1
	null bool
	i    int64 // integer, long, timestamp (µs), date (days)
	f    float64
	b    bool
	s    []byte // a string column's literal
	pv   string // a partition column's literal as its partition value
	// A decimal column's literal q (times 10^scale) as ⌊q⌋ (two's
	// complement hi:i, clamped to ±10^38, which no value reaches) and
	// whether q has a fraction.
	hi   int64
	frac bool
	dec  decimalColumn
}

// Where compiles src, a filter over m's columns: an error names the
// comparison and the column (unknown, or a literal that does not fit its
// type).
func (m *Mapper) Where(src string) (*Where, error) {
	expr, err := filter.Parse(src)
	if err != nil {
		return nil, err
	}
	bound, err := filter.Bind(expr, m.p.schema, m.p.partNames)
	if err != nil {
		return nil, err
	}
	w := &Where{src: src}
	for _, bc := range bound.Conds() {
		col := m.p.column(bc.Column)
		c := whereCond{op: bc.Op, kind: col.kind, name: bc.Column, data: col.dataIdx, part: col.partIdx, null: bc.Value == nil,
			dec: col.dec}
		if err := c.literal(bc.Value, bc.Type); err != nil {
			return nil, fmt.Errorf("where %s: %w", src, err)
		}
		w.conds = append(w.conds, c)
	}
	return w, nil
}

// column returns the plan's column named name (Bind checked it exists).
func (p *plan) column(name string) *planColumn {
	for i := range p.cols {
		if p.cols[i].Name == name {
			return &p.cols[i]
		}
	}
	return nil
}

// literal sets the comparison's literal from lit, a value of type t as
// filter.Bind converts it.
func (c *whereCond) literal(lit any, t delta.DataType) error {
	if lit == nil {
		return nil
	}
	switch v := lit.(type) {
	case string:
		c.s, c.pv = []byte(v), v
	case bool:
		c.b, c.pv = v, strconv.FormatBool(v)
	case int64:
		c.i = v
	case float64:
		c.f = v
	case *big.Rat:
		if c.kind != kDecimal {
			return fmt.Errorf("column %s of type %s cannot be compared here", c.name, t)
		}
		c.decimalLiteral(v)
	case time.Time:
		if c.kind == kDate {
			c.i, c.pv = v.Unix()/86400, v.Format(time.DateOnly)
		} else {
			c.i = v.UnixMicro()
		}
	default:
		return fmt.Errorf("column %s of type %s cannot be compared here", c.name, t)
	}
	if c.part >= 0 && c.kind != kString && c.kind != kBoolean && c.kind != kInteger && c.kind != kLong && c.kind != kDate {
		return fmt.Errorf("partition column %s is %s: only string, boolean, integer, long and date partition columns can be compared", c.name, t)
	}
	return nil
}

// decimalLiteral sets the literal of a comparison with a decimal column:
// q = lit×10^scale, compared with the column's unscaled values.
func (c *whereCond) decimalLiteral(lit *big.Rat) {
	q := new(big.Rat).Mul(lit, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(c.dec.scale)), nil)))
	floor := new(big.Int).Div(q.Num(), q.Denom()) // Euclidean: ⌊q⌋, the denominator being positive
	c.frac = !q.IsInt()
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(delta.MaxDecimalPrecision), nil)
	if floor.CmpAbs(limit) > 0 {
		floor.Mul(limit, big.NewInt(int64(floor.Sign())))
		c.frac = false
	}
	neg := floor.Sign() < 0
	var buf [16]byte
	new(big.Int).Abs(floor).FillBytes(buf[:])
	mag := u128{hi: binary.BigEndian.Uint64(buf[:8]), lo: binary.BigEndian.Uint64(buf[8:])}
	if neg {
		mag = mag.neg()
	}
	c.hi, c.i = int64(mag.hi), int64(mag.lo)
}

// compareDecimal orders a decimal column's value and the literal.
func (c *whereCond) compareDecimal(v parquet.Value) int {
	var x cell
	switch v.Kind() {
	case parquet.Int32:
		x.i = int64(v.Int32())
		x.hi = x.i >> 63
	case parquet.Int64:
		x.i = v.Int64()
		x.hi = x.i >> 63
	default: // it fits its column: castTwosComplement only sign-extends it
		c.dec.castTwosComplement(v.ByteArray(), c.dec.scale, &x)
	}
	switch {
	case x.hi != c.hi:
		return cmp.Compare(x.hi, c.hi)
	case x.i != c.i:
		return cmp.Compare(uint64(x.i), uint64(c.i))
	case c.frac: // x = ⌊q⌋ < q
		return -1
	}
	return 0
}

// String is the filter as written.
func (w *Where) String() string { return w.src }

// Match reports whether r, a row the Mapper mapped, satisfies every
// comparison.
func (w *Where) Match(r *Row) bool {
	for i := range w.conds {
		if !w.conds[i].match(r) {
			return false
		}
	}
	return true
}

func (c *whereCond) match(r *Row) bool {
	if c.part >= 0 {
		return c.matchPartition(r.PartitionValues[c.part])
	}
	v := r.Values[c.data]
	if c.null {
		return v.IsNull() == (c.op == filter.Eq)
	}
	if v.IsNull() {
		return false // a comparison with null is not true
	}
	var order int
	switch c.kind {
	case kString:
		order = bytes.Compare(v.ByteArray(), c.s)
	case kBoolean:
		order = cmpBool(v.Boolean(), c.b)
	case kInteger, kDate:
		order = cmp.Compare(int64(v.Int32()), c.i)
	case kLong, kTimestamp, kTimestampNTZ:
		order = cmp.Compare(v.Int64(), c.i)
	case kFloat:
		order = cmp.Compare(float64(v.Float()), c.f)
	case kDouble:
		order = cmp.Compare(v.Double(), c.f)
	case kDecimal:
		order = c.compareDecimal(v)
	default:
		return false // variants compare with null only (Bind says so)
	}
	return holds(c.op, order)
}

// matchPartition compares a partition value (Delta's text form, nil for
// null): numbers as numbers, the rest as text (a date's text orders as
// the date).
func (c *whereCond) matchPartition(pv *string) bool {
	if c.null {
		return (pv == nil) == (c.op == filter.Eq)
	}
	if pv == nil {
		return false
	}
	if c.kind == kInteger || c.kind == kLong {
		n, err := strconv.ParseInt(*pv, 10, 64)
		return err == nil && holds(c.op, cmp.Compare(n, c.i))
	}
	return holds(c.op, cmp.Compare(*pv, c.pv))
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func holds(op filter.Op, order int) bool {
	switch op {
	case filter.Eq:
		return order == 0
	case filter.Ne:
		return order != 0
	case filter.Lt:
		return order < 0
	case filter.Le:
		return order <= 0
	case filter.Gt:
		return order > 0
	}
	return order >= 0
}
