package mapping

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// avroValues reads the values of a plan's source paths from Avro binary
// records of one writer schema, without allocating: a program compiled
// from the schema walks each record once, reads the fields that some path
// names into their node's slot (strings alias the record's bytes until
// cast copies them) and skips the rest. Schema and walk are ours
// (docs/design.md, Formats); twmb/avro, an implementation we did not
// write, encodes the records the tests check them with.
type avroValues struct {
	p     *plan
	root  *avroType
	slots []avroSlot // by plan node
	steps int        // what the record may still cost (avroBudget)
	// spans are the bytes of the values of the nodes nested columns read
	// (nil: absent), walked again along nests when cast.
	spans [][]byte
	nests []*avroNest // by nestedColumn.idx; nil: the schema has no such field
	nest  nestedBuilder
	leaf  avroSlot // a nested column's scalar, read
}

// avroKind is a decoded value's kind; avroType's kind is one too.
type avroKind uint8

const (
	avNull avroKind = iota
	avBoolean
	avInt
	avLong
	avFloat
	avDouble
	avBytes
	avString
	avEnum
	avFixed
	avUnion
	avRecord
	avArray
	avMap
	avDate            // int days
	avTimestamp       // µs
	avDecimal         // bytes or fixed (size > 0) with a valid logical type decimal: the unscaled value
	avLocalTimestamp  // µs of the wall clock read as UTC (local-timestamp-*)
	avZonedTimestamp  // Debezium's ZonedTimestamp: a string of an instant (debeziumKind)
	avVariableDecimal // Debezium's VariableScaleDecimal record {scale, value}, read as an avDecimal
)

var avroKindNames = [...]string{avNull: "null", avBoolean: "boolean", avInt: "int", avLong: "long", avFloat: "float",
	avDouble: "double", avBytes: "bytes", avString: "string", avEnum: "enum", avFixed: "fixed", avUnion: "union",
	avRecord: "record", avArray: "array", avMap: "map", avDate: "date", avTimestamp: "timestamp", avDecimal: "decimal",
	avLocalTimestamp: "local timestamp", avZonedTimestamp: "ZonedTimestamp string", avVariableDecimal: "VariableScaleDecimal"}

// avroType is a compiled schema node. A record or map whose fields or
// entries some path reads has its own copy per path, with each field
// bound to the plan node that reads it; the others are shared by name (so
// a recursive type compiles).
type avroType struct {
	kind     avroKind
	scale    int64 // timestamps: µs = value * scale / div
	div      int64
	fields   []avroField // record
	branches []*avroType // union
	items    *avroType   // array items, map values
	symbols  [][]byte    // enum
	size     int         // fixed, or a decimal's fixed (0: a decimal's bytes)
	decScale int         // a decimal's scale
	// number: a Debezium or Kafka Connect temporal type (debeziumType), a
	// number a numeric column reads as written, as before it was a date or
	// timestamp.
	number bool
	// keys binds map entries to plan nodes: the children of the map's
	// node, read into their slots.
	keys []avroField
}

type avroField struct {
	name string
	typ  *avroType
	node int // plan node, or -1: skipped
}

// avroSlot is the value read for a plan node.
type avroSlot struct {
	set  bool // read in this record (unset: absent, a null)
	kind avroKind
	i    int64
	f    float64
	b    []byte // aliases the record
	// raw is a date's or timestamp's number as written, for a numeric
	// column when number (avroType.number).
	raw    int64
	number bool
}

// Decoding limits. avroMaxDepth bounds nesting, as fastjson.MaxDepth does
// for JSON; avroBudget bounds the items a record may hold per byte, so that
// a block of a billion nulls (no bytes each) is refused, not walked.
const (
	avroMaxDepth = 300
	avroBudget   = 8
)

var (
	errAvroTruncated = errors.New("truncated")
	errAvroLong      = errors.New("varint longer than 10 bytes")
	errAvroLength    = errors.New("length past the record's end")
	errAvroBranch    = errors.New("union branch out of range")
	errAvroSymbol    = errors.New("enum symbol out of range")
	errAvroDepth     = errors.New("nesting too deep")
	errAvroItems     = errors.New("more items than the record's bytes allow")
)

// compileAvro compiles schema for p's paths; an error is an
// *avroPathError or names the schema's fault. When lenient (a writer
// schema of a registry topic), a path the schema does not have is null
// rather than an error: the field was removed, or not added yet.
func compileAvro(schema *avroSchema, p *plan, lenient bool) (func(p *plan) values, error) {
	c := avroCompiler{p: p, shared: map[*avroNode]*avroType{}, lenient: lenient, at: map[int]*avroNode{}}
	if p.cdc {
		if _, err := envelopeRow(schema.root); err != nil {
			return nil, err
		}
	}
	root, err := c.compile(schema.root, 0, "")
	if err != nil {
		return nil, err
	}
	if root.kind != avRecord {
		return nil, fmt.Errorf("the schema is a %s, not a record", avroKindNames[root.kind])
	}
	nests := make([]*avroNest, p.nestedCols)
	for i := range p.cols {
		col := &p.cols[i]
		if col.nested == nil || c.at[col.node] == nil {
			continue
		}
		if nests[col.nested.idx], err = c.pair(c.at[col.node], col.nested.root); err != nil {
			return nil, err
		}
	}
	build := func(p *plan) values {
		return &avroValues{p: p, root: root, slots: make([]avroSlot, len(p.nodes)), spans: make([][]byte, len(p.nodes)), nests: nests}
	}
	if p.cdc {
		return c.changeEvents(schema.root, build)
	}
	return build, nil
}

// avroCompiler compiles a schema against a plan's paths.
type avroCompiler struct {
	p       *plan
	shared  map[*avroNode]*avroType // unbound types, by node: a recursive one compiles once
	lenient bool
	at      map[int]*avroNode // the schema's type at each plan node read
}

// compile compiles n for plan node (-1: none reads it); path names it in
// errors. A record or map some path goes into is compiled for that path,
// its fields bound to the plan's nodes; the rest is shared.
func (c *avroCompiler) compile(n *avroNode, node int, path string) (*avroType, error) {
	bound := node >= 0 && len(c.p.nodes[node].children) > 0
	if !bound {
		return c.unbound(n)
	}
	switch n.typ {
	case "record", "error":
		t := &avroType{kind: avRecord}
		found := map[int]bool{}
		for _, f := range n.fields {
			child := c.child(node, f.name)
			if child >= 0 {
				c.at[child] = f.typ
			}
			ft, err := c.compile(f.typ, child, joinField(path, f.name))
			if err != nil {
				return nil, err
			}
			t.fields = append(t.fields, avroField{name: f.name, typ: ft, node: child})
			found[child] = true
		}
		for _, ch := range c.p.nodes[node].children {
			if !found[ch] && !c.lenient {
				return nil, &avroPathError{node: ch, msg: fmt.Sprintf("%s: no field %q in the schema's record %s", c.p.nodes[ch].path, c.p.nodes[ch].key, n.name)}
			}
		}
		return t, nil
	case "map":
		values, err := c.unbound(n.items)
		if err != nil {
			return nil, err
		}
		t := &avroType{kind: avMap, items: values}
		for _, ch := range c.p.nodes[node].children {
			c.at[ch] = n.items
			vt, err := c.compile(n.items, ch, joinField(path, c.p.nodes[ch].key))
			if err != nil {
				return nil, err
			}
			t.keys = append(t.keys, avroField{name: c.p.nodes[ch].key, typ: vt, node: ch})
		}
		return t, nil
	case "union":
		t := &avroType{kind: avUnion}
		for _, b := range n.branches {
			if b.typ == "null" { // the paths below it are null
				t.branches = append(t.branches, &avroType{kind: avNull})
				continue
			}
			bt, err := c.compile(b, node, path)
			if err != nil {
				return nil, err
			}
			t.branches = append(t.branches, bt)
		}
		return t, nil
	}
	if c.lenient { // read as a value: the paths below it are null
		return c.unbound(n)
	}
	return nil, &avroPathError{node: node, msg: fmt.Sprintf("%s is a %s in the schema, not a record or map", path, n.typ)}
}

// avroPathError is a source path the schema does not have.
type avroPathError struct {
	node int // the plan node at fault
	msg  string
}

func (e *avroPathError) Error() string { return e.msg }

// child is the plan node under node keyed name, or -1.
func (c *avroCompiler) child(node int, name string) int {
	if n, image := envelopeNode(c.p, node, name); image {
		return n
	}
	for _, ch := range c.p.nodes[node].children {
		if c.p.nodes[ch].key == name {
			return ch
		}
	}
	return -1
}

func joinField(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// unbound compiles n with every field skipped or read as a value.
func (c *avroCompiler) unbound(n *avroNode) (*avroType, error) {
	if t, ok := c.shared[n]; ok {
		return t, nil
	}
	t := &avroType{}
	c.shared[n] = t // before what is inside: it may be n again
	if *t = debeziumType(n); t.kind != avNull {
		return t, nil
	}
	switch n.typ {
	case "null":
		t.kind = avNull
	case "boolean":
		t.kind = avBoolean
	case "int":
		t.kind = avInt
		if n.logical == "date" {
			t.kind = avDate
		}
	case "long":
		t.kind, t.scale, t.div = avLong, 1, 1
		switch n.logical {
		case "timestamp-millis", "local-timestamp-millis":
			t.kind, t.scale = avTimestamp, 1000
		case "timestamp-micros", "local-timestamp-micros":
			t.kind = avTimestamp
		case "timestamp-nanos", "local-timestamp-nanos":
			t.kind, t.div = avTimestamp, 1000
		}
		if t.kind == avTimestamp && strings.HasPrefix(n.logical, "local-") {
			t.kind = avLocalTimestamp
		}
	case "float":
		t.kind = avFloat
	case "double":
		t.kind = avDouble
	case "bytes", "fixed":
		t.kind, t.size = avBytes, n.size
		if n.typ == "fixed" {
			t.kind = avFixed
		}
		if n.logical != "decimal" {
			break
		}
		if d, err := avroDecimal(n); err == nil {
			t.kind, t.decScale = avDecimal, d.Scale // a valid decimal's fixed has a size: it holds a digit
		}
	case "string":
		t.kind = avString
	case "enum":
		t.kind = avEnum
		for _, s := range n.symbols {
			t.symbols = append(t.symbols, []byte(s))
		}
	case "record", "error":
		t.kind = avRecord
		for _, f := range n.fields {
			ft, err := c.unbound(f.typ)
			if err != nil {
				return nil, err
			}
			t.fields = append(t.fields, avroField{name: f.name, typ: ft, node: -1})
		}
	case "array", "map":
		t.kind = avArray
		if n.typ == "map" {
			t.kind = avMap
		}
		it, err := c.unbound(n.items)
		if err != nil {
			return nil, err
		}
		t.items = it
	case "union":
		t.kind = avUnion
		for _, b := range n.branches {
			bt, err := c.unbound(b)
			if err != nil {
				return nil, err
			}
			t.branches = append(t.branches, bt)
		}
	default:
		return nil, fmt.Errorf("unknown Avro type %q", n.typ)
	}
	return t, nil
}

func (v *avroValues) resolve(value []byte) error {
	clear(v.slots)
	clear(v.spans)
	v.steps = avroBudget*len(value) + 64
	rest, err := v.read(v.root, value, 0, 0)
	switch {
	case err != nil:
		return &MapError{Reason: "not Avro of the table's schema: " + err.Error()}
	case len(rest) > 0:
		return &MapError{Reason: fmt.Sprintf("not Avro of the table's schema: %d bytes after the record", len(rest))}
	}
	return nil
}

// read reads one value of type t from b into node's slot (node -1: skip)
// and returns the bytes after it.
func (v *avroValues) read(t *avroType, b []byte, node, depth int) ([]byte, error) {
	if depth > avroMaxDepth {
		return nil, errAvroDepth
	}
	if v.steps--; v.steps < 0 {
		return nil, errAvroItems
	}
	switch t.kind {
	case avUnion:
		n, rest, err := readIndex(b, len(t.branches), errAvroBranch)
		if err != nil {
			return nil, err
		}
		return v.read(t.branches[n], rest, node, depth+1)
	case avRecord:
		if node >= 0 {
			v.markContainer(node, avRecord)
		}
		var err error
		for i := range t.fields {
			if b, err = v.readAt(t.fields[i].typ, b, t.fields[i].node, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	case avArray, avMap:
		if node >= 0 {
			v.markContainer(node, t.kind)
		}
		return v.readBlocks(t, b, depth)
	}
	var s *avroSlot
	if node >= 0 {
		s = &v.slots[node]
		s.set, s.kind = true, t.kind
	}
	return readScalar(t, b, s)
}

// readAt is read, keeping the bytes of the value of a node a nested
// column reads.
func (v *avroValues) readAt(t *avroType, b []byte, node, depth int) ([]byte, error) {
	rest, err := v.read(t, b, node, depth)
	if err == nil && node >= 0 && v.p.nodes[node].span {
		v.spans[node] = b[:len(b)-len(rest)]
	}
	return rest, err
}

// readScalar reads a value of scalar type t into s (nil: skip it).
func readScalar(t *avroType, b []byte, s *avroSlot) ([]byte, error) {
	switch t.kind {
	case avNull:
		if s != nil {
			s.set = false
		}
		return b, nil
	case avBoolean:
		if len(b) < 1 {
			return nil, errAvroTruncated
		}
		if s != nil && b[0] != 0 {
			s.i = 1
		}
		return b[1:], nil
	case avInt, avLong, avDate, avTimestamp, avLocalTimestamp:
		n, rest, err := readVarlong(b)
		if err != nil {
			return nil, err
		}
		if (t.kind == avInt || t.kind == avDate) && (n < math.MinInt32 || n > math.MaxInt32) {
			return nil, fmt.Errorf("int %d out of range", n)
		}
		if s != nil {
			s.i, s.raw, s.number = n, n, t.number
			if t.kind == avTimestamp || t.kind == avLocalTimestamp {
				s.i = scaleMicros(n, t.scale, t.div)
			}
		}
		return rest, nil
	case avFloat:
		if len(b) < 4 {
			return nil, errAvroTruncated
		}
		if s != nil {
			s.f = float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		}
		return b[4:], nil
	case avDouble:
		if len(b) < 8 {
			return nil, errAvroTruncated
		}
		if s != nil {
			s.f = math.Float64frombits(binary.LittleEndian.Uint64(b))
		}
		return b[8:], nil
	case avVariableDecimal:
		return readVariableDecimal(b, s)
	case avBytes, avString, avFixed, avDecimal, avZonedTimestamp:
		var body, rest []byte
		var err error
		if t.kind == avFixed || t.kind == avDecimal && t.size > 0 {
			if len(b) < t.size {
				return nil, errAvroTruncated
			}
			body, rest = b[:t.size], b[t.size:]
		} else if body, rest, err = readBytes(b); err != nil {
			return nil, err
		}
		if s != nil {
			s.b, s.i = body, int64(t.decScale)
		}
		return rest, nil
	case avEnum:
		n, rest, err := readIndex(b, len(t.symbols), errAvroSymbol)
		if err != nil {
			return nil, err
		}
		if s != nil {
			s.kind, s.b = avString, t.symbols[n]
		}
		return rest, nil
	}
	return nil, fmt.Errorf("unknown kind %d", t.kind)
}

// markContainer records that node holds a record, array or map: a column
// of the node itself gets "expected …, got record" (its paths read into
// their own nodes).
func (v *avroValues) markContainer(node int, kind avroKind) {
	v.slots[node] = avroSlot{set: true, kind: kind}
}

// readBlocks reads an array's or a map's blocks: a count (negative: then
// the block's size in bytes), that many items (map entries: a string key
// then the value), until a count of 0.
func (v *avroValues) readBlocks(t *avroType, b []byte, depth int) ([]byte, error) {
	for {
		n, rest, err := readVarlong(b)
		if err != nil {
			return nil, err
		}
		b = rest
		if n == 0 {
			return b, nil
		}
		if n < 0 {
			if n == math.MinInt64 {
				return nil, errAvroItems
			}
			n = -n
			if _, b, err = readVarlong(b); err != nil { // the block's size: we walk it anyway
				return nil, err
			}
		}
		if n > int64(v.steps) {
			return nil, errAvroItems
		}
		for range n {
			item := -1
			if t.kind == avMap {
				var key []byte
				if key, b, err = readBytes(b); err != nil {
					return nil, err
				}
				for _, k := range t.keys {
					if k.name == string(key) {
						item = k.node
						if b, err = v.readAt(k.typ, b, item, depth+1); err != nil {
							return nil, err
						}
						break
					}
				}
				if item >= 0 {
					continue
				}
			}
			if b, err = v.read(t.items, b, -1, depth+1); err != nil {
				return nil, err
			}
		}
	}
}

// readVarlong reads a zig-zag varint.
func readVarlong(b []byte) (int64, []byte, error) {
	var u uint64
	for i := 0; i < len(b); i++ {
		if i == 10 {
			return 0, nil, errAvroLong
		}
		u |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return int64(u>>1) ^ -int64(u&1), b[i+1:], nil
		}
	}
	return 0, nil, errAvroTruncated
}

// readIndex reads an enum symbol's or a union branch's index, below n
// (else outOfRange).
func readIndex(b []byte, n int, outOfRange error) (int, []byte, error) {
	i, rest, err := readVarlong(b)
	if err != nil {
		return 0, nil, err
	}
	if i < 0 || i >= int64(n) {
		return 0, nil, outOfRange
	}
	return int(i), rest, nil
}

// readBytes reads a length-prefixed bytes or string body.
func readBytes(b []byte) (body, rest []byte, err error) {
	n, rest, err := readVarlong(b)
	if err != nil {
		return nil, nil, err
	}
	if n < 0 || n > int64(len(rest)) {
		return nil, nil, errAvroLength
	}
	return rest[:n], rest[n:], nil
}

// cast converts the value read for column c's node.
func (v *avroValues) cast(c *planColumn, a *Arena, out *cell) (failure, []byte) {
	if c.nested != nil {
		return v.castNested(c, a, out)
	}
	s := &v.slots[c.node]
	if !s.set {
		out.null = true
		return ok, nil
	}
	return castSlot(c, s, a, out)
}

// castSlot converts value s, read, into column (or nested leaf) c.
func castSlot(c *planColumn, s *avroSlot, a *Arena, out *cell) (failure, []byte) {
	switch s.kind {
	case avBytes, avFixed:
		if c.kind != kBinary {
			return failType, nil
		}
		out.b = a.Copy(s.b)
		return ok, nil
	case avZonedTimestamp:
		if c.kind != kString {
			return castTimestampText(c, s.b, out), s.b
		}
		fallthrough
	case avString:
		if c.kind != kString {
			return failType, nil
		}
		if !utf8.Valid(s.b) {
			return failUTF8, nil
		}
		out.b = a.Copy(s.b)
		return ok, nil
	case avBoolean:
		if c.kind != kBoolean {
			return failType, nil
		}
		out.i = s.i
		return ok, nil
	case avInt, avLong:
		return castInt(s.i, c, out)
	case avDecimal:
		if c.kind != kDecimal {
			return failType, nil
		}
		return c.dec.castTwosComplement(s.b, int(s.i), out), nil
	case avFloat, avDouble:
		switch {
		case c.kind != kFloat && c.kind != kDouble:
			return failType, nil
		case math.IsNaN(s.f) || math.IsInf(s.f, 0):
			return failNotFinite, nil
		case c.kind == kFloat && math.IsInf(float64(float32(s.f)), 0):
			return failOverflow, nil
		}
		out.f = s.f
		return ok, nil
	case avDate, avTimestamp, avLocalTimestamp:
		if s.number && c.kind != kDate && c.kind != kTimestamp && c.kind != kTimestampNTZ {
			return castInt(s.raw, c, out) // a Debezium or Kafka Connect temporal number, as the int or long it is
		}
		if s.kind == avDate {
			return castDays(s.i, c, out), nil
		}
		// Either timestamp into either timestamp type: an instant's UTC
		// wall clock, a wall clock as if UTC (Spark's casts with the
		// session time zone UTC; a local timestamp into a timestamp column
		// as before timestamp_ntz columns were).
		return castMicros(s.i, c, out), nil
	}
	return failType, nil
}

// kindOf names the Avro type of the value read for node.
func (v *avroValues) kindOf(node int) string {
	if s := &v.slots[node]; s.set {
		return avroKindNames[s.kind]
	}
	return "null"
}
