package parquetfile

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta/schema"
)

// typeLeaves is the number of Parquet leaves of a column of type t.
func typeLeaves(t schema.DataType) int {
	switch t := t.(type) {
	case *schema.StructType:
		n := 0
		for _, f := range t.Fields {
			n += typeLeaves(f.Type)
		}
		return n
	case *schema.ArrayType:
		return typeLeaves(t.ElementType)
	case *schema.MapType:
		return typeLeaves(t.KeyType) + typeLeaves(t.ValueType)
	}
	if t == schema.Variant {
		return 2
	}
	return 1
}

// encodeNested is the AppendNested encoding of v, a value of nested column
// col as RowReader.Convert returns it: a struct a map[string]any by field
// name, an array an []any, a map a map[string]any keyed by MapKeyText's
// text of its keys (or a map[any]any keyed by their Go values).
func (s *ParquetSchema) encodeNested(col int, v any) ([]byte, error) {
	f := &s.fields[col]
	var sh shredder
	if err := sh.value(f.Type, v, 0, boolInt(f.Nullable), 0, 0); err != nil {
		return nil, err
	}
	return AppendNested(nil, sh.vals), nil
}

// shredder splits nested Go values into their leaves' values (Dremel's
// record shredding), leaf indexes counted from the column's first.
type shredder struct{ vals []parquet.Value }

// field shreds v, the value of a field, element or map value that may be
// null when optional, at definition level def (its parent's) and
// repetition level rep, inside depth repeated levels.
func (sh *shredder) field(t schema.DataType, v any, optional bool, leaf, def, rep, depth int) error {
	if v == nil {
		if !optional {
			return fmt.Errorf("a null where %s is not nullable", schema.TypeName(t))
		}
		for i := range typeLeaves(t) {
			sh.vals = append(sh.vals, parquet.Value{}.Level(rep, def, leaf+i))
		}
		return nil
	}
	return sh.value(t, v, leaf, def+boolInt(optional), rep, depth)
}

// value shreds v, a present value of type t defined at def.
func (sh *shredder) value(t schema.DataType, v any, leaf, def, rep, depth int) error {
	switch t := t.(type) {
	case *schema.StructType:
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("a struct needs a map[string]any, not %T", v)
		}
		known := 0
		for _, f := range t.Fields {
			fv, has := m[f.Name]
			if has {
				known++
			}
			if err := sh.field(f.Type, fv, f.Nullable, leaf, def, rep, depth); err != nil {
				return fmt.Errorf("field %q: %w", f.Name, err)
			}
			leaf += typeLeaves(f.Type)
		}
		if known != len(m) {
			for k := range m {
				if t.Field(k) == nil {
					return fmt.Errorf("no struct field %q", k)
				}
			}
		}
		return nil
	case *schema.ArrayType:
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("an array needs an []any, not %T", v)
		}
		if len(a) == 0 {
			return sh.field(t.ElementType, nil, true, leaf, def, rep, depth)
		}
		for i, e := range a {
			if err := sh.field(t.ElementType, e, t.ContainsNull, leaf, def+1, rep, depth+1); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
			rep = depth + 1
		}
		return nil
	case *schema.MapType:
		keys, vals, err := mapEntries(t.KeyType, v)
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			if err := sh.field(t.KeyType, nil, true, leaf, def, rep, depth); err != nil {
				return err
			}
			return sh.field(t.ValueType, nil, true, leaf+typeLeaves(t.KeyType), def, rep, depth)
		}
		for i, k := range keys {
			if err := sh.value(t.KeyType, k, leaf, def+1, rep, depth+1); err != nil {
				return fmt.Errorf("map key %v: %w", k, err)
			}
			if err := sh.field(t.ValueType, vals[i], t.ValueContainsNull, leaf+typeLeaves(t.KeyType), def+1, rep, depth+1); err != nil {
				return fmt.Errorf("map value of %v: %w", k, err)
			}
			rep = depth + 1
		}
		return nil
	}
	pv, ok, err := primitiveValue(t, v)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("cannot write %v (%T) as %s", v, v, schema.TypeName(t))
	}
	sh.vals = append(sh.vals, pv.Level(rep, def, leaf))
	return nil
}

// mapEntries are the keys (as Go values of keyType) and values of the map
// v, in the order of their keys' text: Go maps have none, and a file
// should not depend on the run.
func mapEntries(keyType schema.DataType, v any) (keys, vals []any, err error) {
	switch m := v.(type) {
	case map[string]any:
		for _, text := range slices.Sorted(maps.Keys(m)) {
			k, err := parseMapKey(keyType, text)
			if err != nil {
				return nil, nil, fmt.Errorf("map key %q: %w", text, err)
			}
			keys, vals = append(keys, k), append(vals, m[text])
		}
	case map[any]any:
		type entry struct {
			text string
			k, v any
		}
		entries := make([]entry, 0, len(m))
		for k, e := range m {
			if k == nil {
				return nil, nil, fmt.Errorf("a null map key")
			}
			entries = append(entries, entry{MapKeyText(keyType, k), k, e})
		}
		slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(a.text, b.text) })
		for _, e := range entries {
			keys, vals = append(keys, e.k), append(vals, e.v)
		}
	default:
		return nil, nil, fmt.Errorf("a map needs a map[string]any or map[any]any, not %T", v)
	}
	return keys, vals, nil
}

// MapKeyText renders a map key k of type t as RowReader keys maps
// (map[string]any): strings and binaries as they are, numbers and booleans
// as Go formats them (floats in the shortest form that reads back), dates
// as 2006-01-02, timestamps in RFC 3339 with nanoseconds, UTC. AppendValue
// parses it back to the same key.
func MapKeyText(t schema.DataType, k any) string {
	switch x := k.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case time.Time:
		if t == schema.Date {
			return x.Format(time.DateOnly)
		}
		return x.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprint(k)
}

// parseMapKey is the key of type t that MapKeyText renders as s.
func parseMapKey(t schema.DataType, s string) (any, error) {
	switch t {
	case schema.String:
		return s, nil
	case schema.Binary:
		return []byte(s), nil
	case schema.Long, schema.Integer, schema.Short, schema.Byte:
		return strconv.ParseInt(s, 10, 64)
	case schema.Float, schema.Double:
		return strconv.ParseFloat(s, 64)
	case schema.Boolean:
		return strconv.ParseBool(s)
	case schema.Date:
		return time.Parse(time.DateOnly, s)
	case schema.Timestamp, schema.TimestampNTZ:
		return time.Parse(time.RFC3339Nano, s)
	}
	if _, ok := t.(schema.DecimalType); ok {
		return s, nil
	}
	return nil, fmt.Errorf("map keys of type %s are not supported", schema.TypeName(t))
}
