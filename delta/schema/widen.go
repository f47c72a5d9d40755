package schema

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/deltaflow/deltaflow/delta/internal/jsonenc"
)

// TypeChangesKey is the field metadata key holding a column's type changes
// (PROTOCOL.md "Type Widening", Type Change Metadata).
const TypeChangesKey = "delta.typeChanges"

// EnableTypeWidening is the table property that lets writers widen a
// column's type; TypeWideningHint says how to set it.
const (
	EnableTypeWidening = "delta.enableTypeWidening"
	TypeWideningHint   = "the table does not allow type widening: set its property " + EnableTypeWidening +
		" (Spark: ALTER TABLE ... SET TBLPROPERTIES ('" + EnableTypeWidening + "' = 'true'))"
)

// CanWiden reports whether a column of type from may take type to by type
// widening: the changes PROTOCOL.md "Type Widening" allows (byte → short →
// integer → long; float → double; byte, short or integer → double;
// decimal(p,s) → decimal(p+k1,s+k2), byte, short or integer →
// decimal(10+k1,k2) and long → decimal(20+k1,k2), k1 ≥ k2 ≥ 0) but date →
// timestamp_ntz, as the data file reader does not read DATE values as
// timestamp_ntz.
func CanWiden(from, to DataType) bool {
	rank := map[DataType]int{Byte: 1, Short: 2, Integer: 3, Long: 4}
	switch {
	case from == to:
		return false
	case rank[from] > 0 && rank[to] > 0:
		return rank[from] < rank[to]
	case from == Float:
		return to == Double
	case to == Double:
		return rank[from] > 0 && from != Long
	}
	d, ok := to.(DecimalType)
	if !ok {
		return false
	}
	var p, s int // the narrowest decimal holding every value of from
	switch f := from.(type) {
	case DecimalType:
		p, s = f.Precision, f.Scale
	case PrimitiveType:
		if rank[f] == 0 {
			return false
		}
		p = 10
		if f == Long {
			p = 20
		}
	default:
		return false
	}
	k1, k2 := d.Precision-p, d.Scale-s
	return k1 >= k2 && k2 >= 0
}

// typeChange is one entry of delta.typeChanges, its keys in Delta Spark's
// order.
type typeChange struct {
	ToType   json.RawMessage `json:"toType"`
	FromType json.RawMessage `json:"fromType"`
}

// Widen returns top-level field f with type to, the change appended to its
// delta.typeChanges (the earlier ones kept, as writers must).
func Widen(f StructField, to DataType) (StructField, error) {
	md := FieldMetadata(&f)
	if md == nil {
		md = map[string]json.RawMessage{}
	}
	var changes []json.RawMessage
	if raw, ok := md[TypeChangesKey]; ok {
		if err := json.Unmarshal(raw, &changes); err != nil {
			return f, fmt.Errorf("column %s: %s: %w", f.Name, TypeChangesKey, err)
		}
	}
	var from, into bytes.Buffer
	if err := writeType(&from, f.Type); err != nil {
		return f, err
	}
	if err := writeType(&into, to); err != nil {
		return f, err
	}
	change, err := jsonenc.Marshal(typeChange{ToType: into.Bytes(), FromType: from.Bytes()})
	if err != nil {
		return f, fmt.Errorf("column %s: %w", f.Name, err)
	}
	if md[TypeChangesKey], err = jsonenc.Marshal(append(changes, change)); err != nil {
		return f, fmt.Errorf("column %s: %w", f.Name, err)
	}
	if f.Metadata, err = jsonenc.Marshal(md); err != nil {
		return f, fmt.Errorf("column %s: %w", f.Name, err)
	}
	f.Type = to
	return f, nil
}
