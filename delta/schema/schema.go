// Package schema is a Delta table's schema as delta and its data file
// codec share it: the column types (DataType and the types that implement
// it), schemaString parsing, printing and merging, the column mapping
// metadata of a field (physical name, id), and the Go values of a row (Row).
// It knows nothing of the log.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/deltaflow/deltaflow/delta/internal/jsonenc"
)

// DataType is a Delta column type: a PrimitiveType, DecimalType, StructType,
// ArrayType or MapType.
type DataType interface {
	// String is the type as Delta names it: "long", "decimal(10,2)", "struct", ...
	String() string
}

// PrimitiveType is a Delta primitive type, named as in schemaString.
type PrimitiveType string

// The primitive types.
const (
	String       PrimitiveType = "string"
	Long         PrimitiveType = "long"
	Integer      PrimitiveType = "integer"
	Short        PrimitiveType = "short"
	Byte         PrimitiveType = "byte"
	Float        PrimitiveType = "float"
	Double       PrimitiveType = "double"
	Boolean      PrimitiveType = "boolean"
	Binary       PrimitiveType = "binary"
	Date         PrimitiveType = "date"
	Timestamp    PrimitiveType = "timestamp"
	TimestampNTZ PrimitiveType = "timestamp_ntz"
	// Variant is semi-structured data (table feature variantType), read
	// and written as a VariantValue.
	Variant PrimitiveType = "variant"
)

func (p PrimitiveType) String() string { return string(p) }

// DecimalType is decimal(Precision,Scale).
type DecimalType struct{ Precision, Scale int }

func (d DecimalType) String() string { return fmt.Sprintf("decimal(%d,%d)", d.Precision, d.Scale) }

// MaxDecimalPrecision is the largest precision of a DecimalType, Spark's.
const MaxDecimalPrecision = 38

// FixedLen is the length of the shortest big-endian two's complement that
// holds every unscaled value of d (up to 10^Precision−1 in magnitude): the
// FIXED_LEN_BYTE_ARRAY length Spark writes a decimal of more than 18
// digits as (16 for 38 digits).
func (d DecimalType) FixedLen() int {
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Precision)), nil)
	n := 1
	for max := big.NewInt(1 << 7); max.Cmp(limit) < 0; max.Lsh(max, 8) { // n bytes hold magnitudes below 2^(8n−1)
		n++
	}
	return n
}

// StructField is one column of a struct.
type StructField struct {
	Name     string
	Type     DataType
	Nullable bool
	// Metadata is the field's metadata object, verbatim ({} when empty).
	Metadata json.RawMessage
}

// StructType is a struct (and the table schema).
type StructType struct{ Fields []StructField }

func (*StructType) String() string { return "struct" }

// ArrayType is an array of ElementType.
type ArrayType struct {
	ElementType  DataType
	ContainsNull bool
}

func (*ArrayType) String() string { return "array" }

// MapType is a map from KeyType to ValueType.
type MapType struct {
	KeyType           DataType
	ValueType         DataType
	ValueContainsNull bool
}

func (*MapType) String() string { return "map" }

// Field returns the named field, or nil.
func (s *StructType) Field(name string) *StructField {
	for i := range s.Fields {
		if s.Fields[i].Name == name {
			return &s.Fields[i]
		}
	}
	return nil
}

// Index returns the position of the named field, or -1.
func (s *StructType) Index(name string) int {
	for i := range s.Fields {
		if s.Fields[i].Name == name {
			return i
		}
	}
	return -1
}

// ErrInvalidSchema is wrapped by every schema parse error.
var ErrInvalidSchema = errors.New("delta: invalid schema")

// ParseSchema parses a schemaString.
func ParseSchema(schemaString string) (*StructType, error) {
	var raw json.RawMessage = []byte(schemaString)
	t, err := ParseType(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	st, ok := t.(*StructType)
	if !ok {
		return nil, fmt.Errorf("%w: top-level type is %s, not struct", ErrInvalidSchema, t)
	}
	return st, nil
}

// ParseType parses a type as schemaString writes it (a primitive's name
// or a struct, array or map object).
func ParseType(raw json.RawMessage) (DataType, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return nil, err
		}
		return parsePrimitive(name)
	}
	var obj struct {
		Type              string            `json:"type"`
		Fields            []json.RawMessage `json:"fields"`
		ElementType       json.RawMessage   `json:"elementType"`
		ContainsNull      *bool             `json:"containsNull"`
		KeyType           json.RawMessage   `json:"keyType"`
		ValueType         json.RawMessage   `json:"valueType"`
		ValueContainsNull *bool             `json:"valueContainsNull"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	switch obj.Type {
	case "variant": // PROTOCOL.md writes it as an object too: {"type":"variant"}
		return Variant, nil
	case "struct":
		st := &StructType{Fields: make([]StructField, 0, len(obj.Fields))}
		for _, fr := range obj.Fields {
			f, err := parseField(fr)
			if err != nil {
				return nil, err
			}
			st.Fields = append(st.Fields, f)
		}
		return st, nil
	case "array":
		if obj.ElementType == nil || obj.ContainsNull == nil {
			return nil, fmt.Errorf("array type needs elementType and containsNull")
		}
		et, err := ParseType(obj.ElementType)
		if err != nil {
			return nil, fmt.Errorf("array element: %w", err)
		}
		return &ArrayType{ElementType: et, ContainsNull: *obj.ContainsNull}, nil
	case "map":
		if obj.KeyType == nil || obj.ValueType == nil || obj.ValueContainsNull == nil {
			return nil, fmt.Errorf("map type needs keyType, valueType and valueContainsNull")
		}
		kt, err := ParseType(obj.KeyType)
		if err != nil {
			return nil, fmt.Errorf("map key: %w", err)
		}
		vt, err := ParseType(obj.ValueType)
		if err != nil {
			return nil, fmt.Errorf("map value: %w", err)
		}
		return &MapType{KeyType: kt, ValueType: vt, ValueContainsNull: *obj.ValueContainsNull}, nil
	default:
		return nil, fmt.Errorf("unknown complex type %q", obj.Type)
	}
}

func parseField(raw json.RawMessage) (StructField, error) {
	var f struct {
		Name     *string         `json:"name"`
		Type     json.RawMessage `json:"type"`
		Nullable *bool           `json:"nullable"`
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return StructField{}, err
	}
	if f.Name == nil || f.Type == nil {
		return StructField{}, fmt.Errorf("field needs name and type: %s", raw)
	}
	t, err := ParseType(f.Type)
	if err != nil {
		return StructField{}, fmt.Errorf("field %q: %w", *f.Name, err)
	}
	nullable := true
	if f.Nullable != nil {
		nullable = *f.Nullable
	}
	md := f.Metadata
	if md == nil {
		md = json.RawMessage("{}")
	}
	return StructField{Name: *f.Name, Type: t, Nullable: nullable, Metadata: md}, nil
}

func parsePrimitive(name string) (DataType, error) {
	switch p := PrimitiveType(name); p {
	case String, Long, Integer, Short, Byte, Float, Double, Boolean, Binary, Date, Timestamp, TimestampNTZ, Variant:
		return p, nil
	}
	if name == "decimal" { // Spark's default precision
		return DecimalType{Precision: 10, Scale: 0}, nil
	}
	if inner, ok := strings.CutPrefix(name, "decimal("); ok {
		inner, ok = strings.CutSuffix(inner, ")")
		ps, ss, ok2 := strings.Cut(inner, ",")
		p, err1 := strconv.Atoi(strings.TrimSpace(ps))
		s, err2 := strconv.Atoi(strings.TrimSpace(ss))
		if ok && ok2 && err1 == nil && err2 == nil && p >= 1 && p <= MaxDecimalPrecision && s >= 0 && s <= p {
			return DecimalType{Precision: p, Scale: s}, nil
		}
	}
	return nil, fmt.Errorf("unknown type %q", name)
}

// MarshalJSON writes the schema in Delta's schemaString form.
func (s *StructType) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	if err := writeType(&buf, s); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// SchemaString is the schema as Delta stores it in metaData.schemaString.
func (s *StructType) SchemaString() string {
	b, err := s.MarshalJSON()
	if err != nil {
		panic(err) // only reachable with a nil Type, a programming error
	}
	return string(b)
}

func writeType(buf *bytes.Buffer, t DataType) error {
	switch t := t.(type) {
	case PrimitiveType, DecimalType:
		b, _ := jsonenc.Marshal(t.String())
		buf.Write(b)
	case *StructType:
		buf.WriteString(`{"type":"struct","fields":[`)
		for i, f := range t.Fields {
			if i > 0 {
				buf.WriteByte(',')
			}
			name, _ := jsonenc.Marshal(f.Name)
			buf.WriteString(`{"name":`)
			buf.Write(name)
			buf.WriteString(`,"type":`)
			if err := writeType(buf, f.Type); err != nil {
				return fmt.Errorf("field %q: %w", f.Name, err)
			}
			fmt.Fprintf(buf, `,"nullable":%t,"metadata":`, f.Nullable)
			md := bytes.TrimSpace(f.Metadata)
			if len(md) == 0 {
				md = []byte("{}")
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, md); err != nil {
				return fmt.Errorf("field %q metadata: %w", f.Name, err)
			}
			buf.Write(compact.Bytes())
			buf.WriteByte('}')
		}
		buf.WriteString(`]}`)
	case *ArrayType:
		buf.WriteString(`{"type":"array","elementType":`)
		if err := writeType(buf, t.ElementType); err != nil {
			return err
		}
		fmt.Fprintf(buf, `,"containsNull":%t}`, t.ContainsNull)
	case *MapType:
		buf.WriteString(`{"type":"map","keyType":`)
		if err := writeType(buf, t.KeyType); err != nil {
			return err
		}
		buf.WriteString(`,"valueType":`)
		if err := writeType(buf, t.ValueType); err != nil {
			return err
		}
		fmt.Fprintf(buf, `,"valueContainsNull":%t}`, t.ValueContainsNull)
	default:
		return fmt.Errorf("unsupported data type %T", t)
	}
	return nil
}

// SchemaChangeError reports an incompatible schema change for one column.
type SchemaChangeError struct {
	Column  string
	OldType string // "" when the column is new
	NewType string // "" when the column was dropped
	Reason  string
}

func (e *SchemaChangeError) Error() string {
	return fmt.Sprintf("delta: incompatible schema change for column %q (table %s, new %s): %s",
		e.Column, orNone(e.OldType), orNone(e.NewType), e.Reason)
}

func orNone(s string) string {
	if s == "" {
		return "absent"
	}
	return s
}

// MergeSchema returns the table schema after evolving current towards next:
// columns present in both must have the same type (and a column may become
// nullable, never the reverse), or with widen a type CanWiden takes it to
// (recorded in the column's delta.typeChanges, Widen); columns only in next
// are appended and must be nullable; columns only in current are kept (old
// files hold them) and must be nullable, since new rows will not carry them.
// Struct columns evolve by the same rules, field by field at any depth
// (inside arrays and maps too), as Spark's mergeSchema does: a nullable
// field may be added, a field left out must be nullable; arrays and maps
// may come to hold nulls. Nested fields are matched by name whatever their
// metadata (the table's carry column mapping's), and are never widened.
// changed reports whether the result differs from current.
func MergeSchema(current, next *StructType, widen bool) (merged *StructType, changed bool, err error) {
	fields, changed, err := mergeFields("", current.Fields, next.Fields, widen)
	if err != nil {
		return nil, false, err
	}
	return &StructType{Fields: fields}, changed, nil
}

// mergeFields merges the fields of a struct (the table's columns when
// prefix is ""), named prefix+name in errors.
func mergeFields(prefix string, current, next []StructField, widen bool) ([]StructField, bool, error) {
	merged := &StructType{Fields: slices.Clone(current)}
	changed := false
	what := "column"
	if prefix != "" {
		what = "struct field"
	}
	for _, nf := range next {
		name := prefix + nf.Name
		i := merged.Index(nf.Name)
		if i < 0 {
			if !nf.Nullable {
				return nil, false, &SchemaChangeError{Column: name, NewType: TypeName(nf.Type),
					Reason: "a " + what + " added to an existing table must be nullable"}
			}
			merged.Fields = append(merged.Fields, nf)
			changed = true
			continue
		}
		cf := &merged.Fields[i]
		t, c, err := mergeType(name, cf.Type, nf.Type)
		var sce *SchemaChangeError
		switch {
		case err == nil:
			cf.Type, changed = t, changed || c
		case prefix == "" && errors.As(err, &sce) && sce.Column == name && CanWiden(cf.Type, nf.Type):
			if !widen {
				sce.Reason = "the new type is wider, and " + TypeWideningHint
				return nil, false, sce
			}
			if *cf, err = Widen(*cf, nf.Type); err != nil {
				return nil, false, err
			}
			changed = true
		case prefix != "" && errors.As(err, &sce) && sce.Column == name && CanWiden(cf.Type, nf.Type):
			sce.Reason = "type widening inside a struct, array or map is not supported"
			return nil, false, sce
		default:
			return nil, false, err
		}
		if cf.Nullable && !nf.Nullable {
			return nil, false, &SchemaChangeError{Column: name, OldType: TypeName(cf.Type),
				NewType: TypeName(nf.Type), Reason: "a nullable " + what + " cannot become required"}
		}
		if !cf.Nullable && nf.Nullable {
			cf.Nullable = true
			changed = true
		}
	}
	for _, cf := range current {
		if !slices.ContainsFunc(next, func(f StructField) bool { return f.Name == cf.Name }) && !cf.Nullable {
			return nil, false, &SchemaChangeError{Column: prefix + cf.Name, OldType: TypeName(cf.Type),
				Reason: "a required " + what + " cannot be left out"}
		}
	}
	return merged.Fields, changed, nil
}

// mergeType merges next into the type cur of the column or field name:
// structs field by field, arrays and maps by their elements, keys and
// values (which may come to hold nulls). Other types must be the same:
// the error is a SchemaChangeError naming name, which MergeSchema turns
// into a widening where it may.
func mergeType(name string, cur, next DataType) (DataType, bool, error) {
	switch c := cur.(type) {
	case *StructType:
		if n, ok := next.(*StructType); ok {
			fields, changed, err := mergeFields(name+".", c.Fields, n.Fields, false)
			if err != nil || !changed {
				return cur, false, err
			}
			return &StructType{Fields: fields}, true, nil
		}
	case *ArrayType:
		if n, ok := next.(*ArrayType); ok {
			elem, changed, err := mergeType(name+".element", c.ElementType, n.ElementType)
			if err != nil || (!changed && c.ContainsNull == (c.ContainsNull || n.ContainsNull)) {
				return cur, false, err
			}
			return &ArrayType{ElementType: elem, ContainsNull: c.ContainsNull || n.ContainsNull}, true, nil
		}
	case *MapType:
		if n, ok := next.(*MapType); ok {
			key, keyChanged, err := mergeType(name+".key", c.KeyType, n.KeyType)
			if err != nil {
				return cur, false, err
			}
			value, changed, err := mergeType(name+".value", c.ValueType, n.ValueType)
			if err != nil || (!keyChanged && !changed && c.ValueContainsNull == (c.ValueContainsNull || n.ValueContainsNull)) {
				return cur, false, err
			}
			return &MapType{KeyType: key, ValueType: value, ValueContainsNull: c.ValueContainsNull || n.ValueContainsNull}, true, nil
		}
	default:
		if TypeName(cur) == TypeName(next) {
			return cur, false, nil
		}
	}
	return cur, false, &SchemaChangeError{Column: name, OldType: TypeName(cur), NewType: TypeName(next), Reason: "column types differ"}
}

// TypeName renders a type fully (struct fields included) for comparisons and
// error messages.
func TypeName(t DataType) string {
	var buf bytes.Buffer
	if err := writeType(&buf, t); err != nil {
		return t.String()
	}
	s := buf.String()
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

// DataSchema is the schema of a table's data files: the table schema without
// its partition columns, which are never stored in the files.
func DataSchema(table *StructType, partitionColumns []string) *StructType {
	ds := &StructType{Fields: make([]StructField, 0, len(table.Fields))}
	for _, f := range table.Fields {
		if !slices.Contains(partitionColumns, f.Name) {
			ds.Fields = append(ds.Fields, f)
		}
	}
	return ds
}

// Column mapping's field metadata keys: the column's name in data files and
// its field id.
const (
	ColumnMappingPhysicalName = "delta.columnMapping.physicalName"
	ColumnMappingID           = "delta.columnMapping.id"
)

// FieldMetadata decodes a field's metadata object (nil when empty or bad).
func FieldMetadata(f *StructField) map[string]json.RawMessage {
	if len(f.Metadata) < 3 {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(f.Metadata, &m) != nil {
		return nil
	}
	return m
}

// FieldID is the column's delta.columnMapping.id, if it has one.
func FieldID(f *StructField) (int, bool) {
	raw, ok := FieldMetadata(f)[ColumnMappingID]
	if !ok {
		return 0, false
	}
	var id int
	if json.Unmarshal(raw, &id) != nil {
		return 0, false
	}
	return id, true
}

// PhysicalName is the column's name in data files, partition values and
// stats: its delta.columnMapping.physicalName, or its name without one.
func PhysicalName(f *StructField) string {
	if raw, ok := FieldMetadata(f)[ColumnMappingPhysicalName]; ok {
		var name string
		if json.Unmarshal(raw, &name) == nil && name != "" {
			return name
		}
	}
	return f.Name
}
