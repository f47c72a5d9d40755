package mapping

import (
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/twmb/avro"
)

// avroValues finds the values of a plan's source paths in Avro records
// written with one schema (the writer schema; records carry no schema of
// their own), decoded with twmb/avro into maps: a path walks the nested
// records.
type avroValues struct {
	p      *plan
	schema *avro.Schema
	rec    map[string]any
	vals   []any // value found at each node; nil: absent or null
}

func newAvroValues(schema *avro.Schema) func(p *plan) values {
	return func(p *plan) values {
		return &avroValues{p: p, schema: schema, vals: make([]any, len(p.nodes))}
	}
}

func (v *avroValues) resolve(value []byte) *MapError {
	clear(v.vals)
	clear(v.rec)
	rest, err := v.schema.Decode(value, &v.rec)
	switch {
	case err != nil:
		return &MapError{Reason: "not Avro of the table's schema: " + err.Error()}
	case len(rest) > 0:
		return &MapError{Reason: fmt.Sprintf("not Avro of the table's schema: %d bytes after the record", len(rest))}
	}
	v.vals[0] = v.rec
	for i := 1; i < len(v.p.nodes); i++ {
		n := &v.p.nodes[i]
		if parent, ok := v.vals[n.parent].(map[string]any); ok {
			v.vals[i] = parent[n.key]
		}
	}
	return nil
}

// cast converts the decoded Avro value of column c's node: the Go types
// twmb/avro decodes into (int32 and int64 for int and long, float32 and
// float64, string, bool, time.Time for date and timestamp logical types,
// time.Duration for time-millis, into an integer column as milliseconds,
// and time-micros, into a long as microseconds).
func (v *avroValues) cast(c *planColumn, a *Arena, out *cell) (failure, []byte) {
	switch x := v.vals[c.node].(type) {
	case nil:
		out.null = true
		return ok, nil
	case string:
		if c.kind != kString {
			return failType, nil
		}
		if !utf8.ValidString(x) {
			return failUTF8, nil
		}
		out.b = a.CopyString(x)
		return ok, nil
	case bool:
		if c.kind != kBoolean {
			return failType, nil
		}
		if x {
			out.i = 1
		}
		return ok, nil
	case int32:
		return castInteger(c, int64(x), out)
	case int64:
		return castInteger(c, x, out)
	case float32:
		return castFloat(c, float64(x), out)
	case float64:
		return castFloat(c, x, out)
	case time.Duration: // time-millis and time-micros: the column holds the number
		if c.kind == kInteger {
			return castInteger(c, x.Milliseconds(), out)
		}
		return castInteger(c, x.Microseconds(), out)
	case time.Time:
		if c.kind != kTimestamp && c.kind != kDate {
			return failType, nil
		}
		if y := x.Year(); y < 1 || y > 9999 {
			return failRange, nil
		}
		out.i = x.UnixMicro()
		if c.kind == kDate {
			out.i = floorDiv(out.i, microsDay)
		}
		return ok, nil
	}
	return failType, nil
}

// castInteger puts an Avro int or long into an integer, long, float or
// double column.
func castInteger(c *planColumn, n int64, out *cell) (failure, []byte) {
	switch c.kind {
	case kInteger:
		if n < math.MinInt32 || n > math.MaxInt32 {
			return failOverflow, nil
		}
		out.i = n
	case kLong:
		out.i = n
	case kFloat, kDouble:
		out.f = float64(n)
	default:
		return failType, nil
	}
	return ok, nil
}

// castFloat puts an Avro float or double into a float or double column.
func castFloat(c *planColumn, x float64, out *cell) (failure, []byte) {
	switch {
	case c.kind != kFloat && c.kind != kDouble:
		return failType, nil
	case math.IsNaN(x) || math.IsInf(x, 0):
		return failNotFinite, nil
	case c.kind == kFloat && math.IsInf(float64(float32(x)), 0):
		return failOverflow, nil
	}
	out.f = x
	return ok, nil
}

// kindOf names the Avro type of the value found at node.
func (v *avroValues) kindOf(node int) string {
	switch v.vals[node].(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case int32:
		return "int"
	case int64:
		return "long"
	case float32:
		return "float"
	case float64:
		return "double"
	case time.Time:
		return "timestamp"
	case time.Duration:
		return "time"
	case map[string]any:
		return "record or map"
	case []any:
		return "array"
	case []byte:
		return "bytes"
	}
	return "value"
}
