package mapping

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/deltaflow/deltaflow/delta"
)

// Schemas looks up the writer schemas of records in the Confluent wire
// format (a zero magic byte, a 4-byte big-endian schema id, the body) by
// id. It must be safe for concurrent use and must not block: Map runs on
// an actor, and a schema it does not have yet is fetched elsewhere.
type Schemas interface {
	// Schema returns schema id; known is false while it has not been
	// fetched, and err says why it never will be (the registry has no
	// such id), which makes the record a dead letter.
	Schema(id int) (s WriterSchema, known bool, err error)
}

// WriterSchema is a schema a registry holds: its format (Avro,
// JSONSchema or Protobuf, the registry's AVRO, JSON and PROTOBUF) and its
// text (for Protobuf, the files schemareg resolved: parseProtoSchema).
type WriterSchema struct {
	Format Format
	Text   string
}

// SchemaPendingError is Map's error for a record whose writer schema is
// not known yet: not a dead letter. The caller fetches schema ID (off its
// goroutine) and maps the record again.
type SchemaPendingError struct{ ID int }

func (e *SchemaPendingError) Error() string {
	return "mapping: schema id " + strconv.Itoa(e.ID) + " is not fetched yet"
}

// SchemaChangeError is Map's error for the first record of a writer schema
// with top-level fields no column reads, that adds fields inside a struct
// column, or that widens a column's type where the table allows it, when
// the Config evolves: not a dead letter. Add are the columns it brings:
// new ones (nullable), and changed ones (a column's name, its wider type
// or its struct type with the new fields); the Mapper Evolved(Add)
// returns maps the record.
type SchemaChangeError struct {
	ID  int
	Add []Column
}

func (e *SchemaChangeError) Error() string {
	names := make([]string, len(e.Add))
	for i, c := range e.Add {
		names[i] = c.Name + " " + c.Type
	}
	return fmt.Sprintf("mapping: schema id %d adds or widens columns %s", e.ID, strings.Join(names, ", "))
}

// wireHeader is the Confluent wire format's header: magic byte 0 and the id.
const wireHeader = 5

// parseWireHeader returns the schema id and body of a Confluent
// wire-format value.
func parseWireHeader(value []byte) (int, []byte, error) {
	switch {
	case len(value) < wireHeader:
		return 0, nil, fmt.Errorf("%d bytes, shorter than the 5-byte schema registry header", len(value))
	case value[0] != 0:
		return 0, nil, fmt.Errorf("magic byte %d, want 0 (a schema registry header)", value[0])
	}
	id := binary.BigEndian.Uint32(value[1:wireHeader])
	if id > 1<<31-1 {
		return 0, nil, fmt.Errorf("schema id %d out of range", id)
	}
	return int(id), value[wireHeader:], nil
}

// writerPlans are a plan's compiled walks, one per writer schema id,
// shared by the plan's Mappers: compiled once per process.
type writerPlans struct {
	schemas Schemas
	compile func(text string, p *plan) writerPlan // the plan's format's
	mu      sync.Mutex
	byID    map[int]writerPlan
}

// writerPlan is a writer schema compiled for a plan, or why it cannot be
// read (every record written with it is a dead letter), or the columns it
// adds to an evolving plan.
type writerPlan struct {
	build func(p *plan) values
	err   error
	add   []Column
}

// compiled returns id's walk for p, compiling it the first time; pending
// is true while the schema is not fetched.
func (w *writerPlans) compiled(p *plan, id int) (wp writerPlan, pending bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wp, ok := w.byID[id]; ok {
		return wp, false
	}
	s, known, err := w.schemas.Schema(id)
	switch {
	case err != nil:
		wp.err = err
	case !known:
		return wp, true
	case s.Format != p.cfg.Format:
		wp.err = fmt.Errorf("a schema of format %s; the table's format is %s", s.Format, p.cfg.Format)
	default:
		wp = w.compile(s.Text, p)
		for i := range wp.add {
			wp.add[i].Origin = fmt.Sprintf("schema id %d", id)
		}
	}
	w.byID[id] = wp
	return wp, false
}

// Refuse makes every record of writer schema id a dead letter whose
// reason is err: the table refused the columns the schema brings (its
// SchemaChangeError could not be committed). It holds for m and every
// Mapper cloned from it, which share their compiled writer schemas; a
// Mapper of a format without a registry ignores it.
func (m *Mapper) Refuse(id int, err error) {
	if r, ok := m.vals.(*registryValues); ok {
		r.plans.mu.Lock()
		r.plans.byID[id] = writerPlan{err: err}
		r.plans.mu.Unlock()
	}
}

// compileAvroWriter compiles an Avro writer schema for p's paths. A path
// the writer schema lacks reads null (a field removed, or not added yet).
func compileAvroWriter(text string, p *plan) writerPlan {
	schema, err := parseAvroSchema([]byte(text))
	if err != nil {
		return writerPlan{err: err}
	}
	var fields []namedType
	record := schema.root
	if p.cdc { // a change event's columns are its row's
		record, _ = envelopeRow(record) // compileAvro says why it is none
	}
	if record != nil && record.typ == "record" {
		for _, f := range record.fields {
			if typ, _, err := avroColumnType(f.typ); err == nil {
				fields = append(fields, namedType{f.name, typ})
			}
		}
	}
	add, err := columnChanges(fields, p)
	switch {
	case err != nil:
		return writerPlan{err: err}
	case len(add) > 0:
		return writerPlan{add: add}
	}
	build, err := compileAvro(schema, p, true)
	return writerPlan{build: build, err: err}
}

// namedType is a writer schema's top-level field and the column type it
// makes (fields of a type no column holds are left out).
type namedType struct{ name, typ string }

// columnChanges are the columns a writer schema's top-level fields widen
// (checkWidening) and, with an evolving plan, add.
func columnChanges(fields []namedType, p *plan) ([]Column, error) {
	add, err := checkWidening(fields, p)
	if err == nil && p.cfg.Evolve {
		add = append(add, newColumnsOf(fields, p)...)
	}
	return add, err
}

// checkWidening returns the columns a writer schema changes: the
// top-level fields wider than the column derived from an earlier version
// (float → double, integer → long, a decimal of more digits) where that is
// a type widening (delta.CanWiden), with their wider types, when the plan
// evolves the table and the table allows it (Config.TypeWidening); and,
// when the plan evolves the table, the struct columns a writer schema adds
// fields to (at any depth: nestedChange), with the column's type holding
// them. Otherwise a wider field's records are dead letters naming it and
// both types (cast into the table's type its values would lose precision
// or overflow), saying how to allow the widening where the table can; so
// are those of a field that turns a timestamp column's instants into local
// date-times (timestamp_ntz), or the reverse, and those of a field inside
// a struct column that does either (Delta widens no nested field). An
// integer field that becomes a double or a decimal is left to the casts,
// which refuse its values (an incompatible type): Delta's schema evolution
// makes those changes only by hand. Columns the route declares take the
// casts they ask for.
func checkWidening(fields []namedType, p *plan) ([]Column, error) {
	if !p.cfg.derived {
		return nil, nil
	}
	var changed []Column
	for _, f := range fields {
		col := p.schema.Field(f.name)
		if col == nil {
			continue
		}
		typ, err := parseColumnType(f.typ)
		if err != nil {
			continue
		}
		switch col.Type.(type) {
		case *delta.StructType, *delta.ArrayType, *delta.MapType:
			merged, err := nestedChange(col.Type, typ, f.name, f.name)
			if err != nil {
				return nil, err
			}
			// As a new top-level field, one inside a nested column is left
			// out of a table that does not evolve.
			if merged != nil && p.cfg.Evolve {
				changed = append(changed, Column{Name: f.name, Type: typeDDL(merged), Source: f.name, Nullable: new(col.Nullable)})
			}
			continue
		}
		where := "column " + f.name
		if err := zoneChange(col.Type, typ, f.name, where); err != nil {
			return nil, err
		}
		if !wider(col.Type, typ) {
			continue
		}
		why := ""
		switch {
		case !delta.CanWiden(col.Type, typ):
			why = "no type widening takes the column's type to it"
		case slices.Contains(p.partNames, f.name):
			why = "deltaflow does not widen a partition column's type"
		case !p.cfg.Evolve:
			why = "the table's schema does not evolve (schema_evolution: none)"
		case !p.cfg.TypeWidening:
			why = delta.TypeWideningHint
		default:
			changed = append(changed, Column{Name: f.name, Type: f.typ, Source: f.name, Nullable: new(col.Nullable)})
			continue
		}
		return nil, widerError(col.Type, typ, f.name, where, why)
	}
	return changed, nil
}

// nestedChange returns nested column type was (of column col) with the
// struct fields the writer's type next adds, nullable, at any depth
// (inside array elements and map values too), as Delta's schema merge adds
// them (delta.MergeSchema); nil when next adds none. path names was inside
// the column as Spark does (loc.inner, readings.element, attrs.value).
// Fields of another type or shape are left to the casts, but a scalar
// field next widens, or turns between timestamp and timestamp_ntz, is an
// error naming it and both types: Delta's writer widens no field inside a
// struct, array or map, and cast into the table's type the values would
// overflow or lose precision.
func nestedChange(was, next delta.DataType, path, col string) (delta.DataType, error) {
	switch w := was.(type) {
	case *delta.StructType:
		n, ok := next.(*delta.StructType)
		if !ok {
			return nil, nil
		}
		var fields []delta.StructField // was's, cloned once one changes
		change := func() {
			if fields == nil {
				fields = slices.Clone(w.Fields)
			}
		}
		for _, f := range n.Fields {
			i := w.Index(f.Name)
			if i < 0 {
				change()
				fields = append(fields, delta.StructField{Name: f.Name, Type: f.Type, Nullable: true})
				continue
			}
			t, err := nestedChange(w.Fields[i].Type, f.Type, path+"."+f.Name, col)
			if err != nil {
				return nil, err
			}
			if t != nil {
				change()
				fields[i].Type = t
			}
		}
		if fields == nil {
			return nil, nil
		}
		return &delta.StructType{Fields: fields}, nil
	case *delta.ArrayType:
		n, ok := next.(*delta.ArrayType)
		if !ok {
			return nil, nil
		}
		t, err := nestedChange(w.ElementType, n.ElementType, path+".element", col)
		if t == nil {
			return nil, err
		}
		return &delta.ArrayType{ElementType: t, ContainsNull: w.ContainsNull}, nil
	case *delta.MapType:
		n, ok := next.(*delta.MapType)
		if !ok {
			return nil, nil
		}
		t, err := nestedChange(w.ValueType, n.ValueType, path+".value", col)
		if t == nil {
			return nil, err
		}
		return &delta.MapType{KeyType: w.KeyType, ValueType: t, ValueContainsNull: w.ValueContainsNull}, nil
	}
	where := "field " + path + " of column " + col
	if err := zoneChange(was, next, path, where); err != nil {
		return nil, err
	}
	if wider(was, next) {
		return nil, widerError(was, next, path, where, "deltaflow does not widen a field inside a struct, array or map (Delta's writer widens none)")
	}
	return nil, nil
}

// zoneChange is the error of a field (named name, at where in the table)
// of type next where the table's type was is a timestamp and next a
// timestamp_ntz, or the reverse: each would be read as the other's wall
// clock in UTC.
func zoneChange(was, next delta.DataType, name, where string) error {
	if (was == delta.Timestamp && next == delta.TimestampNTZ) || (was == delta.TimestampNTZ && next == delta.Timestamp) {
		return fmt.Errorf("field %s: the writer schema's %s is not the table's %s %s (one is an instant, the other a local date-time)",
			name, next, was, where)
	}
	return nil
}

// wider reports whether a field of type next holds values the table's
// type was does not, where a type widening could take was to next (an
// integer that becomes a double or a decimal is left to the casts).
func wider(was, next delta.DataType) bool {
	return (was == delta.Float && next == delta.Double) || (was == delta.Integer && next == delta.Long) || widerDecimal(was, next)
}

// widerError is the error of a field (named name, at where in the table)
// wider than the table's type, and why it is not widened.
func widerError(was, next delta.DataType, name, where, why string) error {
	return fmt.Errorf("field %s: the writer schema's %s is wider than the table's %s %s: %s", name, next, was, where, why)
}

// widerDecimal reports whether decimal type typ holds values column type
// col does not: more fraction digits (they would be rounded) or more
// integer digits (they would overflow).
func widerDecimal(col, typ delta.DataType) bool {
	c, ok := col.(delta.DecimalType)
	d, ok2 := typ.(delta.DecimalType)
	return ok && ok2 && (d.Scale > c.Scale || d.Precision-d.Scale > c.Precision-c.Scale)
}

// newColumnsOf are the columns of a writer schema's top-level fields that
// no column of p is named after, nullable.
func newColumnsOf(fields []namedType, p *plan) []Column {
	var add []Column
	for _, f := range fields {
		if p.schema.Field(f.name) == nil {
			add = append(add, Column{Name: f.name, Type: f.typ, Source: f.name, Nullable: new(true)})
		}
	}
	return add
}

// Evolved returns a Mapper like m with the columns add, as a
// SchemaChangeError says them: one named as a column of m's replaces its
// type (a widened type, a struct with new fields), the others come after
// m's.
func (m *Mapper) Evolved(add []Column) (*Mapper, error) {
	cfg := m.p.cfg
	cfg.Columns = slices.Clone(cfg.Columns)
	for _, c := range add {
		if i := slices.IndexFunc(cfg.Columns, func(have Column) bool { return have.Name == c.Name }); i >= 0 {
			cfg.Columns[i].Type = c.Type
			continue
		}
		cfg.Columns = append(cfg.Columns, c)
	}
	cfg.Schema = "" // the columns were checked against it; the new ones are another version's
	n, err := New(cfg, m.p.partNames)
	if err != nil {
		return nil, err
	}
	n.p.paths, n.now = m.p.paths, m.now
	return n, nil
}

// registryValues reads Confluent wire-format records: each value's header
// names its writer schema, whose compiled walk reads the body.
type registryValues struct {
	p     *plan
	plans *writerPlans
	byID  map[int]values // this Mapper's readers, by schema id
	cur   values         // the current record's
	curID int
}

func newRegistryValues(schemas Schemas, compile func(text string, p *plan) writerPlan) func(p *plan) values {
	plans := &writerPlans{schemas: schemas, compile: compile, byID: map[int]writerPlan{}}
	return func(p *plan) values {
		return &registryValues{p: p, plans: plans, byID: map[int]values{}, curID: -1}
	}
}

func (r *registryValues) resolve(value []byte) error {
	id, body, err := parseWireHeader(value)
	if err != nil {
		return &MapError{Reason: "not in the schema registry's wire format: " + err.Error()}
	}
	if id != r.curID || r.cur == nil {
		if err := r.use(id); err != nil {
			return err
		}
	}
	return r.cur.resolve(body)
}

// use makes schema id's reader the current one.
func (r *registryValues) use(id int) error {
	v := r.byID[id]
	if v == nil {
		wp, pending := r.plans.compiled(r.p, id)
		switch {
		case pending:
			return &SchemaPendingError{ID: id}
		case wp.err != nil:
			return &MapError{Reason: fmt.Sprintf("schema id %d: %v", id, wp.err)}
		case len(wp.add) > 0:
			return &SchemaChangeError{ID: id, Add: wp.add}
		}
		v = wp.build(r.p)
		r.byID[id] = v
	}
	r.cur, r.curID = v, id
	return nil
}

func (r *registryValues) cast(c *planColumn, a *Arena, out *cell) (failure, []byte) {
	return r.cur.cast(c, a, out)
}

func (r *registryValues) kindOf(node int) string { return r.cur.kindOf(node) }

// ErrSchemaNotFound is what a Schemas says for an id the registry does
// not have (HTTP 404, error code 40403): the record is a dead letter.
var ErrSchemaNotFound = errors.New("not found in the schema registry")
