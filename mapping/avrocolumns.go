package mapping

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/deltaflow/deltaflow/delta"
)

// ErrAvroTypeNotSupported is wrapped by the error of a schema whose fields make no columns, for an Avro
// type no column type holds yet (records, arrays, maps, bytes, fixed,
// decimals of more than 38 digits, general unions): the
// route names such fields in columns with a path to their scalars, or
// leaves them out.
var ErrAvroTypeNotSupported = errors.New("no column type for this Avro type yet")

// avroColumns derives a table's columns from an Avro record schema, one per
// field in schema order, with the Delta types Spark's from_avro gives them:
// boolean, int → integer, long → long, float, double, string, enum →
// string, int with logical type date → date, long with timestamp-millis,
// -micros or -nanos → timestamp (µs: nanoseconds are cut), long with
// local-timestamp-millis, -micros or -nanos → timestamp_ntz (likewise),
// time-millis → integer and time-micros → long (from_avro ignores both),
// uuid → string, bytes or fixed with logical type decimal → decimal(p,s)
// (p ≤ 38).
// A union of null and one type is that type, nullable; any other field is
// not nullable (a null sends the record to the DLQ).
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
	if n.typ == "union" {
		var inner *avroNode
		for _, b := range n.branches {
			switch {
			case b.typ == "null":
				nullable = true
			case inner != nil:
				return "", false, fmt.Errorf("union of %s: only a union of null and one type makes a column", unionTypes(n))
			default:
				inner = b
			}
		}
		if inner == nil || !nullable {
			return "", false, fmt.Errorf("union of %s: only a union of null and one type makes a column", unionTypes(n))
		}
		typ, _, err = avroColumnType(inner)
		return typ, true, err
	}
	switch n.typ {
	case "boolean", "float", "double":
		return n.typ, false, nil
	case "string", "enum":
		return "string", false, nil
	case "int":
		if n.logical == "date" {
			return "date", false, nil
		}
		return "integer", false, nil
	case "long":
		switch n.logical {
		case "timestamp-millis", "timestamp-micros", "timestamp-nanos":
			return "timestamp", false, nil
		case "local-timestamp-millis", "local-timestamp-micros", "local-timestamp-nanos":
			return "timestamp_ntz", false, nil
		}
		return "long", false, nil
	case "bytes", "fixed":
		if n.logical != "decimal" {
			break
		}
		d, err := avroDecimal(n)
		switch {
		case err != nil:
			return "", false, fmt.Errorf("%s with logical type decimal: %v, so plain %s, which has no column type yet", n.typ, err, n.typ)
		case d.Precision > delta.MaxDecimalPrecision:
			return "", false, fmt.Errorf("%s with logical type decimal: %s has more digits than a decimal column holds (%d)", n.typ, d, delta.MaxDecimalPrecision)
		}
		return d.String(), false, nil
	}
	what := n.typ
	if n.logical != "" {
		what += " with logical type " + n.logical
	}
	return "", false, fmt.Errorf("%s has no column type yet", what)
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
