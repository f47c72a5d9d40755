package mapping

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/deltaflow/deltaflow/delta"
)

// Mode says what happens to a value that cannot be cast to its column's type.
type Mode string

const (
	// Strict sends the record to the DLQ (the default).
	Strict Mode = "strict"
	// Permissive stores null instead, as Spark's from_json does. Records that
	// are not JSON objects or lack a required field still go to the DLQ.
	Permissive Mode = "permissive"
)

// Format is how record values are encoded.
type Format string

const (
	// JSON records are JSON objects (the default).
	JSON Format = "json"
	// Avro records are Avro binary bodies of one record schema
	// (Config.SchemaFile) without a header, or with a schema registry
	// (Config.Registry) in the Confluent wire format, each naming its
	// writer schema.
	Avro Format = "avro"
	// JSONSchema records are JSON objects in the Confluent wire format,
	// each header naming the registry's JSON Schema that validates it
	// (Config.Registry).
	JSONSchema Format = "json_schema"
	// Protobuf records are Protobuf messages in the Confluent wire format
	// (the message indexes after the schema id), each read with the
	// registry's schema its id names (Config.Registry), or plain bodies of
	// one message (Config.Message) of a .proto file (Config.SchemaFile).
	Protobuf Format = "protobuf"
	// Raw keys are bytes the kafka.key source takes as they are (the
	// default key format).
	Raw Format = "raw"
)

// CDCDebezium is Config.CDC for Debezium's change events.
const CDCDebezium = "debezium"

// DefaultMaxRecordBytes is the default max_record_bytes: larger values go to
// the DLQ without being parsed.
const DefaultMaxRecordBytes = 1 << 20

// Config is the table section's mapping from Kafka records to typed columns.
type Config struct {
	// Mode is strict (default) or permissive.
	Mode Mode `yaml:"mode"`
	// MaxRecordBytes bounds a record value's size; 0 means
	// DefaultMaxRecordBytes (1 MiB).
	MaxRecordBytes int `yaml:"max_record_bytes"`
	// Columns are the table's columns in declared order. With the avro
	// format, none means one for each field of the schema (docs/configuration.md, Formats).
	Columns []Column `yaml:"columns"`
	// Format is how record values are encoded: JSON (the default), Avro,
	// JSON Schema or Protobuf.
	Format Format `yaml:"format"`
	// SchemaFile is the Avro schema (.avsc) or Protobuf file (.proto, its
	// imports relative to its directory) the records are written with, for
	// the avro and protobuf formats: the records carry no schema of their
	// own.
	SchemaFile string `yaml:"schema_file"`
	// Registry, for the avro format without a SchemaFile, has the writer
	// schemas the records' headers name (the Confluent wire format).
	Registry Schemas `yaml:"-"`
	// Schema is the Avro schema that makes the columns when there are
	// none, and that the columns' sources are checked against, with
	// Registry: the subject's latest version. Empty with Columns: not
	// checked. Columns made of it with a Registry are all nullable: a
	// later version of the schema may drop any field.
	Schema string `yaml:"-"`
	// SchemaOrigin names Schema in the Origin of the columns made of it.
	SchemaOrigin string `yaml:"-"`
	// Evolve, with a Registry, makes a writer schema's top-level fields
	// that no column reads new columns, and the fields it adds inside a
	// struct column (at any depth) new fields of the column: Map refuses
	// the first record of such a schema with a *SchemaChangeError, and the
	// Mapper that Evolved returns maps it.
	Evolve bool `yaml:"-"`
	// TypeWidening says the table allows type widening (its
	// delta.enableTypeWidening): an evolving Mapper then takes a writer
	// schema's field wider than the column an earlier version made (int →
	// long, float → double, a wider decimal) as a *SchemaChangeError that
	// widens the column, rather than a dead letter.
	TypeWidening bool `yaml:"-"`
	// Key is the configuration section errors name its keys under
	// ("tables[2]"); default "table".
	Key string `yaml:"-"`
	// Message, for the protobuf format, is the full name of the message
	// whose fields make the columns; default the schema's first, required
	// with a SchemaFile.
	Message string `yaml:"message"`
	// KeyFormat is how record keys are encoded: Raw (the default; only
	// kafka.key reads it, as a string), JSON, or a registry format (Avro,
	// JSON Schema, Protobuf in the wire format, through Registry), whose
	// fields the kafka.key.<path> sources read.
	KeyFormat Format `yaml:"key_format"`
	// Tombstones makes a record with a null value a delete of its key
	// (Row.Delete), as a table in upsert mode takes it, rather than a dead
	// letter.
	Tombstones bool `yaml:"-"`
	// CDC, if CDCDebezium, reads JSON values as Debezium change events:
	// column paths address the row image (after; before for a delete,
	// which sets Row.Delete), "cdc.<path>" the envelope (cdc.op,
	// cdc.source.lsn; BinlogPositionSource), a {"schema", "payload"} wrapper (the JSON
	// converter's schemas.enable) is unwrapped, keys' too, and a
	// tombstone, which follows its delete, is ErrSkip.
	CDC string `yaml:"-"`

	// derived: the columns were made of Schema (none were given).
	derived bool
	// protoMessage is the message of a protobuf SchemaFile's records.
	protoMessage protoreflect.MessageDescriptor
}

// key is the section errors name.
func (c Config) key() string {
	if c.Key == "" {
		return "table"
	}
	return c.Key
}

// Column maps one value of a record to one table column.
type Column struct {
	// Name is the Delta column name (required, unique).
	Name string `yaml:"name"`
	// Type is string, boolean, integer, long, float, double, timestamp,
	// timestamp_ntz (a local date-time: no zone), date, decimal(p,s)
	// (1 ≤ p ≤ 38, 0 ≤ s ≤ p), binary, variant, or in Spark's DDL a
	// struct<name: type, …>, array<type> or map<key, type> of them
	// (nested at will; no variant inside; keys string, integer, long or
	// boolean). A variant
	// (JSON path sources only) holds a JSON value as Spark's parse_json
	// makes it; a JSON string is parsed as JSON text (raw_payload's source,
	// payload, is one), any other value is taken as it is. A struct,
	// array or map column holds the value its source addresses (a JSON
	// object or array, an Avro record, array or map, a Protobuf message,
	// repeated field or map), its scalars cast as a column of their type.
	Type string `yaml:"type"`
	// Source says where the value comes from (default: the column name as a
	// JSON path): a dot-separated JSON path ("payload.power", descending
	// into JSON-encoded string fields), "now()", "date(<column>)" or one of
	// kafka.partition, kafka.offset, kafka.timestamp, kafka.key, kafka.topic.
	Source string `yaml:"source"`
	// Required sends records whose value is missing or null to the DLQ.
	Required bool `yaml:"required"`
	// Nullable is the Delta column's nullability; default true, as in the
	// schema Spark's from_json produces. A non-nullable column is implicitly
	// required.
	Nullable *bool `yaml:"nullable"`
	// Origin says where a column made of a schema came from ("subject
	// readings-value, schema id 3"): kept in the Delta column's metadata
	// (OriginKey), where `deltaflow inspect schema` shows it.
	Origin string `yaml:"-"`
}

// OriginKey is the Delta column metadata key of a column's Origin.
const OriginKey = "deltaflow.origin"

// IsNullable reports the column's effective nullability.
func (c *Column) IsNullable() bool { return c.Nullable == nil || *c.Nullable }

// DefaultPartitionColumns are the partition columns of the Spark job's table.
var DefaultPartitionColumns = []string{"device_type", "event_date"}

// DefaultConfig reproduces the Spark job's sensor_events table.
func DefaultConfig() Config {
	col := func(name, typ, source string, required bool) Column {
		return Column{Name: name, Type: typ, Source: source, Required: required}
	}
	return Config{
		Mode:           Strict,
		MaxRecordBytes: DefaultMaxRecordBytes,
		Columns: []Column{
			col("device_id", "string", "device_id", true),
			col("device_type", "string", "device_type", true),
			col("event_time", "timestamp", "ingested_at", true),
			col("linkquality", "integer", "payload.linkquality", false),
			col("contact", "boolean", "payload.contact", false),
			col("battery", "integer", "payload.battery", false),
			col("power", "double", "payload.power", false),
			col("voltage", "double", "payload.voltage", false),
			col("current", "double", "payload.current", false),
			col("energy", "double", "payload.energy", false),
			col("plug_state", "string", "payload.state", false),
			col("raw_payload", "string", "payload", false),
			col("processed_at", "timestamp", "now()", false),
			col("event_date", "date", "date(event_time)", false),
		},
	}
}

// sourceKind is the compiled form of Column.Source.
type sourceKind int

const (
	srcPath sourceKind = iota
	srcNow
	srcDate
	srcKafkaPartition
	srcKafkaOffset
	srcKafkaTimestamp
	srcKafkaKey
	srcKafkaTopic
	srcKeyPath // kafka.key.<path>: a field of the decoded key
	// BinlogPositionSource: a change event's MySQL binlog position
	srcBinlogPosition
)

var kafkaSources = map[string]sourceKind{
	"kafka.partition": srcKafkaPartition,
	"kafka.offset":    srcKafkaOffset,
	"kafka.timestamp": srcKafkaTimestamp,
	"kafka.key":       srcKafkaKey,
	"kafka.topic":     srcKafkaTopic,
}

// allowedTypes lists the column types each non-path source can fill.
var allowedTypes = map[sourceKind][]delta.PrimitiveType{
	srcNow:            {delta.Timestamp, delta.Date},
	srcDate:           {delta.Date},
	srcKafkaPartition: {delta.Integer, delta.Long},
	srcKafkaOffset:    {delta.Long},
	srcKafkaTimestamp: {delta.Timestamp, delta.Date},
	srcKafkaKey:       {delta.String},
	srcKafkaTopic:     {delta.String},
	srcBinlogPosition: {delta.Long},
}

var columnTypes = map[string]delta.PrimitiveType{
	"string": delta.String, "boolean": delta.Boolean, "integer": delta.Integer, "long": delta.Long,
	"float": delta.Float, "double": delta.Double, "timestamp": delta.Timestamp, "date": delta.Date,
	"variant": delta.Variant, "timestamp_ntz": delta.TimestampNTZ, "binary": delta.Binary,
}

// parsedSource is a validated source.
type parsedSource struct {
	kind sourceKind
	path []string // srcPath
	ref  int      // srcDate: index of the referenced column
}

// Validate checks the configuration; errors name the offending key, e.g.
// `table.columns[3].type: unknown type "varchar"`.
func (c Config) Validate() error {
	_, err := c.compileColumns()
	return err
}

type compiledColumn struct {
	Column
	typ delta.DataType // a delta.PrimitiveType or delta.DecimalType
	src parsedSource
}

func (c Config) compileColumns() ([]compiledColumn, error) {
	switch c.Mode {
	case "", Strict, Permissive:
	default:
		return nil, fmt.Errorf("%s.mode: unknown mode %q (want strict or permissive)", c.key(), c.Mode)
	}
	if c.MaxRecordBytes < 0 {
		return nil, fmt.Errorf("%s.max_record_bytes: must not be negative, got %d", c.key(), c.MaxRecordBytes)
	}
	if len(c.Columns) == 0 {
		return nil, fmt.Errorf("%s.columns: no columns", c.key())
	}
	if err := c.checkKeyFormat(); err != nil {
		return nil, err
	}
	cols := make([]compiledColumn, len(c.Columns))
	index := make(map[string]int, len(c.Columns))
	for i, col := range c.Columns {
		key := fmt.Sprintf("%s.columns[%d]", c.key(), i)
		if col.Name == "" {
			return nil, fmt.Errorf("%s.name: empty column name", key)
		}
		if j, dup := index[col.Name]; dup {
			return nil, fmt.Errorf("%s.name: duplicate column %q (also %s.columns[%d])", key, col.Name, c.key(), j)
		}
		typ, err := parseColumnType(col.Type)
		if err != nil {
			return nil, fmt.Errorf("%s.type: %w", key, err)
		}
		src, err := parseSource(col.Source, col.Name, index, cols)
		if err != nil {
			return nil, fmt.Errorf("%s.source: %w", key, err)
		}
		if src.kind == srcKeyPath && c.keyFormat() == Raw {
			return nil, fmt.Errorf("%s.source: %s reads a field of the key: set %s.key_format (json, avro, json_schema or protobuf)", key, col.Source, c.key())
		}
		if src.kind == srcKeyPath && typ == delta.Variant {
			return nil, fmt.Errorf("%s.type: a variant column reads the value, not the key (%s)", key, col.Source)
		}
		if src.kind == srcKeyPath && delta.IsNested(typ) {
			return nil, fmt.Errorf("%s.type: a %s column reads the value, not the key (%s)", key, typ, col.Source)
		}
		if src.kind == srcBinlogPosition && c.CDC == "" {
			return nil, fmt.Errorf("%s.source: %s reads a Debezium change event's source: it needs cdc: debezium", key, col.Source)
		}
		if allowed, ok := allowedTypes[src.kind]; ok && !containsType(allowed, typ) {
			return nil, fmt.Errorf("%s.type: source %q cannot fill a %s column", key, sourceOrName(col), typ)
		}
		cols[i] = compiledColumn{Column: col, typ: typ, src: src}
		index[col.Name] = i
	}
	return cols, nil
}

func sourceOrName(c Column) string {
	if c.Source == "" {
		return c.Name
	}
	return c.Source
}

func containsType(list []delta.PrimitiveType, t delta.DataType) bool {
	for _, x := range list {
		if x == t {
			return true
		}
	}
	return false
}

// parseSource compiles a source; earlier holds the columns declared before
// this one, which are the only ones date() may refer to.
func parseSource(s, name string, earlier map[string]int, cols []compiledColumn) (parsedSource, error) {
	if s == "" {
		s = name
	}
	s = strings.TrimSpace(s)
	if s == "now()" {
		return parsedSource{kind: srcNow}, nil
	}
	if k, ok := kafkaSources[s]; ok {
		return parsedSource{kind: k}, nil
	}
	if s == BinlogPositionSource {
		return parsedSource{kind: srcBinlogPosition}, nil
	}
	if rest, ok := strings.CutPrefix(s, "kafka.key."); ok {
		path, err := splitPath(rest, s, "key path")
		return parsedSource{kind: srcKeyPath, path: path}, err
	}
	if strings.HasPrefix(s, "kafka.") {
		return parsedSource{}, fmt.Errorf("unknown Kafka metadata %q (want kafka.partition, kafka.offset, kafka.timestamp, kafka.key, kafka.key.<path> or kafka.topic)", s)
	}
	if inner, ok := strings.CutPrefix(s, "date("); ok {
		ref, ok := strings.CutSuffix(inner, ")")
		ref = strings.TrimSpace(ref)
		if !ok || ref == "" {
			return parsedSource{}, fmt.Errorf("malformed %q (want date(<column>))", s)
		}
		i, ok := earlier[ref]
		if !ok {
			return parsedSource{}, fmt.Errorf("date(%s) refers to unknown column %q (it must be declared earlier)", ref, ref)
		}
		if cols[i].typ != delta.Timestamp && cols[i].typ != delta.TimestampNTZ {
			return parsedSource{}, fmt.Errorf("date(%s): column %q is %s, not timestamp or timestamp_ntz", ref, ref, cols[i].typ)
		}
		return parsedSource{kind: srcDate, ref: i}, nil
	}
	if strings.ContainsAny(s, "()") {
		return parsedSource{}, fmt.Errorf("unknown function in %q (want now() or date(<column>))", s)
	}
	path, err := splitPath(s, s, "JSON path")
	return parsedSource{kind: srcPath, path: path}, err
}

// splitPath splits a dotted path of source s (a what) into its segments.
func splitPath(path, s, what string) ([]string, error) {
	segs := strings.Split(path, ".")
	for _, seg := range segs {
		if seg == "" {
			return nil, fmt.Errorf("%s %q has an empty segment", what, s)
		}
	}
	return segs, nil
}

// partitionable are the types a partition column may have, with decimals:
// their Delta partition value strings are unambiguous and cheap to build.
var partitionable = []delta.PrimitiveType{delta.String, delta.Date, delta.Integer, delta.Long, delta.Boolean}

func validatePartitions(section string, cols []compiledColumn, partitionColumns []string) ([]int, error) {
	idx := make([]int, len(partitionColumns))
	for i, p := range partitionColumns {
		key := fmt.Sprintf("%s.partition_columns[%d]", section, i)
		idx[i] = -1
		for j := range cols {
			if cols[j].Name == p {
				idx[i] = j
			}
		}
		if idx[i] < 0 {
			return nil, fmt.Errorf("%s: unknown column %q", key, p)
		}
		for _, q := range partitionColumns[:i] {
			if q == p {
				return nil, fmt.Errorf("%s: duplicate partition column %q", key, p)
			}
		}
		if t := cols[idx[i]].typ; !containsType(partitionable, t) && !isDecimal(t) {
			return nil, fmt.Errorf("%s: column %q is %s; partition columns must be string, date, integer, long, boolean or decimal", key, p, t)
		}
	}
	if len(partitionColumns) == len(cols) {
		return nil, fmt.Errorf("%s.partition_columns: every column is a partition column; data files need at least one", section)
	}
	return idx, nil
}

// format settles the records' format: for Avro, the schema (nil for JSON)
// and, without columns, the columns of its fields.
func (c *Config) format() (*avroSchema, error) {
	switch c.Format {
	case "", JSON:
		if c.SchemaFile != "" {
			return nil, fmt.Errorf("%s.schema_file: only the avro and protobuf formats read a schema file (format is json)", c.key())
		}
		return nil, nil
	case Avro:
	case JSONSchema:
		return nil, c.jsonSchemaColumns()
	case Protobuf:
		return nil, c.protobufColumns()
	default:
		return nil, fmt.Errorf("%s.format: unknown format %q (want json, avro, json_schema or protobuf)", c.key(), c.Format)
	}
	if c.SchemaFile == "" && c.Registry == nil {
		return nil, fmt.Errorf("%s.schema_file: the avro format needs the schema the records are written with (.avsc), or a schema_registry.url", c.key())
	}
	text, source := []byte(c.Schema), c.schemaSource()
	if c.SchemaFile != "" {
		var err error
		if text, err = os.ReadFile(c.SchemaFile); err != nil {
			return nil, fmt.Errorf("%s.schema_file: %w", c.key(), err)
		}
	}
	var schema *avroSchema
	switch {
	case len(text) > 0:
		var err error
		if schema, err = parseAvroSchema(text); err != nil {
			return nil, fmt.Errorf("%s.schema_file: %s: %w", c.key(), source, err)
		}
		if len(c.Columns) == 0 {
			of := schema
			if c.CDC != "" { // the row's columns
				if of, err = envelopeColumnsSchema(schema); err != nil {
					return nil, fmt.Errorf("%s.schema_file: %s: %w", c.key(), source, err)
				}
			}
			if c.Columns, err = avroColumns(of); err != nil {
				return nil, fmt.Errorf("%s.schema_file: %s: %w", c.key(), source, err)
			}
			c.derived = true
			if c.Registry != nil && c.SchemaFile == "" {
				for i := range c.Columns {
					c.Columns[i].Nullable = new(true)
				}
			}
			c.setOrigin()
		}
	case len(c.Columns) == 0: // a registry that had no schema for the subject
		return nil, fmt.Errorf("%s.columns: none given, and no schema to make them of", c.key())
	}
	for i, col := range c.Columns {
		if col.Type == "variant" {
			return nil, fmt.Errorf("%s.columns[%d].type: a variant column holds JSON values; the format is avro", c.key(), i)
		}
	}
	return schema, nil
}

// checkCDC refuses an unknown change event format, or one over records
// that are neither JSON nor Avro.
func (c *Config) checkCDC() error {
	switch {
	case c.CDC == "":
	case c.CDC != CDCDebezium:
		return fmt.Errorf("%s.cdc: unknown %q (want %s)", c.key(), c.CDC, CDCDebezium)
	case c.Format != JSON && c.Format != "" && c.Format != Avro:
		return fmt.Errorf("%s.cdc: debezium reads JSON change events (the JSON converter's) or Avro ones (an Avro converter's); the format is %s", c.key(), c.Format)
	case !c.Tombstones:
		return fmt.Errorf("%s.cdc: change events update and delete rows: it needs write_mode: upsert", c.key())
	case c.Format == Avro:
		return c.checkEnvelopePaths()
	}
	return nil
}

// keyFormat is KeyFormat or its default, Raw.
func (c *Config) keyFormat() Format {
	if c.KeyFormat == "" {
		return Raw
	}
	return c.KeyFormat
}

// checkKeyFormat refuses an unknown key format, or a registry one without
// a registry.
func (c *Config) checkKeyFormat() error {
	switch f := c.keyFormat(); f {
	case Raw, JSON:
	case Avro, JSONSchema, Protobuf:
		if c.Registry == nil {
			return fmt.Errorf("%s.key_format: %s keys name their schemas in a registry: set schema_registry.url", c.key(), f)
		}
	default:
		return fmt.Errorf("%s.key_format: unknown format %q (want raw, json, avro, json_schema or protobuf)", c.key(), f)
	}
	return nil
}

// setOrigin gives the columns made of Schema its origin.
func (c *Config) setOrigin() {
	for i := range c.Columns {
		c.Columns[i].Origin = c.SchemaOrigin
	}
}

// registryOnly refuses a schema file, or no registry, for a format whose
// schemas only a registry gives.
func (c *Config) registryOnly() error {
	switch {
	case c.SchemaFile != "":
		return fmt.Errorf("%s.schema_file: the %s format reads its schemas from the schema registry", c.key(), c.Format)
	case c.Registry == nil:
		return fmt.Errorf("%s.format: %s records name their schemas in a registry: set schema_registry.url", c.key(), c.Format)
	}
	return nil
}

// protobufColumns checks a protobuf table's section, and makes its
// columns of the message of its schema file, or of the subject's latest
// schema, when it gives none.
func (c *Config) protobufColumns() error {
	for i, col := range c.Columns {
		if col.Type == "variant" {
			return fmt.Errorf("%s.columns[%d].type: a variant column holds JSON values; the format is protobuf", c.key(), i)
		}
	}
	if c.SchemaFile != "" {
		return c.protoFileColumns()
	}
	if err := c.registryOnly(); err != nil {
		return err
	}
	if c.Schema == "" {
		if len(c.Columns) == 0 {
			return fmt.Errorf("%s.columns: none given, and no schema to make them of", c.key())
		}
		return nil
	}
	schema, err := parseProtoSchema(c.Schema)
	if err == nil {
		var md protoreflect.MessageDescriptor
		if md, err = schema.message(c.Message); err == nil && len(c.Columns) == 0 {
			c.Columns, err = protobufColumns(md)
			c.derived = true
			c.setOrigin()
		}
	}
	if err != nil {
		return fmt.Errorf("%s: the registry's schema: %w", c.key(), err)
	}
	return nil
}

// jsonSchemaColumns checks a json_schema table's section, and makes its
// columns of the subject's latest schema when it gives none.
func (c *Config) jsonSchemaColumns() error {
	if err := c.registryOnly(); err != nil {
		return err
	}
	switch {
	case len(c.Columns) > 0:
		return nil
	case c.Schema == "":
		return fmt.Errorf("%s.columns: none given, and no schema to make them of", c.key())
	}
	var err error
	if c.Columns, err = jsonSchemaColumns(c.Schema); err != nil {
		return fmt.Errorf("%s: the registry's schema: %w", c.key(), err)
	}
	c.derived = true
	c.setOrigin()
	return nil
}

// avroValues compiles the Avro reader of plan p, naming the column whose
// source the schema does not have: of schema's records, or with a
// registry, of the records' headers' writer schemas.
func (c *Config) avroValues(schema *avroSchema, p *plan) (func(p *plan) values, error) {
	var build func(p *plan) values
	var err error
	if schema != nil {
		build, err = compileAvro(schema, p, false)
	}
	if c.Registry != nil && c.SchemaFile == "" && err == nil {
		build = registryFormatValues(Avro, c.Registry)
	}
	if pe, isPath := errors.AsType[*avroPathError](err); isPath {
		for i, col := range p.cols {
			for n := col.node; col.src.kind == srcPath && n > 0; n = p.nodes[n].parent {
				if n == pe.node {
					return nil, fmt.Errorf("%s.columns[%d].source: %w", c.key(), i, err)
				}
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s.schema_file: %s: %w", c.key(), c.schemaSource(), err)
	}
	return build, nil
}

// schemaSource names where the avro format's schema comes from, for errors.
func (c *Config) schemaSource() string {
	if c.SchemaFile == "" {
		return "the registry's schema"
	}
	return c.SchemaFile
}
