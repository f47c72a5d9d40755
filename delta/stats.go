package delta

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/deltaflow/deltaflow/delta/schema"
)

// Stats is a parsed add.stats value, from this or any other writer.
//
// MinValues and MaxValues hold the JSON values as decoded with UseNumber:
// json.Number for numbers, string for strings, dates and timestamps (convert
// with StatValue). Columns nested in structs are flattened to dotted paths
// ("a.b"), in MinValues, MaxValues and NullCount alike. NumRecords is -1 when
// the stats do not carry it. TightBounds is nil when absent.
type Stats struct {
	NumRecords  int64
	MinValues   map[string]any
	MaxValues   map[string]any
	NullCount   map[string]int64
	TightBounds *bool
}

// ParseStats parses add.stats. Missing parts are left empty; unknown fields
// are ignored.
func ParseStats(s string) (*Stats, error) {
	var raw struct {
		NumRecords  *json.Number   `json:"numRecords"`
		MinValues   map[string]any `json:"minValues"`
		MaxValues   map[string]any `json:"maxValues"`
		NullCount   map[string]any `json:"nullCount"`
		TightBounds *bool          `json:"tightBounds"`
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("parse stats: %w", err)
	}
	st := &Stats{
		NumRecords:  -1,
		MinValues:   map[string]any{},
		MaxValues:   map[string]any{},
		NullCount:   map[string]int64{},
		TightBounds: raw.TightBounds,
	}
	if raw.NumRecords != nil {
		n, err := raw.NumRecords.Int64()
		if err != nil {
			return nil, fmt.Errorf("parse stats: numRecords %q: %w", *raw.NumRecords, err)
		}
		st.NumRecords = n
	}
	flattenStats("", raw.MinValues, st.MinValues)
	flattenStats("", raw.MaxValues, st.MaxValues)
	counts := map[string]any{}
	flattenStats("", raw.NullCount, counts)
	for k, v := range counts {
		if n, ok := v.(json.Number); ok {
			if c, err := n.Int64(); err == nil {
				st.NullCount[k] = c
			}
		}
	}
	return st, nil
}

func flattenStats(prefix string, in, out map[string]any) {
	for k, v := range in {
		if m, ok := v.(map[string]any); ok {
			flattenStats(prefix+k+".", m, out)
			continue
		}
		if v != nil {
			out[prefix+k] = v
		}
	}
}

// StatValue converts a min/max value from Stats to the Go value of its
// column's type (see Row). Timestamps accept any RFC 3339 offset (Spark
// writes the session time zone's); timestamp_ntz has no zone.
func StatValue(t schema.DataType, v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		switch t {
		case schema.Long:
			return x.Int64()
		case schema.Integer, schema.Short, schema.Byte:
			n, err := x.Int64()
			if err != nil {
				return nil, err
			}
			switch t {
			case schema.Integer:
				return int32(n), nil
			case schema.Short:
				return int16(n), nil
			}
			return int8(n), nil
		case schema.Float:
			f, err := strconv.ParseFloat(x.String(), 32)
			return float32(f), err
		case schema.Double:
			return x.Float64()
		}
		if _, ok := t.(schema.DecimalType); ok {
			return x.String(), nil
		}
	case string:
		switch t {
		case schema.String:
			return x, nil
		case schema.Date:
			return time.Parse(time.DateOnly, x)
		case schema.Timestamp:
			tm, err := time.Parse(time.RFC3339Nano, x)
			return tm.UTC(), err
		case schema.TimestampNTZ:
			return time.Parse("2006-01-02T15:04:05.999999999", x)
		}
	}
	return nil, fmt.Errorf("stat value %v (%T) does not fit type %s", v, v, schema.TypeName(t))
}
