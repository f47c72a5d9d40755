package schema

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Row is one table row as Go values, aligned with the schema's fields. The Go
// type of each value follows its column's Delta type:
//
//	string → string        long → int64        integer → int32
//	short → int16          byte → int8         float → float32
//	double → float64       boolean → bool      binary → []byte
//	date → time.Time (midnight UTC)            timestamp → time.Time (UTC)
//	timestamp_ntz → time.Time (UTC wall clock) decimal → string ("12.30")
//
// nil is null. Nested types are read as map[string]any (a struct, by
// field name), []any and map[string]any (a map, keyed by its keys' text:
// parquetfile.MapKeyText), and written from the same.
type Row []any

// ParsePartitionValue parses a partitionValues entry into the Go value for
// its column type (see Row). nil and "" are null.
func ParsePartitionValue(t DataType, s *string) (any, error) {
	if s == nil || *s == "" {
		return nil, nil
	}
	v := *s
	switch t {
	case String:
		return v, nil
	case Long:
		return strconv.ParseInt(v, 10, 64)
	case Integer:
		n, err := strconv.ParseInt(v, 10, 32)
		return int32(n), err
	case Short:
		n, err := strconv.ParseInt(v, 10, 16)
		return int16(n), err
	case Byte:
		n, err := strconv.ParseInt(v, 10, 8)
		return int8(n), err
	case Boolean:
		return strconv.ParseBool(v)
	case Float:
		f, err := strconv.ParseFloat(v, 32)
		return float32(f), err
	case Double:
		return strconv.ParseFloat(v, 64)
	case Date:
		return time.Parse(time.DateOnly, v)
	case Timestamp, TimestampNTZ:
		return parsePartitionTimestamp(v)
	case Binary:
		return []byte(v), nil
	}
	if d, ok := t.(DecimalType); ok {
		// Spark 4 writes "0.0000000001", Spark 3.5 "1E-10": both become
		// the plain text of the column's scale a Row holds.
		r, ok := new(big.Rat).SetString(v)
		if !ok || strings.Contains(v, "/") {
			return nil, fmt.Errorf("bad decimal partition value %q", v)
		}
		return r.FloatString(d.Scale), nil
	}
	return nil, fmt.Errorf("type %s cannot be a partition column", t)
}

// parsePartitionTimestamp accepts both forms the protocol allows: ISO 8601
// with a zone ("2024-06-15T19:30:45.000000Z") and "YYYY-MM-DD HH:MM:SS[.f]"
// (read as UTC).
func parsePartitionTimestamp(v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999"} {
		if tm, err := time.Parse(layout, v); err == nil {
			return tm.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("bad timestamp partition value %q", v)
}

// AsInt64 returns an integer value of a Row (any Go integer type) as int64.
func AsInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int16:
		return int64(n), true
	case int8:
		return int64(n), true
	case int:
		return int64(n), true
	}
	return 0, false
}

// AsFloat64 returns a float or double value of a Row as float64.
func AsFloat64(v any) (float64, bool) {
	switch f := v.(type) {
	case float64:
		return f, true
	case float32:
		return float64(f), true
	}
	return 0, false
}
