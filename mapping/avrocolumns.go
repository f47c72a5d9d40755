package mapping

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/deltaflow/deltaflow/delta"
)

// ErrAvroTypeNotSupported is wrapped by the error of a schema whose
// fields make no columns, for an Avro type no column type holds: a
// decimal of more than 38 digits, a recursive record, a union of nothing
// but null. The route names such fields in columns with a path to their
// values, or leaves them out.
var ErrAvroTypeNotSupported = errors.New("no column type for this Avro type")

// avroColumns derives a table's columns from an Avro record schema, one per
// field in schema order, with the Delta types Spark's from_avro gives them:
// boolean, int → integer, long → long, float, double, string, enum →
// string, int with logical type date → date, long with timestamp-millis,
// -micros or -nanos → timestamp (µs: nanoseconds are cut), long with
// local-timestamp-millis, -micros or -nanos → timestamp_ntz (likewise),
// time-millis → integer and time-micros → long (from_avro ignores both),
// uuid → string, bytes or fixed with logical type decimal → decimal(p,s)
// (p ≤ 38), other bytes and fixed → binary, record → struct, array →
// array, map → map<string, T>; Debezium's and Kafka Connect's semantic
// types as debeziumDataType says.
// A union of null and one type is that type, nullable; of int and long
// a long, of float and double a double; any other union a struct of one
// nullable field per non-null type, member0, member1, … (from_avro's
// names), nullable when null is among its types. Any other field is not
// nullable (a null sends the record to the DLQ); inside a struct, array
// or map everything is nullable, unlike from_avro, as in the types a
// route declares (a later version of the schema may drop a field of a
// nested record too). A recursive record makes no column.
func avroColumns(schema *avroSchema) ([]Column, error) {
	root := schema.root
	if root.typ != "record" {
		return nil, fmt.Errorf("the schema is a %s, not a record", root.typ)
	}
	cols := make([]Column, 0, len(root.fields))
	var errs []string
	for _, f := range root.fields {
		typ, nullable, err := avroColumnType(f.typ)
		if err != nil {
			errs = append(errs, fmt.Sprintf("field %s: %v", f.name, err))
			continue
		}
		cols = append(cols, Column{Name: f.name, Type: typ, Source: f.name, Nullable: &nullable})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s (give columns with paths to the values to keep)", ErrAvroTypeNotSupported, strings.Join(errs, "; "))
	}
	return cols, nil
}

// avroColumnType is the column type of an Avro field's type, and whether
// it is nullable.
func avroColumnType(n *avroNode) (typ string, nullable bool, err error) {
	t, nullable, err := avroDataType(n, nil)
	if err != nil {
		return "", false, err
	}
	return typeDDL(t), nullable, nil
}

// avroDataType is the Delta type of Avro type n, and whether it is
// nullable; inside are the records n is in, to refuse a recursive one.
func avroDataType(n *avroNode, inside []*avroNode) (delta.DataType, bool, error) {
	if t := debeziumDataType(n); t != nil {
		return t, false, nil
	}
	switch n.typ {
	case "union":
		var types []*avroNode
		nullable := false
		for _, b := range n.branches {
			if b.typ == "null" {
				nullable = true
			} else {
				types = append(types, b)
			}
		}
		switch {
		case len(types) == 0:
			return nil, false, fmt.Errorf("union of %s: no type but null", unionTypes(n))
		case len(types) == 1:
			t, _, err := avroDataType(types[0], inside)
			return t, nullable, err
		case len(types) == 2 && plainPair(types, "int", "long"):
			return delta.Long, nullable, nil
		case len(types) == 2 && plainPair(types, "float", "double"):
			return delta.Double, nullable, nil
		}
		st := &delta.StructType{}
		for i, b := range types {
			t, _, err := avroDataType(b, inside)
			if err != nil {
				return nil, false, fmt.Errorf("union of %s: %w", unionTypes(n), err)
			}
			st.Fields = append(st.Fields, delta.StructField{Name: "member" + strconv.Itoa(i), Type: t, Nullable: true})
		}
		return st, nullable, nil
	case "record", "error":
		if slices.Contains(inside, n) {
			return nil, false, fmt.Errorf("record %s is recursive (it holds itself): no column holds it", n.name)
		}
		if len(n.fields) == 0 {
			return nil, false, fmt.Errorf("record %s has no fields: Parquet holds no empty struct", n.name)
		}
		st := &delta.StructType{}
		for _, f := range n.fields {
			t, _, err := avroDataType(f.typ, append(slices.Clip(inside), n))
			if err != nil {
				return nil, false, fmt.Errorf("field %s: %w", f.name, err)
			}
			st.Fields = append(st.Fields, delta.StructField{Name: f.name, Type: t, Nullable: true})
		}
		return st, false, nil
	case "array", "map":
		t, _, err := avroDataType(n.items, inside)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", n.typ, err)
		}
		if n.typ == "map" {
			return &delta.MapType{KeyType: delta.String, ValueType: t, ValueContainsNull: true}, false, nil
		}
		return &delta.ArrayType{ElementType: t, ContainsNull: true}, false, nil
	case "boolean":
		return delta.Boolean, false, nil
	case "float":
		return delta.Float, false, nil
	case "double":
		return delta.Double, false, nil
	case "string", "enum":
		return delta.String, false, nil
	case "int":
		if n.logical == "date" {
			return delta.Date, false, nil
		}
		return delta.Integer, false, nil
	case "long":
		switch n.logical {
		case "timestamp-millis", "timestamp-micros", "timestamp-nanos":
			return delta.Timestamp, false, nil
		case "local-timestamp-millis", "local-timestamp-micros", "local-timestamp-nanos":
			return delta.TimestampNTZ, false, nil
		}
		return delta.Long, false, nil
	case "bytes", "fixed":
		if n.logical != "decimal" {
			return delta.Binary, false, nil
		}
		d, err := avroDecimal(n)
		switch {
		case err != nil: // ignored, as readers must: plain bytes or fixed
			return delta.Binary, false, nil
		case d.Precision > delta.MaxDecimalPrecision:
			return nil, false, fmt.Errorf("%s with logical type decimal: %s has more digits than a decimal column holds (%d)", n.typ, d, delta.MaxDecimalPrecision)
		}
		return d, false, nil
	}
	return nil, false, fmt.Errorf("%s has no column type", n.typ)
}

// plainPair says whether types are a and b, without logical types.
func plainPair(types []*avroNode, a, b string) bool {
	x, y := types[0], types[1]
	return x.logical == "" && y.logical == "" && (x.typ == a && y.typ == b || x.typ == b && y.typ == a)
}

func unionTypes(n *avroNode) string {
	names := make([]string, len(n.branches))
	for i, b := range n.branches {
		names[i] = b.typ
	}
	return strings.Join(names, ", ")
}

// avroDecimal is the decimal(p,s) of a bytes or fixed type with logical
// type decimal, if the specification has it valid: 0 < precision, 0 ≤
// scale ≤ precision, and for a fixed a precision its size holds (Java's
// Avro: ⌊log10(2)·(8·size−1)⌋ digits). An invalid decimal is ignored, as
// readers must: the type is plain bytes or fixed.
func avroDecimal(n *avroNode) (delta.DecimalType, error) {
	d := delta.DecimalType{Precision: n.precision, Scale: n.scale}
	switch {
	case n.precision <= 0:
		return d, errors.New("no valid precision")
	case n.scale < 0 || n.scale > n.precision:
		return d, fmt.Errorf("scale %d outside 0 to the precision %d", n.scale, n.precision)
	case n.typ == "fixed":
		if most := int(math.Floor(math.Log10(2) * float64(8*n.size-1))); n.precision > most {
			return d, fmt.Errorf("fixed(%d) holds %d digits, not %d", n.size, max(most, 0), n.precision)
		}
	}
	return d, nil
}
