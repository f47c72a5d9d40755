package mapping

import (
	"encoding/base64"
	"strconv"

	"github.com/valyala/fastjson"
)

// Debezium's decimals, in its default decimal.handling.mode=precise: a
// numeric(p,s) is a JSON string, the base64 of its unscaled value's
// big-endian two's complement, whose scale only the schema tells (Kafka
// Connect's Decimal logical type, parameters.scale); a numeric without
// precision is an object {"scale": s, "value": base64}
// (io.debezium.data.VariableScaleDecimal), which carries its own.
const connectDecimalName = "org.apache.kafka.connect.data.Decimal"

// connectDecimal casts a change event's (or its key's) decimal string s
// into decimal column c: at the scale its field's schema gives; without schemas.enable
// at the column's own scale, the only one known (so a numeric(p,s) needs a
// decimal column of the same scale). A field the schema has as anything
// but a Decimal (decimal.handling.mode=string makes a string) is read as
// the text of a number, as any JSON string.
func (j *jsonValues) connectDecimal(c *planColumn, s []byte, out *cell) failure {
	scale := c.dec.scale
	if f := j.fieldSchema(c.src.path); f != nil {
		if string(f.GetStringBytes("name")) != connectDecimalName {
			return c.dec.castText(s, true, out)
		}
		n, good := smallInt(f.GetStringBytes("parameters", "scale"))
		if !good {
			return failCast
		}
		scale = n
	}
	return j.castUnscaled(c, s, scale, out)
}

// variableScaleDecimal casts a VariableScaleDecimal {scale, value} into
// decimal column c; detail is its value for an error.
func (j *jsonValues) variableScaleDecimal(c *planColumn, v *fastjson.Value, out *cell) (failure, []byte) {
	sv, val := v.Get("scale"), v.Get("value")
	if sv == nil || val == nil || sv.Type() != fastjson.TypeNumber || val.Type() != fastjson.TypeString {
		return failType, nil
	}
	b, _ := val.StringBytes()
	scale, err := sv.Int()
	if err != nil {
		return failCast, b
	}
	return j.castUnscaled(c, b, scale, out), b
}

// castUnscaled casts the base64 of an unscaled value of scale from.
func (j *jsonValues) castUnscaled(c *planColumn, s []byte, from int, out *cell) failure {
	n := base64.StdEncoding.DecodedLen(len(s))
	if cap(j.unscaled) < n {
		j.unscaled = make([]byte, n)
	}
	n, err := base64.StdEncoding.Decode(j.unscaled[:n], s)
	if err != nil {
		return failCast
	}
	return c.dec.castTwosComplement(j.unscaled[:n], from, out)
}

// fieldSchema is the schema (schemas.enable) of the field at a column's
// source path in a change event: cdc.<path> in the envelope, any other
// path in the row image; in a record key (no change event), the key's own
// field. Nil without a schema, or one without the field.
func (j *jsonValues) fieldSchema(path []string) *fastjson.Value {
	s := j.schema
	switch {
	case !j.p.cdc:
	case len(path) > 1 && path[0] == "cdc":
		path = path[1:]
	default:
		s = schemaField(s, j.image)
	}
	for _, name := range path {
		s = schemaField(s, name)
	}
	return s
}

// schemaField is the schema of struct schema s's field name, nil if none.
func schemaField(s *fastjson.Value, name string) *fastjson.Value {
	if s == nil {
		return nil
	}
	for _, f := range s.GetArray("fields") {
		if string(f.GetStringBytes("field")) == name {
			return f
		}
	}
	return nil
}

// smallInt parses a scale's decimal digits (Kafka Connect writes
// parameters as strings), without allocating; at most 4 digits.
func smallInt(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 4 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// debeziumImage is the row image a change event of operation op holds
// its row in: after for a create, an update or a snapshot read, before
// for a delete; the same for every format.
func debeziumImage(op []byte) (string, *MapError) {
	switch string(op) {
	case "c", "u", "r":
		return "after", nil
	case "d":
		return "before", nil
	case "":
		return "", &MapError{Reason: "not a Debezium change event (no op)"}
	}
	return "", &MapError{Reason: "Debezium operation " + strconv.Quote(string(op)) + " is not supported"}
}

// noImage is the dead letter of a change event without the image its
// operation reads.
func noImage(image string) *MapError {
	return &MapError{Reason: "Debezium change event without its " + image + " image"}
}

// castTimestampText casts the text of an instant (RFC 3339: a JSON
// string, Debezium's ZonedTimestamp in any format) into timestamp or date
// column c.
func castTimestampText(c *planColumn, s []byte, out *cell) failure {
	if c.kind != kTimestamp && c.kind != kDate {
		return failType
	}
	us, good := parseTimestamp(s)
	if !good {
		return failTimestamp
	}
	return castMicros(us, c, out)
}

// connectTime is the unit of a Kafka Connect or Debezium temporal type: a
// number of days since the epoch (date), or of µs = n * scale / div since
// it, an instant, or a wall clock without zone (local) read as UTC.
type connectTime struct {
	date, local bool
	scale, div  int64
}

// connectTimeOf is the unit of the temporal type Kafka Connect's schema
// names name (a JSON schema's name, an Avro schema's connect.name), false
// if it is none. Debezium's Timestamp kinds are a timestamp column's
// (without time zone) wall clock, which its documentation has as the
// number of its unit since the epoch, the local date-time read as UTC.
// Its time-of-day types (Time, MicroTime, NanoTime) are none: no column
// type holds a time of day, they stay numbers.
func connectTimeOf(name []byte) (connectTime, bool) {
	switch string(name) {
	case "io.debezium.time.Date", "org.apache.kafka.connect.data.Date":
		return connectTime{date: true}, true
	case "org.apache.kafka.connect.data.Timestamp": // java.util.Date: an instant
		return connectTime{scale: 1000, div: 1}, true
	case "io.debezium.time.Timestamp":
		return connectTime{local: true, scale: 1000, div: 1}, true
	case "io.debezium.time.MicroTimestamp":
		return connectTime{local: true, scale: 1, div: 1}, true
	case "io.debezium.time.NanoTimestamp":
		return connectTime{local: true, scale: 1, div: 1000}, true
	}
	return connectTime{}, false
}

// castConnectTime casts a change event's (or its key's) number n into date,
// timestamp or timestamp_ntz column c as the temporal type its field's
// schema names: a timestamp is its wall clock read as UTC (or a Kafka
// Connect Timestamp's instant), a date its UTC date. Without
// schemas.enable, or for a field of another type, no unit is known: a
// number is no date or timestamp (failType), as for any JSON.
func (j *jsonValues) castConnectTime(c *planColumn, v *fastjson.Value, out *cell) (failure, []byte) {
	f := j.fieldSchema(c.src.path)
	if f == nil {
		return failType, nil
	}
	u, found := connectTimeOf(f.GetStringBytes("name"))
	if !found {
		return failType, nil
	}
	j.num = v.MarshalTo(j.num[:0])
	n, fl := parseInteger(j.num, false)
	switch {
	case fl != ok:
		return fl, j.num
	case u.date:
		return castDays(n, c, out), j.num
	}
	return castMicros(scaleMicros(n, u.scale, u.div), c, out), j.num
}
