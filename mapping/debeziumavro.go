package mapping

import (
	"fmt"
	"math"
	"strings"

	"github.com/deltaflow/deltaflow/delta"
)

// Debezium's change events in Avro, as Kafka Connect's Avro converters
// write them: the record is the envelope {before, after, source,
// transaction, op, ts_ms, …}, before and after both ["null", Value], Value
// the table's row. Its walk reads after into the row image's nodes, op
// into its node, and only the bytes of before (a delete's row, rare): a
// delete reads them again into the row image's nodes once op is known,
// which comes after both images in the record.
//
// Debezium's semantic types are read as what they mean, in any Avro
// record (an envelope, the flat rows of ExtractNewRecordState, a key):
// io.debezium.data.VariableScaleDecimal (a numeric without precision, a
// record {scale: int, value: bytes}) as a decimal of its own scale, and
// io.debezium.time.ZonedTimestamp (a timestamptz, an ISO-8601 string) as
// an instant, the temporal numbers of connectTimeOf as the dates and
// timestamps they count, as the JSON path reads them. Kafka Connect's
// Decimal is an Avro decimal already (bytes, logicalType decimal, its
// scale in the schema); its Date and Timestamp are often logical types
// date and timestamp-millis too, which read the same.
const (
	debeziumVariableScaleDecimal = "io.debezium.data.VariableScaleDecimal"
	debeziumZonedTimestamp       = "io.debezium.time.ZonedTimestamp"
	// variableScaleDecimalType is the column a VariableScaleDecimal
	// derives: its scale changes from value to value, so no decimal(p,s)
	// is exact for all; this is the decimal Spark infers for a Java
	// BigDecimal. A value of more fraction digits is rounded half up to
	// 18, one of more than 20 integer digits is an overflow.
	variableScaleDecimalPrecision, variableScaleDecimalScale = 38, 18
)

// debeziumType is the compiled type of Debezium semantic type n, of kind
// avNull if it is none: a temporal number (connectTimeOf) is a date, an
// instant or a local date-time of its unit, still a number for an int or
// long column.
func debeziumType(n *avroNode) avroType {
	switch {
	case n.typ == "string" && n.connect == debeziumZonedTimestamp:
		return avroType{kind: avZonedTimestamp}
	case n.typ == "record" && n.name == debeziumVariableScaleDecimal && len(n.fields) == 2 &&
		n.fields[0].name == "scale" && n.fields[0].typ.typ == "int" && n.fields[1].name == "value" && n.fields[1].typ.typ == "bytes":
		return avroType{kind: avVariableDecimal}
	}
	u, found := connectTimeOf([]byte(n.connect))
	switch {
	case !found:
	case u.date && n.typ == "int":
		return avroType{kind: avDate, number: true}
	case !u.date && n.typ == "long" && u.local:
		return avroType{kind: avLocalTimestamp, scale: u.scale, div: u.div, number: true}
	case !u.date && n.typ == "long":
		return avroType{kind: avTimestamp, scale: u.scale, div: u.div, number: true}
	}
	return avroType{kind: avNull}
}

// debeziumDataType is the column type of Debezium semantic type n, nil if
// it is none. Debezium's Timestamp kinds are a timestamp (without time
// zone) column's wall clock: timestamp_ntz, where Spark's from_avro gives
// the int or long it reads, not knowing Kafka Connect's names.
func debeziumDataType(n *avroNode) delta.DataType {
	switch debeziumType(n).kind {
	case avZonedTimestamp, avTimestamp:
		return delta.Timestamp
	case avVariableDecimal:
		return delta.DecimalType{Precision: variableScaleDecimalPrecision, Scale: variableScaleDecimalScale}
	case avDate:
		return delta.Date
	case avLocalTimestamp:
		return delta.TimestampNTZ
	}
	return nil
}

// readVariableDecimal reads a VariableScaleDecimal {scale: int, value:
// bytes} into s (nil: skip it) as the decimal it is.
func readVariableDecimal(b []byte, s *avroSlot) ([]byte, error) {
	scale, rest, err := readVarlong(b)
	if err != nil {
		return nil, err
	}
	if scale < math.MinInt32 || scale > math.MaxInt32 {
		return nil, fmt.Errorf("VariableScaleDecimal scale %d out of range", scale)
	}
	value, rest, err := readBytes(rest)
	if err != nil {
		return nil, err
	}
	if s != nil {
		s.kind, s.b, s.i = avDecimal, value, scale
	}
	return rest, nil
}

// beforeImage is the node key of the bytes of an Avro change event's
// before image: no field is looked up by it, so a column's cdc.before
// path is another node.
const beforeImage = "\x00before"

// addEnvelopeNodes adds the nodes an Avro change event's walk reads into
// besides the columns': op, and the before image's bytes.
func (p *plan) addEnvelopeNodes() {
	p.opNode = p.addPath([]string{"op"})
	p.beforeNode = p.addPath([]string{beforeImage})
	p.nodes[p.beforeNode].span = true
}

// envelopeNode is the node an Avro change event's field name is read
// into when it is a row image (image true): after into the row image's,
// before into the node keeping its bytes.
func envelopeNode(p *plan, node int, name string) (n int, image bool) {
	switch {
	case node != 0 || !p.cdc:
		return -1, false
	case name == "after":
		return p.rowNode, true
	case name == "before":
		return p.beforeNode, true
	}
	return -1, false
}

// envelopeRow is the row record of a Debezium envelope schema: the
// non-null type of its after field, which before shares; or why root is
// no envelope.
func envelopeRow(root *avroNode) (*avroNode, error) {
	if root.typ != "record" {
		return nil, fmt.Errorf("not a Debezium envelope: the schema is a %s, not a record", root.typ)
	}
	images := map[string]*avroNode{}
	hasOp := false
	for _, f := range root.fields {
		switch f.name {
		case "before", "after":
			images[f.name] = nullableRecord(f.typ)
		case "op":
			hasOp = f.typ.typ == "string"
		}
	}
	switch {
	case images["after"] == nil:
		return nil, fmt.Errorf("not a Debezium envelope: record %s has no field after of a nullable record", root.name)
	case images["before"] != images["after"]:
		return nil, fmt.Errorf("not a Debezium envelope: record %s's before is not its after's nullable record", root.name)
	case !hasOp:
		return nil, fmt.Errorf("not a Debezium envelope: record %s has no string field op", root.name)
	}
	return images["after"], nil
}

// nullableRecord is the record of union ["null", record], nil if n is
// not one.
func nullableRecord(n *avroNode) *avroNode {
	if n.typ != "union" || len(n.branches) != 2 {
		return nil
	}
	for i, b := range n.branches {
		if b.typ == "null" && n.branches[1-i].typ == "record" {
			return n.branches[1-i]
		}
	}
	return nil
}

// envelopeColumnsSchema is the schema whose record makes the columns of a
// table of change events: the envelope's row record.
func envelopeColumnsSchema(schema *avroSchema) (*avroSchema, error) {
	row, err := envelopeRow(schema.root)
	if err != nil {
		return nil, err
	}
	return &avroSchema{root: row}, nil
}

// changeEvents makes the reader of envelope root's change events (checked
// by envelopeRow), whose walk build makes, with the before image's type
// bound to the row image's nodes for deletes.
func (c *avroCompiler) changeEvents(root *avroNode, build func(p *plan) values) (func(p *plan) values, error) {
	var before *avroType
	for _, f := range root.fields {
		if f.name == "before" {
			var err error
			if before, err = c.compile(f.typ, c.p.rowNode, "before"); err != nil {
				return nil, err
			}
		}
	}
	return func(p *plan) values {
		return &avroChangeEvents{avroValues: build(p).(*avroValues), before: before}
	}, nil
}

// avroChangeEvents reads Debezium change events in Avro.
type avroChangeEvents struct {
	*avroValues
	before  *avroType // the before field's type, bound to the row image's nodes
	deleted bool
}

func (e *avroChangeEvents) resolve(value []byte) error {
	if err := e.avroValues.resolve(value); err != nil {
		return err
	}
	p := e.p
	image, err := debeziumImage(e.slots[p.opNode].b)
	if err != nil {
		return err
	}
	if e.deleted = image == "before"; e.deleted {
		// The before image, walked once already: this walk costs what that did.
		span := e.spans[p.beforeNode]
		e.steps += avroBudget*len(span) + 64
		if _, err := e.read(e.before, span, p.rowNode, 1); err != nil {
			return &MapError{Reason: "not Avro of the table's schema: " + err.Error()}
		}
	}
	if !e.slots[p.rowNode].set {
		return noImage(image)
	}
	return nil
}

// deletes reports whether the change event just resolved deletes its row.
func (e *avroChangeEvents) deletes() bool { return e.deleted }

// binlogPosition is the binlog position of the change event resolved.
func (e *avroChangeEvents) binlogPosition(c *planColumn) (int64, *MapError) {
	var name []byte
	var nums [2]int64
	for k, node := range c.binlog {
		s := &e.slots[node]
		switch {
		case !s.set:
			return 0, binlogMissing(c, k)
		case k == 0 && s.kind == avString:
			name = s.b
		case k > 0 && (s.kind == avInt || s.kind == avLong):
			nums[k-1] = s.i
		default:
			return 0, binlogNotA(c, k)
		}
	}
	return packBinlog(c, name, nums[0], nums[1])
}

// The change events of a registry topic are those of each record's writer
// schema.

func (r *registryValues) deletes() bool { return r.cur.(changeEvent).deletes() }

func (r *registryValues) binlogPosition(c *planColumn) (int64, *MapError) {
	return r.cur.(changeEvent).binlogPosition(c)
}

// checkEnvelopePaths refuses a column of an Avro change event reading
// cdc.before or cdc.after: the walk reads both images into the row
// image's nodes, which plain paths address.
func (c *Config) checkEnvelopePaths() error {
	for i, col := range c.Columns {
		src := strings.TrimSpace(col.Source)
		for _, image := range []string{"cdc.before", "cdc.after"} {
			if src == image || strings.HasPrefix(src, image+".") {
				return fmt.Errorf("%s.columns[%d].source: %s: an Avro change event's row image is read by plain paths (%s), its before for a delete",
					c.key(), i, src, strings.TrimPrefix(strings.TrimPrefix(src, image), "."))
			}
		}
	}
	return nil
}
