package mapping

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/valyala/fastjson"

	"github.com/deltaflow/deltaflow/delta"
)

// Record is a Kafka record as the mapper sees it.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time // zero: none (null in kafka.timestamp columns)
	Key       []byte
	Value     []byte // nil: a tombstone
}

// plan is the compiled, immutable part of a Mapper, shared by clones.
type plan struct {
	cfg       Config // what it was compiled from, its columns settled
	cols      []planColumn
	nodes     []node // JSON path prefixes; nodes[0] is the record itself
	strict    bool
	maxBytes  int
	schema    *delta.StructType
	data      *delta.StructType
	partNames []string
	partIdx   []int    // column index of each partition column
	partKeys  [][]byte // escaped "name=" of each partition column
	leaves    int      // values of a row, len(Row.Values): a column's one, a variant's two
	variants  bool     // some column is a variant
	// nestedCols counts the struct, array and map columns (nestedColumn.idx).
	nestedCols int
	paths      PathLimits
	// values makes a Mapper's reader of the records' format.
	values func(p *plan) values
	// unwrap: a JSON value {"schema": …, "payload": …} (Kafka Connect's
	// JSON converter with schemas.enable) is read as its payload. cdc:
	// values are Debezium change events, whose row image (after, or before
	// for a delete) is node rowNode.
	unwrap, cdc bool
	rowNode     int
	// opNode and beforeNode, in an Avro change event, are where its op and
	// the bytes of its before image are read (debeziumavro.go).
	opNode, beforeNode int
	// connect: decimals are Kafka Connect's (Debezium's), base64 strings
	// and {scale, value} objects; in a change event's value and in its
	// key, which Debezium encodes alike.
	connect bool
	// key, when columns read fields of the record key (kafka.key.<path>),
	// is the plan of those paths in the key's format: its cols are those
	// columns, each at its node of key's paths.
	key *plan
}

// values finds the values of a plan's source paths in one record's value,
// in one format (JSON, Avro), and casts them to their columns' types: the
// Mapper does the rest (kafka.* and other sources, nulls, partition values
// and the routing key) the same for every format.
type values interface {
	// resolve decodes value and finds the value of every path node; an
	// error is a *MapError or a *SchemaPendingError.
	resolve(value []byte) error
	// cast converts the value found at column c's node (none: null) into
	// out, zero on entry; detail is the offending text for an error.
	cast(c *planColumn, a *Arena, out *cell) (failure, []byte)
	// kindOf names the type of the value found at node, for errors.
	kindOf(node int) string
}

// PathLimits bound a row's partition directory (Row.Key) to what the store
// takes; a row past them is rejected with a *MapError naming the column and
// the length, rather than failing its upload for good. Zero is unbounded.
type PathLimits struct {
	// Segment is the longest directory name ("device_type=…"), in bytes:
	// 255 on local disk and MinIO (storage.KeyLimits.Segment).
	Segment int
	// Dir is the longest partition directory ("device_type=…/event_date=…"),
	// in bytes: what the store's longest key leaves once the table's
	// root and the data file's name are counted.
	Dir int
}

type planColumn struct {
	compiledColumn
	kind     kind // typ as a small integer: switching on the type string is slow
	nullable bool
	required bool          // required, or not nullable: a null sends the record to the DLQ
	node     int           // srcPath: the node holding the value
	dataIdx  int           // its (first) leaf column: index in Row.Values, or -1 for a partition column
	partIdx  int           // index in Row.PartitionValues, or -1
	keyCol   int           // srcKeyPath: index in the key plan's cols
	binlog   [3]int        // srcBinlogPosition: the nodes of source.file, source.pos, source.row
	def      int           // definition level of a present value
	dec      decimalColumn // kDecimal: precision, scale, leaf length
	nested   *nestedColumn // kNested: the compiled type its values are walked along
	// nullValue is the column's null, prebuilt: Value.Level is not inlined.
	// A variant has two leaves (metadata, value), and so two nulls.
	nullValue [2]parquet.Value
}

// changeEvent is what the values of a change event tell beyond its
// columns: whether it deletes its key, and its binlog position.
type changeEvent interface {
	deletes() bool
	binlogPosition(c *planColumn) (int64, *MapError)
}

// kind is a column type on the hot path.
type kind uint8

const (
	kString kind = iota
	kBoolean
	kInteger
	kLong
	kFloat
	kDouble
	kTimestamp
	kDate
	kVariant
	kDecimal
	kTimestampNTZ
	kBinary
	kNested // a struct, array or map: one byte array, delta.AppendNested's encoding of its leaves
)

var kinds = map[delta.PrimitiveType]kind{
	delta.String: kString, delta.Boolean: kBoolean, delta.Integer: kInteger, delta.Long: kLong,
	delta.Float: kFloat, delta.Double: kDouble, delta.Timestamp: kTimestamp, delta.Date: kDate,
	delta.Variant: kVariant, delta.TimestampNTZ: kTimestampNTZ, delta.Binary: kBinary,
}

// kindOf is the kind of a column type.
func kindOf(t delta.DataType) kind {
	switch t := t.(type) {
	case delta.PrimitiveType:
		return kinds[t]
	case delta.DecimalType:
		return kDecimal
	}
	return kNested
}

// node is one JSON path prefix: "payload" in "payload.power". A node with
// children is a container: an object, or a string holding a JSON object
// that is decoded once per record.
type node struct {
	key      string
	path     string // dotted path, for errors
	parent   int
	children []int
	// span: a nested column reads the node's whole value.
	span bool
}

// Mapper maps records to rows. It is not safe for concurrent use: give each
// goroutine its own (Clone is cheap).
type Mapper struct {
	p *plan
	// per record state
	vals    values // the record's values in its format
	keyVals values // the record key's, with a key plan
	keyNull bool   // the record has no key: its fields are null
	// changes, for change events, says whether the record deletes its key,
	// and where in the binlog it was made.
	changes changeEvent
	micros  []int64 // timestamp and timestamp_ntz columns' values, for date()
	valid   []bool
	num     []byte // scratch for partition value text
	cast    cell   // the value values.cast returns
	now     func() time.Time
	// batchNow is now() in µs for the records of the current batch, valid
	// when haveBatchNow (see StartBatch).
	batchNow     int64
	haveBatchNow bool
}

// New compiles cfg; partitionColumns name the table's partition columns
// (string, date, integer, long, boolean or decimal columns of cfg).
func New(cfg Config, partitionColumns []string) (*Mapper, error) {
	if err := cfg.checkCDC(); err != nil {
		return nil, err
	}
	schema, err := cfg.format()
	if err != nil {
		return nil, err
	}
	cols, err := cfg.compileColumns()
	if err != nil {
		return nil, err
	}
	partIdx, err := validatePartitions(cfg.key(), cols, partitionColumns)
	if err != nil {
		return nil, err
	}
	p := &plan{
		cfg:       cfg,
		strict:    cfg.Mode != Permissive,
		maxBytes:  cfg.MaxRecordBytes,
		partNames: append([]string(nil), partitionColumns...),
		partIdx:   partIdx,
		nodes:     []node{{parent: -1}},
		values:    newJSONValues,
		schema:    &delta.StructType{},
		data:      &delta.StructType{},
	}
	if p.maxBytes == 0 {
		p.maxBytes = DefaultMaxRecordBytes
	}
	for _, name := range partitionColumns {
		p.partKeys = append(p.partKeys, []byte(delta.EscapePartitionName(name)+"="))
	}
	if cfg.CDC != "" {
		p.unwrap, p.cdc, p.connect = true, true, true
		p.rowNode = p.addPath([]string{rowImage})
		if cfg.Format == Avro {
			p.addEnvelopeNodes()
		}
	}
	for i, c := range cols {
		pc := planColumn{compiledColumn: c, kind: kindOf(c.typ), nullable: c.IsNullable(), dataIdx: -1, partIdx: -1,
			dec: newDecimalColumn(c.typ)}
		pc.required = c.Required || !pc.nullable
		if pc.nullable {
			pc.def = 1
		}
		if c.src.kind == srcPath {
			pc.node = p.addPath(p.imagePath(c.src.path))
		}
		if c.src.kind == srcBinlogPosition {
			for k, path := range binlogFields {
				pc.binlog[k] = p.addPath(p.imagePath(path))
			}
		}
		field := delta.StructField{Name: c.Name, Type: c.typ, Nullable: pc.nullable, Metadata: columnMetadata(c.Column)}
		if pc.kind == kNested {
			if pc.nested, err = compileNested(&field, c.src.path); err != nil {
				return nil, fmt.Errorf("%s.columns[%d].type: %w", cfg.key(), i, err)
			}
			pc.nested.idx = p.nestedCols
			p.nestedCols++
			p.nodes[pc.node].span = true
		}
		p.schema.Fields = append(p.schema.Fields, field)
		for k, j := range partIdx {
			if j == i {
				pc.partIdx = k
			}
		}
		if pc.partIdx < 0 {
			pc.dataIdx = p.leaves
			pc.nullValue = [2]parquet.Value{parquet.Value{}.Level(0, 0, p.leaves), parquet.Value{}.Level(0, 0, p.leaves+1)}
			p.data.Fields = append(p.data.Fields, field)
			p.leaves++
			if pc.kind == kVariant { // metadata and value, as delta.ParquetSchema lays it out
				p.leaves++
				p.variants = true
			}
		}
		p.cols = append(p.cols, pc)
	}
	switch cfg.Format {
	case Avro:
		if p.values, err = cfg.avroValues(schema, p); err != nil {
			return nil, err
		}
	case JSONSchema:
		p.values = registryFormatValues(cfg.Format, cfg.Registry)
	case Protobuf:
		p.values = cfg.protobufValues()
	}
	p.key = keyPlan(cfg, p)
	return newMapper(p), nil
}

// registryFormatValues reads records of a registry format through schemas.
func registryFormatValues(f Format, schemas Schemas) func(p *plan) values {
	switch f {
	case Avro:
		return newRegistryValues(schemas, compileAvroWriter)
	case JSONSchema:
		return newRegistryValues(schemas, compileJSONSchemaWriter)
	}
	return newRegistryValues(schemas, compileProtobufWriter)
}

// keyPlan is the plan of p's columns that read fields of the record key
// (cfg.KeyFormat, checked), nil when none does: the key's paths, read by
// the key format's values.
func keyPlan(cfg Config, p *plan) *plan {
	kp := &plan{cfg: Config{Format: cfg.keyFormat(), Registry: cfg.Registry, Key: cfg.key()}, strict: p.strict,
		nodes: []node{{parent: -1}}, values: newJSONValues, schema: &delta.StructType{}, data: &delta.StructType{}, unwrap: p.unwrap,
		connect: p.connect}
	for i := range p.cols {
		if c := &p.cols[i]; c.src.kind == srcKeyPath {
			c.keyCol = len(kp.cols)
			kc := *c
			kc.node = kp.addPath(c.src.path)
			kp.cols = append(kp.cols, kc)
		}
	}
	if len(kp.cols) == 0 {
		return nil
	}
	if kp.cfg.Format != JSON {
		kp.values = registryFormatValues(kp.cfg.Format, cfg.Registry)
	}
	return kp
}

// rowImage is the node key of a change event's row image: no JSON member
// is looked up by it.
const rowImage = "\x00row"

// imagePath is where a column's path points in a change event: cdc.<path>
// into the envelope, any other path into the row image; as it is in any
// other record.
func (p *plan) imagePath(path []string) []string {
	switch {
	case !p.cdc:
		return path
	case path[0] == "cdc" && len(path) > 1:
		return path[1:]
	}
	return append([]string{rowImage}, path...)
}

// columnMetadata is a Delta column's metadata: its origin, if it has one.
func columnMetadata(c Column) json.RawMessage {
	if c.Origin == "" {
		return json.RawMessage("{}")
	}
	b, _ := json.Marshal(map[string]string{OriginKey: c.Origin}) // a string map always marshals
	return b
}

// addPath adds the nodes of a JSON path and returns the last one.
func (p *plan) addPath(path []string) int {
	at := 0
	for i, key := range path {
		next := -1
		for _, c := range p.nodes[at].children {
			if p.nodes[c].key == key {
				next = c
			}
		}
		if next < 0 {
			next = len(p.nodes)
			p.nodes = append(p.nodes, node{key: key, parent: at, path: joinPath(path[:i+1])})
			p.nodes[at].children = append(p.nodes[at].children, next)
		}
		at = next
	}
	return at
}

func joinPath(path []string) string {
	var b bytes.Buffer
	for i, s := range path {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

func newMapper(p *plan) *Mapper {
	m := &Mapper{p: p, vals: p.values(p), micros: make([]int64, len(p.cols)), valid: make([]bool, len(p.cols)),
		now: time.Now}
	if p.key != nil {
		m.keyVals = p.key.values(p.key)
	}
	if p.cdc {
		m.changes = m.vals.(changeEvent) // checkCDC let only formats with change events through
	}
	return m
}

// Clone returns a Mapper with the same configuration for another goroutine.
func (m *Mapper) Clone() *Mapper {
	c := newMapper(m.p)
	c.now = m.now
	return c
}

// WithPathLimits returns a Mapper like m that also rejects rows whose
// partition directory is past l.
func (m *Mapper) WithPathLimits(l PathLimits) *Mapper {
	p := *m.p
	p.paths = l
	c := newMapper(&p)
	c.now = m.now
	return c
}

// StartBatch reads the clock once for the now() columns of the records
// mapped until the next StartBatch, as Spark's current_timestamp() is fixed
// per micro-batch. Without it, Map reads the clock for every record.
func (m *Mapper) StartBatch() {
	m.batchNow, m.haveBatchNow = m.now().UnixMicro(), true
}

// SetClock replaces time.Now as the source of now() (for tests).
func (m *Mapper) SetClock(now func() time.Time) { m.now = now }

// Schema is the table schema, columns in declared order.
func (m *Mapper) Schema() *delta.StructType { return cloneStruct(m.p.schema) }

// DataSchema is the schema of the data files: Schema without the partition
// columns; Row.Values follow its order.
func (m *Mapper) DataSchema() *delta.StructType { return cloneStruct(m.p.data) }

// PartitionColumns are the partition columns, in Row.PartitionValues order.
func (m *Mapper) PartitionColumns() []string { return append([]string(nil), m.p.partNames...) }

// PartitionMap returns a row's partition values as a map that owns its
// strings, as delta.PartitionDir and add actions take them. It allocates:
// call it when a new partition appears, not per row.
func (m *Mapper) PartitionMap(r *Row) map[string]*string {
	out := make(map[string]*string, len(m.p.partNames))
	for i, c := range m.p.partNames {
		out[c] = nil
		if v := r.PartitionValues[i]; v != nil {
			s := string([]byte(*v))
			out[c] = &s
		}
	}
	return out
}

func cloneStruct(s *delta.StructType) *delta.StructType {
	return &delta.StructType{Fields: append([]delta.StructField(nil), s.Fields...)}
}

// cell is a column's value before it becomes a Parquet value.
type cell struct {
	null bool
	i    int64 // boolean (0/1), integer, long, date (days), timestamp and timestamp_ntz (µs); a decimal's unscaled value's low 64 bits
	hi   int64 // a decimal's unscaled value's high 64 bits (two's complement, hi:i)
	f    float64
	b    []byte // string, or a variant's value, in the row's arena
	m    []byte // a variant's metadata, in the row's arena
}

// failure codes; the MapError is only built when the record is rejected,
// so permissive null-on-failure does not allocate.
type failure uint8

const (
	ok failure = iota
	failMissing
	failType
	failCast
	failOverflow
	failNotFinite
	failUTF8
	failTimestamp
	failRange
	failZone         // a timestamp_ntz with a zone or offset; detail: the text
	failVariant      // detail: the text that is no JSON
	failVariantValue // detail: why the JSON makes no variant
	failBase64       // a binary column's JSON string; detail: the text
	failNested       // a nested column's value; detail: the reason, its path inside the column first
)

// Map maps rec into out; on error (always a *MapError) the record belongs in
// the DLQ and out is unspecified. Map does not allocate in steady state:
// strings are copied into out.Arena, and nothing in out aliases rec or the
// parser once Map returns.
func (m *Mapper) Map(rec *Record, out *Row) error {
	p := m.p
	out.Delete = rec.Value == nil
	switch {
	case out.Delete && p.cdc:
		return ErrSkip // its change event deleted the key
	case out.Delete && !p.cfg.Tombstones:
		return &MapError{Reason: "null value (tombstone)"}
	case out.Delete:
	case len(rec.Value) == 0:
		return &MapError{Reason: "empty value"}
	case len(rec.Value) > p.maxBytes:
		return &MapError{Reason: "value too large (" + strconv.Itoa(len(rec.Value)) + " bytes > " + strconv.Itoa(p.maxBytes) + ")"}
	}
	if len(p.nodes[0].children) > 0 && !out.Delete { // else only non-path sources: any value will do
		if err := m.vals.resolve(rec.Value); err != nil {
			return err
		}
		out.Delete = m.changes != nil && m.changes.deletes()
	}
	if p.key != nil {
		if m.keyNull = rec.Key == nil; !m.keyNull {
			if err := m.keyVals.resolve(rec.Key); err != nil {
				return keyError(err)
			}
		}
	}
	if out.Arena == nil {
		out.Arena = new(Arena)
	}
	arenaStart := out.Arena.Len()
	out.Values = resize(out.Values, p.leaves)
	out.PartitionValues = resize(out.PartitionValues, len(p.partNames))
	out.pvals = resize(out.pvals, len(p.partNames))

	nowMicros, haveNow := m.batchNow, m.haveBatchNow
	for i := range p.cols {
		c := &p.cols[i]
		var v cell
		var f failure
		var detail []byte
		switch c.src.kind {
		case srcPath:
			if rec.Value == nil { // a tombstone: only its key is known
				v.null = true
				break
			}
			// Through the Mapper's own cell: a local one passed to an
			// interface method would be allocated for every column.
			m.cast = cell{}
			f, detail = m.vals.cast(c, out.Arena, &m.cast)
			v = m.cast
		case srcKeyPath:
			if v.null = m.keyNull; !v.null {
				m.cast = cell{}
				f, detail = m.keyVals.cast(&p.key.cols[c.keyCol], out.Arena, &m.cast)
				v = m.cast
			}
		case srcNow:
			if !haveNow {
				nowMicros, haveNow = m.now().UnixMicro(), true
			}
			v.i = nowMicros
		case srcDate:
			v.null = !m.valid[c.src.ref]
			v.i = m.micros[c.src.ref]
		case srcKafkaPartition:
			v.i = int64(rec.Partition)
		case srcKafkaOffset:
			v.i = rec.Offset
		case srcKafkaTimestamp:
			if v.null = rec.Timestamp.IsZero(); !v.null {
				if y := rec.Timestamp.Year(); y < 1 || y > 9999 {
					f = failRange // UnixMicro overflows far outside it
				} else {
					v.i = rec.Timestamp.UnixMicro()
				}
			}
		case srcKafkaKey:
			if v.null = rec.Key == nil; !v.null {
				if !utf8.Valid(rec.Key) {
					f = failUTF8
				} else {
					v.b = out.Arena.Copy(rec.Key)
				}
			}
		case srcKafkaTopic:
			v.b = out.Arena.CopyString(rec.Topic)
		case srcBinlogPosition:
			var err *MapError
			if v.i, err = m.changes.binlogPosition(c); err != nil {
				return err
			}
		}
		if c.kind == kDate && !v.null && c.src.kind != srcPath {
			v.i = floorDiv(v.i, microsDay) // now(), date(), kafka.timestamp hold µs
		}
		if f != ok {
			// Invalid UTF-8 cannot become null: it is corrupt input, not an
			// uncastable value, and Delta strings must be UTF-8.
			if f == failMissing || f == failUTF8 || p.strict || c.required {
				return m.fail(c, f, detail)
			}
			v = cell{null: true}
		}
		if v.null && c.required && !(out.Delete && c.src.kind == srcPath) {
			return m.fail(c, failMissing, nil)
		}
		if c.kind == kTimestamp || c.kind == kTimestampNTZ {
			m.micros[i], m.valid[i] = v.i, !v.null
		}
		switch {
		case c.kind == kVariant:
			out.Values[c.dataIdx], out.Values[c.dataIdx+1] = c.variantValues(v)
		case c.dataIdx >= 0:
			out.Values[c.dataIdx] = c.parquetValue(v, out.Arena)
		default:
			out.PartitionValues[c.partIdx] = m.partitionValue(c, v, out)
		}
	}
	if err := m.routingKey(out); err != nil {
		return err
	}
	out.Size = len(out.Values)*valueSize + out.Arena.Len() - arenaStart
	return nil
}

// keyError is the error of a record key that cannot be decoded: a dead
// letter says it is the key's.
func keyError(err error) error {
	if me, ok := errors.AsType[*MapError](err); ok {
		return &MapError{Reason: "key: " + me.Reason, Column: me.Column, Path: me.Path}
	}
	return err
}

// resize returns s with length n, reallocating only when it is too small
// (a Row prepared by the caller, or used with another Mapper).
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// variantValues are a variant column's metadata and value leaves.
func (c *planColumn) variantValues(v cell) (parquet.Value, parquet.Value) {
	if v.null {
		return c.nullValue[0], c.nullValue[1]
	}
	return parquet.ByteArrayValue(v.m).Level(0, c.def, c.dataIdx), parquet.ByteArrayValue(v.b).Level(0, c.def, c.dataIdx+1)
}

// parquetValue is a data column's value; a decimal of more than 18 digits
// goes into a.
func (c *planColumn) parquetValue(v cell, a *Arena) parquet.Value {
	if v.null {
		return c.nullValue[0]
	}
	return c.scalarValue(v, a).Level(0, c.def, c.dataIdx)
}

// scalarValue is the Parquet value of non-null v, its levels unset: a
// top-level column's or a nested column's leaf's.
func (c *planColumn) scalarValue(v cell, a *Arena) parquet.Value {
	var pv parquet.Value
	switch c.kind {
	case kString, kBinary, kNested:
		pv = parquet.ByteArrayValue(v.b)
	case kBoolean:
		pv = parquet.BooleanValue(v.i != 0)
	case kInteger, kDate:
		pv = parquet.Int32Value(int32(v.i))
	case kLong, kTimestamp, kTimestampNTZ:
		pv = parquet.Int64Value(v.i)
	case kFloat:
		pv = parquet.FloatValue(float32(v.f))
	case kDouble:
		pv = parquet.DoubleValue(v.f)
	case kDecimal:
		pv = c.dec.value(v.hi, v.i, a)
	}
	return pv
}

// partitionValue renders a partition column's value as Delta's
// partitionValues string, in the row's arena; "" is null, as in Delta.
func (m *Mapper) partitionValue(c *planColumn, v cell, out *Row) *string {
	if v.null {
		return nil
	}
	var b []byte
	switch c.kind {
	case kString:
		b = v.b
	case kBoolean:
		b = strconv.AppendBool(m.num[:0], v.i != 0)
	case kDate:
		b = appendDate(m.num[:0], v.i)
	case kDecimal:
		b = appendPlainDecimal(m.num[:0], v.hi, v.i, c.dec.scale)
	default: // integer, long
		b = strconv.AppendInt(m.num[:0], v.i, 10)
	}
	if len(b) == 0 {
		return nil
	}
	if c.kind != kString {
		m.num = b[:0]
		b = out.Arena.Copy(b)
	}
	s := &out.pvals[c.partIdx]
	*s = unsafe.String(unsafe.SliceData(b), len(b))
	return s
}

// routingKey writes delta.PartitionDir of the row's partition values into
// out.Key without allocating unless a value needs escaping, and checks it
// against the plan's PathLimits.
func (m *Mapper) routingKey(out *Row) *MapError {
	k := out.Key[:0]
	longest, longestLen := 0, 0
	for i, name := range m.p.partKeys {
		if i > 0 {
			k = append(k, '/')
		}
		start := len(k)
		k = append(k, name...)
		if v := out.PartitionValues[i]; v == nil {
			k = append(k, delta.NullPartitionDir...)
		} else {
			k = append(k, delta.EscapePartitionName(*v)...) // returns *v itself when nothing needs escaping
		}
		if n := len(k) - start; n > longestLen {
			longest, longestLen = i, n
		}
	}
	out.Key = k
	lim := m.p.paths
	switch {
	case lim.Segment > 0 && longestLen > lim.Segment:
		return m.pathError(longest, "partition directory name of "+strconv.Itoa(longestLen)+
			" bytes (escaped) is longer than the "+strconv.Itoa(lim.Segment)+" bytes a store takes")
	case lim.Dir > 0 && len(k) > lim.Dir:
		return m.pathError(longest, "partition directory of "+strconv.Itoa(len(k))+
			" bytes (escaped; its longest part "+strconv.Itoa(longestLen)+") is longer than the "+
			strconv.Itoa(lim.Dir)+" bytes the store's keys leave for it")
	}
	return nil
}

// pathError is the MapError of a partition directory past the PathLimits;
// part is the index of the partition column at fault.
func (m *Mapper) pathError(part int, why string) *MapError {
	name := m.p.partNames[part]
	for i := range m.p.cols {
		if m.p.cols[i].partIdx == part {
			return &MapError{Reason: name + ": " + why, Column: name, Path: sourceOrName(m.p.cols[i].Column)}
		}
	}
	return &MapError{Reason: name + ": " + why, Column: name}
}

// parseFailure classifies a fastjson parse error. fastjson bounds its
// recursion itself (fastjson.MaxDepth levels, checked while parsing, so the
// stack cannot blow); a failed document nested that deep is reported as
// such rather than as "not JSON". Scanning only after a failure keeps the
// common path free of a second pass.
func parseFailure(b []byte, reason string) string {
	depth := 0
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth >= fastjson.MaxDepth-1 {
				return "nesting too deep"
			}
		case '}', ']':
			depth--
		}
	}
	return reason
}

// parseInteger parses a JSON number for an integer (32-bit) or long column.
// Integral values written with a fraction or exponent (248.0, 2.48e2) are
// accepted; 248.5 is a cast failure (Spark's from_json yields null for it).
func parseInteger(b []byte, int32Only bool) (int64, failure) {
	i, neg := 0, false
	if len(b) > 0 && b[0] == '-' {
		i, neg = 1, true
	}
	if i == len(b) {
		return 0, failCast
	}
	var u uint64
	for ; i < len(b); i++ {
		d := b[i] - '0'
		if d > 9 {
			return parseIntegerFloat(b, int32Only)
		}
		if u > (math.MaxUint64-uint64(d))/10 {
			return 0, failOverflow
		}
		u = u*10 + uint64(d)
	}
	var n int64
	switch {
	case neg && u <= 1<<63:
		n = int64(-u) // -(1<<63) wraps to itself, as wanted
	case !neg && u <= math.MaxInt64:
		n = int64(u)
	default:
		return 0, failOverflow
	}
	if int32Only && (n < math.MinInt32 || n > math.MaxInt32) {
		return 0, failOverflow
	}
	return n, ok
}

func parseIntegerFloat(b []byte, int32Only bool) (int64, failure) {
	x, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(b), len(b)), 64)
	switch {
	case err != nil && math.IsInf(x, 0): // out of float64 range
		return 0, failOverflow
	case err != nil:
		return 0, failCast
	case math.IsNaN(x) || math.IsInf(x, 0):
		return 0, failNotFinite
	case x != math.Trunc(x):
		return 0, failCast
	}
	lo, hi := float64(math.MinInt64), float64(math.MaxInt64) // hi rounds up to 2^63
	if int32Only {
		lo, hi = math.MinInt32, math.MaxInt32+1
	}
	if x < lo || x >= hi {
		return 0, failOverflow
	}
	return int64(x), ok
}

var typeNames = [...]string{
	fastjson.TypeNull: "null", fastjson.TypeObject: "object", fastjson.TypeArray: "array",
	fastjson.TypeString: "string", fastjson.TypeNumber: "number",
	fastjson.TypeTrue: "boolean", fastjson.TypeFalse: "boolean",
}

// fail builds the MapError for a rejected column value.
func (m *Mapper) fail(c *planColumn, f failure, detail []byte) *MapError {
	e := &MapError{Column: c.Name, Path: sourceOrName(c.Column)}
	switch f {
	case failMissing:
		e.Reason = "missing required field " + c.Name
		return e
	case failNested: // detail is the reason, the path inside the column first
		e.Reason = c.Name + ": " + string(detail)
		return e
	}
	var got string
	format := m.p.cfg.Format
	if f == failType {
		if c.src.kind == srcKeyPath {
			got = m.keyVals.kindOf(m.p.key.cols[c.keyCol].node)
			format = m.p.key.cfg.Format
		} else {
			got = m.vals.kindOf(c.node)
		}
	}
	e.Reason = string(appendFailure([]byte(c.Name+": "), c, f, detail, format, got))
	return e
}

// appendFailure appends why a value of column (or nested leaf) c in
// format's records failed to cast: f, with the offending text detail, or
// for failType got, the type of the value.
func appendFailure(dst []byte, c *planColumn, f failure, detail []byte, format Format, got string) []byte {
	switch f {
	case failType:
		want := "number"
		switch {
		case c.kind == kTimestampNTZ && (format == Avro || format == Protobuf):
			want = "timestamp"
		case c.kind == kBinary && format == Avro:
			want = "bytes"
		case c.kind == kBinary:
			want = "base64 string"
		case c.typ == delta.String || c.typ == delta.Timestamp || c.typ == delta.Date || c.kind == kTimestampNTZ:
			want = "string"
		case c.typ == delta.Boolean:
			want = "boolean"
		case c.kind == kDecimal && format == Avro:
			want = "decimal or integer"
		case c.kind == kDecimal && format == Protobuf:
			want = "integer"
		}
		return append(append(append(append(dst, "expected "...), want...), ", got "...), got...)
	case failCast:
		return append(append(appendQuote(append(dst, "cannot cast "...), detail), " to "...), c.typ.String()...)
	case failOverflow:
		return append(append(dst, c.typ.String()...), " overflow"...)
	case failNotFinite:
		return append(dst, "not a finite number"...)
	case failUTF8:
		return append(dst, "invalid UTF-8"...)
	case failTimestamp:
		what := "unparsable timestamp "
		if c.kind == kTimestampNTZ {
			what = "unparsable timestamp_ntz "
		}
		return appendQuote(append(dst, what...), detail)
	case failZone:
		return append(appendQuote(append(dst, "timestamp_ntz "...), detail), " has a zone or offset: a timestamp_ntz is a local date-time without one"...)
	case failRange:
		return append(dst, "timestamp out of range (years 0001-9999)"...)
	case failVariant:
		return appendQuote(append(dst, "not a variant: "...), detail)
	case failVariantValue:
		return append(append(dst, "not a variant: "...), detail...)
	case failBase64:
		return appendQuote(append(dst, "not base64: "...), detail)
	}
	return dst
}

// quote quotes an offending value for a reason, cut to 40 bytes.
func quote(b []byte) string { return string(appendQuote(nil, b)) }

// appendQuote appends quote(b) to dst.
func appendQuote(dst, b []byte) []byte {
	const limit = 40
	if len(b) > limit {
		return append(strconv.AppendQuote(dst, string(b[:limit])), "…"...)
	}
	return strconv.AppendQuote(dst, string(b))
}
