package mapping

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta"
)

// Struct, array and map columns. A column's type is written as Spark's
// DDL writes it (struct<lat: double, tags: array<string>>); its value is
// the subtree its source addresses, walked by the record's format (JSON,
// Avro) along the compiled type, whose leaves cast scalars with the
// rules of a top-level column of their type. A mapped row carries the
// column as one byte array, delta.AppendNested's encoding of the leaves'
// values with their Dremel levels, which the data file writer expands:
// Row.Values keep one value per column, so the reader's slab of rows has
// a fixed width whatever the records hold.

// maxTypeDepth bounds a column type's nesting: a configuration is no
// hostile input, but a type as deep as a stack is no table either.
const maxTypeDepth = 64

// parseNestedType parses a struct<…>, array<…> or map<…> column type.
// Inside, struct fields, array elements and map values are nullable, as
// in the schema Spark's from_json reads with; map keys are scalars of
// mapKeyTypes, never null.
func parseNestedType(s string) (delta.DataType, error) {
	p := typeParser{s: s}
	t, err := p.parse()
	if err == nil {
		if p.space(); p.pos < len(s) {
			err = p.errorf(p.pos, "unexpected %q after the type", s[p.pos:])
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	return t, nil
}

// mapKeyTypes are the types a map's keys may have: Protobuf's map key
// types, as Spark's from_protobuf reads them (uint32 and uint64 as long,
// by the scalar rules). A JSON object's and an Avro map's keys are text,
// cast to the key type as a JSON number's text is (Spark's from_json
// takes string keys only; transform_keys with a cast is its way).
var mapKeyTypes = []delta.DataType{delta.String, delta.Integer, delta.Long, delta.Boolean}

type typeParser struct {
	s     string
	pos   int
	depth int
}

// errorf is an error at byte offset at of the type (shown from 1).
func (p *typeParser) errorf(at int, format string, args ...any) error {
	return fmt.Errorf("at character %d: %s", at+1, fmt.Sprintf(format, args...))
}

func (p *typeParser) space() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t' || p.s[p.pos] == '\n' || p.s[p.pos] == '\r') {
		p.pos++
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// word reads an identifier.
func (p *typeParser) word() string {
	p.space()
	start := p.pos
	for p.pos < len(p.s) && isWordByte(p.s[p.pos]) {
		p.pos++
	}
	return p.s[start:p.pos]
}

// accept consumes c if it comes next.
func (p *typeParser) accept(c byte) bool {
	if p.space(); p.pos < len(p.s) && p.s[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

func (p *typeParser) expect(c byte, what string) error {
	if p.accept(c) {
		return nil
	}
	if p.pos == len(p.s) {
		return p.errorf(p.pos, "expected %q %s, got the end", c, what)
	}
	return p.errorf(p.pos, "expected %q %s, got %q", c, what, p.s[p.pos])
}

func (p *typeParser) parse() (delta.DataType, error) {
	p.space()
	start := p.pos
	if p.depth++; p.depth > maxTypeDepth {
		return nil, p.errorf(start, "nested deeper than %d levels", maxTypeDepth)
	}
	defer func() { p.depth-- }()
	w := p.word()
	switch w {
	case "struct":
		return p.structType()
	case "array":
		if err := p.expect('<', "after array"); err != nil {
			return nil, err
		}
		elem, err := p.parse()
		if err != nil {
			return nil, err
		}
		return &delta.ArrayType{ElementType: elem, ContainsNull: true}, p.expect('>', "closing array<")
	case "map":
		if err := p.expect('<', "after map"); err != nil {
			return nil, err
		}
		p.space()
		keyAt := p.pos
		key, err := p.parse()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(mapKeyTypes, key) {
			return nil, p.errorf(keyAt, "a map's keys are string, integer, long or boolean, not %s", typeDDL(key))
		}
		if err := p.expect(',', "between a map's key and value types"); err != nil {
			return nil, err
		}
		value, err := p.parse()
		if err != nil {
			return nil, err
		}
		return &delta.MapType{KeyType: key, ValueType: value, ValueContainsNull: true}, p.expect('>', "closing map<")
	case "":
		if p.pos == len(p.s) {
			return nil, p.errorf(start, "expected a type, got the end")
		}
		return nil, p.errorf(start, "expected a type, got %q", p.s[p.pos])
	case "decimal": // its (p,s), spaces allowed before it too
		if rest := strings.TrimLeft(p.s[p.pos:], " "); strings.HasPrefix(rest, "(") {
			if end := strings.IndexByte(rest, ')'); end >= 0 {
				w += rest[:end+1]
				p.pos = len(p.s) - len(rest) + end + 1
			}
		}
	}
	t, err := parseScalarType(w)
	switch {
	case err != nil:
		return nil, p.errorf(start, "%v", err)
	case t == delta.Variant:
		return nil, p.errorf(start, "a variant cannot be inside a struct, array or map")
	}
	return t, nil
}

// structType parses the fields of struct<name: type, …> (the colon is
// optional, as in Spark's DDL; a name may be `quoted`).
func (p *typeParser) structType() (delta.DataType, error) {
	if err := p.expect('<', "after struct"); err != nil {
		return nil, err
	}
	st := &delta.StructType{}
	if p.accept('>') {
		return nil, p.errorf(p.pos-1, "a struct needs at least one field")
	}
	for {
		p.space()
		at := p.pos
		name, err := p.fieldName()
		if err != nil {
			return nil, err
		}
		if st.Field(name) != nil {
			return nil, p.errorf(at, "duplicate struct field %q", name)
		}
		p.accept(':')
		t, err := p.parse()
		if err != nil {
			return nil, err
		}
		st.Fields = append(st.Fields, delta.StructField{Name: name, Type: t, Nullable: true})
		if p.accept('>') {
			return st, nil
		}
		if err := p.expect(',', "or '>' after a struct field"); err != nil {
			return nil, err
		}
	}
}

// fieldName reads a struct field's name: an identifier, or any text in
// backquotes (a doubled backquote for one).
func (p *typeParser) fieldName() (string, error) {
	p.space()
	if !p.accept('`') {
		if w := p.word(); w != "" {
			return w, nil
		}
		return "", p.errorf(p.pos, "expected a struct field name")
	}
	var b strings.Builder
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		p.pos++
		if c != '`' {
			b.WriteByte(c)
			continue
		}
		if p.pos < len(p.s) && p.s[p.pos] == '`' {
			b.WriteByte('`')
			p.pos++
			continue
		}
		if b.Len() == 0 {
			return "", p.errorf(p.pos-2, "an empty struct field name")
		}
		return b.String(), nil
	}
	return "", p.errorf(p.pos, "unterminated `quoted` field name")
}

// typeDDL writes t as a column type says it: struct<lat: double,
// tags: array<string>>.
func typeDDL(t delta.DataType) string {
	var b strings.Builder
	writeDDL(&b, t)
	return b.String()
}

func writeDDL(b *strings.Builder, t delta.DataType) {
	switch t := t.(type) {
	case *delta.StructType:
		b.WriteString("struct<")
		for i, f := range t.Fields {
			if i > 0 {
				b.WriteString(", ")
			}
			if strings.IndexFunc(f.Name, func(r rune) bool { return r > 0x7f || !isWordByte(byte(r)) }) >= 0 || f.Name == "" {
				b.WriteString("`" + strings.ReplaceAll(f.Name, "`", "``") + "`")
			} else {
				b.WriteString(f.Name)
			}
			b.WriteString(": ")
			writeDDL(b, f.Type)
		}
		b.WriteString(">")
	case *delta.ArrayType:
		b.WriteString("array<")
		writeDDL(b, t.ElementType)
		b.WriteString(">")
	case *delta.MapType:
		b.WriteString("map<")
		writeDDL(b, t.KeyType)
		b.WriteString(", ")
		writeDDL(b, t.ValueType)
		b.WriteString(">")
	default:
		b.WriteString(t.String())
	}
}

// nestedShape is what a level of a nested column's type is.
type nestedShape uint8

const (
	nsLeaf nestedShape = iota
	nsStruct
	nsArray
	nsMap
)

var nestedShapeNames = [...]string{nsStruct: "struct", nsArray: "array", nsMap: "map"}

// nestedType is one level of a nested column's compiled type, with the
// Dremel levels its values are written at.
type nestedType struct {
	shape    nestedShape
	nullable bool
	// def is the definition level of a value present here, nullDef of a
	// null here (its parent's def); rep the repetition level of the
	// innermost array element or map entry this is in (0: none), which a
	// value repeats at when it is not its list's first.
	def, nullDef, rep int
	// first and end are its leaves: [first, end) of delta.NestedLeaves.
	first, end int
	fields     []nestedField // struct
	elem       *nestedType   // array element, map value
	key        *nestedType   // map key
	// leaf casts a scalar with the rules of a top-level column of its type.
	leaf planColumn
}

type nestedField struct {
	name string
	t    *nestedType
}

// field is the index of t's struct field name, or -1.
func (t *nestedType) field(name string) int {
	for i := range t.fields {
		if t.fields[i].name == name {
			return i
		}
	}
	return -1
}

// nestedColumn is a struct, array or map column's compiled type.
type nestedColumn struct {
	root *nestedType
	// idx is its index among the plan's nested columns, for the formats'
	// per-column programs.
	idx int
}

// compileNested compiles the type of nested column f, whose source is
// path, with the levels delta.NestedLeaves gives its leaves (a type the
// writer refuses is an error here, at configuration time).
func compileNested(f *delta.StructField, path []string) (*nestedColumn, error) {
	leaves, err := delta.NestedLeaves(f)
	if err != nil {
		return nil, err
	}
	c := nestedCompiler{leaves: leaves}
	def := 0
	if f.Nullable {
		def = 1
	}
	root := c.compile(f.Type, f.Nullable, def, 0, path)
	if c.err != nil {
		return nil, c.err
	}
	return &nestedColumn{root: root}, nil
}

type nestedCompiler struct {
	leaves []delta.NestedLeaf
	next   int
	err    error
}

// compile compiles t, whose present values have definition level def.
// path is where its values are in the record, through structs: a leaf's
// source path, by which a Debezium decimal's scale is found in the
// record's schema (Kafka Connect's struct schemas name fields, as paths
// do; an array's or a map's has no field: "" stands for it, and a decimal
// below is read at its column's scale, as without schemas).
func (c *nestedCompiler) compile(t delta.DataType, nullable bool, def, rep int, path []string) *nestedType {
	n := &nestedType{nullable: nullable, def: def, nullDef: def, rep: rep, first: c.next}
	if nullable {
		n.nullDef--
	}
	switch t := t.(type) {
	case *delta.StructType:
		n.shape = nsStruct
		for i := range t.Fields {
			f := &t.Fields[i]
			d := def
			if f.Nullable {
				d++
			}
			n.fields = append(n.fields, nestedField{name: f.Name, t: c.compile(f.Type, f.Nullable, d, rep, append(slices.Clip(path), f.Name))})
		}
	case *delta.ArrayType:
		n.shape = nsArray
		d := def + 1 // the repeated group "list"
		if t.ContainsNull {
			d++
		}
		n.elem = c.compile(t.ElementType, t.ContainsNull, d, rep+1, append(slices.Clip(path), ""))
	case *delta.MapType:
		n.shape = nsMap
		n.key = c.compile(t.KeyType, false, def+1, rep+1, nil)
		d := def + 1
		if t.ValueContainsNull {
			d++
		}
		n.elem = c.compile(t.ValueType, t.ValueContainsNull, d, rep+1, append(slices.Clip(path), ""))
	default:
		n.leaf = planColumn{compiledColumn: compiledColumn{typ: t, src: parsedSource{kind: srcPath, path: path}}, kind: kindOf(t),
			dec: newDecimalColumn(t), def: def, dataIdx: c.next}
		if l := c.leaves[c.next]; (l.MaxDef != def || l.MaxRep != rep) && c.err == nil {
			// The writer expands the leaves at NestedLeaves' levels: the
			// walk must write the same ones.
			c.err = fmt.Errorf("leaf %v: levels %d/%d, the writer's %d/%d", l.Path, def, rep, l.MaxDef, l.MaxRep)
		}
		c.next++
	}
	n.end = c.next
	return n
}

// nestedBuilder builds the encoding of nested column values, as a
// format's walk of each value finds its leaves; one per decoder, reused
// record after record, so a steady stream allocates nothing.
type nestedBuilder struct {
	vals []parquet.Value
	enc  []byte
	// scratch holds the leaves' strings and wide decimals until encoded.
	scratch Arena
	// path is where the walk is, for a failure's reason.
	path   []nestedStep
	reason []byte
	cast   cell
}

// nestedStep is one level of a walk: a struct field (field), an array
// element (index) or a map value (key; of a number or boolean key, as a
// Protobuf map's key is read: keyKind its kind and index its value).
type nestedStep struct {
	field   string
	index   int
	key     []byte
	isKey   bool
	keyKind kind
}

func (b *nestedBuilder) begin() {
	b.vals, b.path = b.vals[:0], b.path[:0]
	b.scratch.Reset()
}

// finish encodes the leaves' values into a.
func (b *nestedBuilder) finish(a *Arena) []byte {
	b.enc = delta.AppendNested(b.enc[:0], b.vals)
	return a.Copy(b.enc)
}

func (b *nestedBuilder) push(s nestedStep) { b.path = append(b.path, s) }

// pop leaves a level; on a failure the walk returns without popping, so
// the path stays where it failed.
func (b *nestedBuilder) pop() { b.path = b.path[:len(b.path)-1] }

// nulls writes the leaves of t with definition level def: a null or an
// empty array or map at t.
func (b *nestedBuilder) nulls(t *nestedType, rep, def int) {
	for i := t.first; i < t.end; i++ {
		b.vals = append(b.vals, parquet.Value{}.Level(rep, def, i))
	}
}

// null writes a null at t.
func (b *nestedBuilder) null(t *nestedType, rep int) failure {
	if !t.nullable {
		b.reason = append(b.appendPath(b.reason[:0]), "null where a value is required"...)
		return failNested
	}
	b.nulls(t, rep, t.nullDef)
	return ok
}

// value writes leaf t's value v.
func (b *nestedBuilder) value(t *nestedType, v cell, rep int) {
	b.vals = append(b.vals, t.leaf.scalarValue(v, &b.scratch).Level(rep, t.def, t.first))
}

// key writes map key k, text (a JSON object's, an Avro map's, a string
// Protobuf key), cast to t's key type: a string as it is, a number as a
// JSON number's text, a boolean from true or false.
func (b *nestedBuilder) key(t *nestedType, k []byte, rep int) failure {
	c := &t.key.leaf
	b.cast = cell{}
	f := ok
	switch c.kind {
	case kString:
		if !utf8.Valid(k) {
			f = failUTF8
		}
		b.cast.b = b.scratch.Copy(k)
	case kInteger, kLong:
		b.cast.i, f = parseInteger(k, c.kind == kInteger)
	case kBoolean:
		switch string(k) {
		case "true":
			b.cast.i = 1
		case "false":
		default:
			f = failCast
		}
	}
	if f != ok {
		b.push(nestedStep{isKey: true, key: k})
		return b.fail(t.key, f, k, "", "")
	}
	b.value(t.key, b.cast, rep)
	return ok
}

// fail sets the reason of leaf t's value that did not cast (f, detail;
// got names the value's type, for failType) and returns failNested.
func (b *nestedBuilder) fail(t *nestedType, f failure, detail []byte, format Format, got string) failure {
	b.reason = appendFailure(b.appendPath(b.reason[:0]), &t.leaf, f, detail, format, got)
	return failNested
}

// shape sets the reason of a value that is not t's shape (a struct,
// array or map; a leaf's is a failType).
func (b *nestedBuilder) shape(t *nestedType, got string) failure {
	b.reason = append(append(append(append(b.appendPath(b.reason[:0]), "expected "...), nestedShapeNames[t.shape]...), ", got "...), got...)
	return failNested
}

// malformed sets the reason of a value the format cannot decode.
func (b *nestedBuilder) malformed(err error) failure {
	b.reason = append(append(b.appendPath(b.reason[:0]), "malformed: "...), err.Error()...)
	return failNested
}

// appendPath appends "field loc: element 2: " for the walk's path.
func (b *nestedBuilder) appendPath(dst []byte) []byte {
	for _, s := range b.path {
		switch {
		case s.isKey:
			dst = appendQuote(append(dst, "key "...), s.key)
		case s.key != nil:
			dst = appendQuote(append(dst, "value of key "...), s.key)
		case s.keyKind == kBoolean:
			dst = strconv.AppendBool(append(dst, "value of key "...), s.index != 0)
		case s.keyKind != kString:
			dst = strconv.AppendInt(append(dst, "value of key "...), int64(s.index), 10)
		case s.field != "":
			dst = append(append(dst, "field "...), s.field...)
		default:
			dst = strconv.AppendInt(append(dst, "element "...), int64(s.index), 10)
		}
		dst = append(dst, ": "...)
	}
	return dst
}
