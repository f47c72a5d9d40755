package mapping

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/avro"
)

// ErrAvroTypeNotSupported is wrapped by AvroColumns' error for an Avro
// type no column type holds yet (records, arrays, maps, bytes, fixed,
// decimals, general unions, local timestamps): the route names such fields
// in columns with a path to their scalars, or leaves them out.
var ErrAvroTypeNotSupported = errors.New("no column type for this Avro type yet")

// AvroColumns derives a table's columns from an Avro record schema, one per
// field in schema order, with the Delta types Spark's from_avro gives them:
// boolean, int → integer, long → long, float, double, string, enum →
// string, int with logical type date → date, long with timestamp-millis,
// -micros or -nanos → timestamp (µs: nanoseconds are cut), time-millis →
// integer and time-micros → long (from_avro ignores both), uuid → string.
// A union of null and one type is that type, nullable; any other field is
// not nullable (a null sends the record to the DLQ).
func AvroColumns(schema *avro.Schema) ([]Column, error) {
	root := schema.Root().ExpandReferences() // a named type used twice is spelled once
	if root.Type != "record" {
		return nil, fmt.Errorf("the schema is a %s, not a record", root.Type)
	}
	cols := make([]Column, 0, len(root.Fields))
	var errs []string
	for _, f := range root.Fields {
		typ, nullable, err := avroColumnType(&f.Type)
		if err != nil {
			errs = append(errs, fmt.Sprintf("field %s: %v", f.Name, err))
			continue
		}
		cols = append(cols, Column{Name: f.Name, Type: typ, Source: f.Name, Nullable: &nullable})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s (give columns with paths to the values to keep)", ErrAvroTypeNotSupported, strings.Join(errs, "; "))
	}
	return cols, nil
}

// avroColumnType is the column type of an Avro field's type, and whether
// it is nullable.
func avroColumnType(n *avro.SchemaNode) (typ string, nullable bool, err error) {
	if n.Type == "union" {
		var inner *avro.SchemaNode
		for i := range n.Branches {
			switch b := &n.Branches[i]; {
			case b.Type == "null":
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
	switch n.Type {
	case "boolean", "float", "double":
		return n.Type, false, nil
	case "string", "enum":
		return "string", false, nil
	case "int":
		if n.LogicalType == "date" {
			return "date", false, nil
		}
		return "integer", false, nil
	case "long":
		switch n.LogicalType {
		case "timestamp-millis", "timestamp-micros", "timestamp-nanos":
			return "timestamp", false, nil
		case "local-timestamp-millis", "local-timestamp-micros", "local-timestamp-nanos":
			return "", false, fmt.Errorf("long with logical type %s (timestamp_ntz) has no column type yet", n.LogicalType)
		}
		return "long", false, nil
	}
	what := n.Type
	if n.LogicalType != "" {
		what += " with logical type " + n.LogicalType
	}
	return "", false, fmt.Errorf("%s has no column type yet", what)
}

func unionTypes(n *avro.SchemaNode) string {
	names := make([]string, len(n.Branches))
	for i, b := range n.Branches {
		names[i] = b.Type
	}
	return strings.Join(names, ", ")
}
