package delta

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/google/uuid"

	"github.com/deltaflow/deltaflow/delta/internal/jsonenc"
	"github.com/deltaflow/deltaflow/delta/schema"
)

// Column mapping (PROTOCOL.md "Column Mapping"): with
// delta.columnMapping.mode name or id, every column has a physical name
// (delta.columnMapping.physicalName) used in data files, partition values
// and statistics, and an id (delta.columnMapping.id) written as the Parquet
// field_id; the schema's names are display names that RENAME changes.

// Column mapping metadata keys and table properties.
const (
	columnMappingPhysicalName = schema.ColumnMappingPhysicalName
	columnMappingID           = schema.ColumnMappingID
	columnMappingModeKey      = "delta.columnMapping.mode"
	columnMappingMaxID        = "delta.columnMapping.maxColumnId"
	typeChangesKey            = schema.TypeChangesKey
)

// PhysicalName is schema.PhysicalName.
func PhysicalName(f *StructField) string { return schema.PhysicalName(f) }

// PhysicalSchema returns schema with every top-level column named by its
// physical name, metadata kept: the schema data files are written with.
// Nested fields keep their display names, which the values of struct
// columns are keyed by (as RowReader returns them); the Parquet writer
// names them by their physical names (NewParquetSchema). Without column
// mapping it equals schema.
func PhysicalSchema(schema *StructType) *StructType {
	out := &StructType{Fields: slices.Clone(schema.Fields)}
	for i := range out.Fields {
		out.Fields[i].Name = PhysicalName(&out.Fields[i])
	}
	return out
}

// MapColumns returns the columns of data (a subset of the table's columns,
// by display name) as the table's physical columns: physical names and the
// table's field metadata (column ids). Rows written for data fit the
// result unchanged. A column missing from table is an error.
func MapColumns(table, data *StructType) (*StructType, error) {
	out := &StructType{Fields: make([]StructField, len(data.Fields))}
	for i, f := range data.Fields {
		tf := table.Field(f.Name)
		if tf == nil {
			return nil, fmt.Errorf("column %q is not in the table schema", f.Name)
		}
		f.Name, f.Metadata = PhysicalName(tf), tf.Metadata
		out.Fields[i] = f
	}
	return out, nil
}

// PhysicalPartitionValues re-keys partition values from display names to
// physical names, as add actions store them.
func PhysicalPartitionValues(schema *StructType, values map[string]*string) map[string]*string {
	return rekey(schema, values, func(f *StructField) (string, string) { return f.Name, PhysicalName(f) })
}

// LogicalPartitionValues re-keys an add action's partition values from
// physical names to display names.
func LogicalPartitionValues(schema *StructType, values map[string]*string) map[string]*string {
	return rekey(schema, values, func(f *StructField) (string, string) { return PhysicalName(f), f.Name })
}

func rekey(schema *StructType, values map[string]*string, names func(*StructField) (from, to string)) map[string]*string {
	if values == nil {
		return nil
	}
	out := make(map[string]*string, len(values))
	rename := map[string]string{}
	for i := range schema.Fields {
		from, to := names(&schema.Fields[i])
		rename[from] = to
	}
	for k, v := range values {
		if to, ok := rename[k]; ok {
			k = to
		}
		out[k] = v
	}
	return out
}

// ColumnMappingMode is delta.columnMapping.mode ("none" when unset).
func (s *Snapshot) ColumnMappingMode() string {
	if m := s.metadata.Configuration[columnMappingModeKey]; m != "" {
		return m
	}
	return "none"
}

// AssignColumnMapping gives every field of schema (nested ones too) that
// has no physical name yet a fresh one ("col-<uuid>") and the next column
// id, as writers must for new columns of a table with column mapping, and
// returns the configuration with delta.columnMapping.maxColumnId raised.
// With mode none it returns both unchanged.
func AssignColumnMapping(table *StructType, conf map[string]string) (*StructType, map[string]string, error) {
	if m := conf[columnMappingModeKey]; m == "" || m == "none" {
		return table, conf, nil
	}
	maxID := 0
	if v, ok := conf[columnMappingMaxID]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %q: %w", columnMappingMaxID, v, err)
		}
		maxID = n
	}
	walkFields(table, "", func(_ string, f *StructField) {
		if id, ok := schema.FieldID(f); ok {
			maxID = max(maxID, id)
		}
	})
	out := cloneType(table, nil).(*StructType)
	var err error
	walkFields(out, "", func(path string, f *StructField) {
		md := schema.FieldMetadata(f)
		if md == nil {
			md = map[string]json.RawMessage{}
		}
		_, hasName := md[columnMappingPhysicalName]
		_, hasID := md[columnMappingID]
		if hasName && hasID {
			return
		}
		if !hasID {
			maxID++
			md[columnMappingID], _ = json.Marshal(maxID)
		}
		if !hasName {
			md[columnMappingPhysicalName], _ = json.Marshal("col-" + uuid.NewString())
		}
		b, merr := jsonenc.Marshal(md)
		if merr != nil && err == nil {
			err = fmt.Errorf("column %s metadata: %w", path, merr)
		}
		f.Metadata = b
	})
	if err != nil {
		return nil, nil, err
	}
	conf = maps.Clone(conf)
	conf[columnMappingMaxID] = strconv.Itoa(maxID)
	return out, conf, nil
}

// cloneType deep-copies a type so its fields can be changed, calling fn (if
// not nil) on each copied field, nested ones first.
func cloneType(t DataType, fn func(*StructField)) DataType {
	switch t := t.(type) {
	case *StructType:
		out := &StructType{Fields: make([]StructField, len(t.Fields))}
		for i, f := range t.Fields {
			f.Type = cloneType(f.Type, fn)
			if fn != nil {
				fn(&f)
			}
			out.Fields[i] = f
		}
		return out
	case *ArrayType:
		return &ArrayType{ElementType: cloneType(t.ElementType, fn), ContainsNull: t.ContainsNull}
	case *MapType:
		return &MapType{KeyType: cloneType(t.KeyType, fn), ValueType: cloneType(t.ValueType, fn), ValueContainsNull: t.ValueContainsNull}
	}
	return t
}

// PartitionValues is the file's partition values keyed by column (display)
// name, whatever the column mapping.
func (s *Snapshot) PartitionValues(a *Add) map[string]*string {
	return s.logicalPartitionValues(a.PartitionValues)
}

// logicalPartitionValues is LogicalPartitionValues with the snapshot's
// schema; values are returned as they are when it cannot be parsed.
func (s *Snapshot) logicalPartitionValues(values map[string]*string) map[string]*string {
	schema, err := s.Schema()
	if err != nil {
		return values
	}
	return LogicalPartitionValues(schema, values)
}

// FileStats parses the file's stats with columns keyed by display name
// ("a.b" for nested ones), whatever the column mapping, and with min/max
// bounds that hold for the columns' current types. Writers key stats by
// physical name: only keys naming a physical column of the current schema
// are kept, so the stats of a dropped column (whose physical name may be
// the display name of a column added since) are never read as another
// column's. A column whose type was widened (delta.typeChanges) may have
// files whose bounds were written in the old type; those are widened or
// dropped (see statColumn).
func (s *Snapshot) FileStats(a *Add) (*Stats, error) {
	raw, err := ParseStats(a.Stats)
	if err != nil {
		return nil, err
	}
	cols, err := s.statColumns()
	if err != nil {
		return nil, err
	}
	st := &Stats{NumRecords: raw.NumRecords, TightBounds: raw.TightBounds,
		MinValues: map[string]any{}, MaxValues: map[string]any{}, NullCount: map[string]int64{}}
	for phys, c := range cols {
		if n, ok := raw.NullCount[phys]; ok {
			st.NullCount[c.name] = n
		}
		if c.bounds == boundsNone {
			continue
		}
		if v, ok := raw.MinValues[phys]; ok {
			st.MinValues[c.name] = c.bound(v, false)
		}
		if v, ok := raw.MaxValues[phys]; ok {
			st.MaxValues[c.name] = c.bound(v, true)
		}
	}
	return st, nil
}

// statColumn is how the stats of one column (at any depth) are read.
type statColumn struct {
	name   string // display path
	bounds boundsRule
}

// boundsRule says how a column's min/max stats hold for its current type,
// given the type changes (PROTOCOL.md "Type Widening") the column went
// through: files written before a change carry bounds in the old type.
type boundsRule uint8

const (
	// boundsExact: every old type's bounds are exact values of the
	// current type (integer and decimal widenings).
	boundsExact boundsRule = iota
	// boundsFloat: files from before FLOAT→DOUBLE wrote a float's shortest
	// text ("0.8" for 0.800000011920929), which read as a double is not the
	// stored value: a bound may be either, so the wider one is used.
	boundsFloat
	// boundsNone: some old type's bounds cannot be read as the current
	// type; they are ignored, so no file is skipped by them.
	boundsNone
)

// bound returns a min (isMax false) or max statistic as a bound that holds
// whichever type the file was written in.
func (c *statColumn) bound(v any, isMax bool) any {
	n, ok := v.(json.Number)
	if c.bounds != boundsFloat || !ok {
		return v
	}
	d, err := n.Float64()
	if err != nil {
		return v
	}
	f := float64(float32(d)) // the float the text stood for, if a float file wrote it
	if math.IsInf(f, 0) || (isMax && f <= d) || (!isMax && f >= d) {
		return v
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
}

// statColumns maps the physical path of every column of the current schema
// (nested ones too) to how its stats are read; computed once per metadata.
func (s *Snapshot) statColumns() (map[string]*statColumn, error) {
	if s.statCols != nil {
		return s.statCols, nil
	}
	schema, err := s.Schema()
	if err != nil {
		return nil, err
	}
	cols := map[string]*statColumn{}
	var walk func(t DataType, phys, logical string)
	walk = func(t DataType, phys, logical string) {
		st, ok := t.(*StructType)
		if !ok {
			return
		}
		for i := range st.Fields {
			f := &st.Fields[i]
			p, l := phys+PhysicalName(f), logical+f.Name
			cols[p] = &statColumn{name: l, bounds: boundsOf(f)}
			walk(f.Type, p+".", l+".")
		}
	}
	walk(schema, "", "")
	s.statCols = cols
	return cols, nil
}

// boundsOf reads the field's delta.typeChanges: which of its old types'
// bounds hold for its current type.
func boundsOf(f *StructField) boundsRule {
	raw, ok := schema.FieldMetadata(f)[typeChangesKey]
	if !ok {
		return boundsExact
	}
	var changes []struct {
		FromType  json.RawMessage `json:"fromType"`
		FieldPath string          `json:"fieldPath"`
	}
	if json.Unmarshal(raw, &changes) != nil {
		return boundsNone
	}
	rule := boundsExact
	for _, c := range changes {
		if c.FieldPath != "" {
			continue // a map key or value, or an array element: no stats
		}
		from, err := schema.ParseType(c.FromType)
		switch {
		case err != nil:
			return boundsNone
		case from == Float && f.Type == Double:
			rule = boundsFloat
		case !exactWidening(from, f.Type):
			return boundsNone
		}
	}
	return rule
}

// exactWidening reports whether every value of type from, and so every
// bound written in it, is exactly a value of type to: integers to a wider
// integer, a double or a decimal; decimals to a wider decimal.
func exactWidening(from, to DataType) bool {
	isInt := func(t DataType) bool { return t == Byte || t == Short || t == Integer || t == Long }
	_, toDecimal := to.(DecimalType)
	if _, ok := from.(DecimalType); ok {
		return toDecimal
	}
	return isInt(from) && (isInt(to) || to == Double || toDecimal)
}
