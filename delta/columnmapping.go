package delta

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	"github.com/google/uuid"
)

// Column mapping (PROTOCOL.md "Column Mapping"): with
// delta.columnMapping.mode name or id, every column has a physical name
// (delta.columnMapping.physicalName) used in data files, partition values
// and statistics, and an id (delta.columnMapping.id) written as the Parquet
// field_id; the schema's names are display names that RENAME changes.

// Column mapping metadata keys and table properties.
const (
	columnMappingPhysicalName = "delta.columnMapping.physicalName"
	columnMappingID           = "delta.columnMapping.id"
	columnMappingModeKey      = "delta.columnMapping.mode"
	columnMappingMaxID        = "delta.columnMapping.maxColumnId"
)

// fieldMetadata decodes a field's metadata object (nil when empty or bad).
func fieldMetadata(f *StructField) map[string]json.RawMessage {
	if len(f.Metadata) < 3 {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(f.Metadata, &m) != nil {
		return nil
	}
	return m
}

// PhysicalName is the column's name in data files, partition values and
// stats: its delta.columnMapping.physicalName, or its name without one.
func PhysicalName(f *StructField) string {
	if raw, ok := fieldMetadata(f)[columnMappingPhysicalName]; ok {
		var name string
		if json.Unmarshal(raw, &name) == nil && name != "" {
			return name
		}
	}
	return f.Name
}

// fieldID is the column's delta.columnMapping.id, if it has one.
func fieldID(f *StructField) (int, bool) {
	raw, ok := fieldMetadata(f)[columnMappingID]
	if !ok {
		return 0, false
	}
	var id int
	if json.Unmarshal(raw, &id) != nil {
		return 0, false
	}
	return id, true
}

// PhysicalSchema returns schema with every field (nested ones too) named by
// its physical name, metadata kept: the schema of the data files. Without
// column mapping it equals schema.
func PhysicalSchema(schema *StructType) *StructType {
	return cloneType(schema, func(f *StructField) { f.Name = PhysicalName(f) }).(*StructType)
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
func AssignColumnMapping(schema *StructType, conf map[string]string) (*StructType, map[string]string, error) {
	if m := conf[columnMappingModeKey]; m == "" || m == "none" {
		return schema, conf, nil
	}
	maxID := 0
	if v, ok := conf[columnMappingMaxID]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %q: %w", columnMappingMaxID, v, err)
		}
		maxID = n
	}
	walkFields(schema, "", func(_ string, f *StructField) {
		if id, ok := fieldID(f); ok {
			maxID = max(maxID, id)
		}
	})
	out := cloneType(schema, nil).(*StructType)
	var err error
	walkFields(out, "", func(path string, f *StructField) {
		md := fieldMetadata(f)
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
		b, merr := marshalNoEscape(md)
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
// ("a.b" for nested ones), whatever the column mapping: writers key them by
// physical name.
func (s *Snapshot) FileStats(a *Add) (*Stats, error) {
	st, err := ParseStats(a.Stats)
	if err != nil {
		return nil, err
	}
	schema, err := s.Schema()
	if err != nil {
		return st, nil
	}
	rename := map[string]string{} // physical path → display path
	var walk func(t DataType, phys, logical string)
	walk = func(t DataType, phys, logical string) {
		if st, ok := t.(*StructType); ok {
			for i := range st.Fields {
				f := &st.Fields[i]
				p, l := phys+PhysicalName(f), logical+f.Name
				if p != l {
					rename[p] = l
				}
				walk(f.Type, p+".", l+".")
			}
		}
	}
	walk(schema, "", "")
	if len(rename) == 0 {
		return st, nil
	}
	st.MinValues, st.MaxValues = renameKeys(st.MinValues, rename), renameKeys(st.MaxValues, rename)
	st.NullCount = renameKeys(st.NullCount, rename)
	return st, nil
}

func renameKeys[V any](m map[string]V, rename map[string]string) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		if to, ok := rename[k]; ok {
			k = to
		}
		out[k] = v
	}
	return out
}
