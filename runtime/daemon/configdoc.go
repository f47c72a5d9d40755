package daemon

import (
	"fmt"
	"reflect"
	"strings"
	"time"
)

// keySpec is what one configuration key is beyond its name and type (the
// struct field's yaml tag and Go type) and its default (keyDefaults:
// DefaultConfig, or the section's own package): its documentation, the environment variable
// that overrides it, and what an empty value means. The reference
// (docs/configuration.md), Load's environment overrides and its refusal of
// empty values all read it, so a key is its field and this one entry.
type keySpec struct {
	doc string
	// def is the default in words for a key whose default no value says:
	// derived from another key, none (an optional key: —), or inherited (a
	// tables entry's flush.*); it wins over keyDefaults' value. A key whose
	// package has a default never repeats it here (a test checks the kafka
	// and nats sections).
	def string
	// env is the variable that overrides the key (comma-separated for a
	// list); "" for none.
	env string
	// emptyOK: "" or [] means something (http.listen: "" disables the
	// server); other keys with a default refuse an empty value.
	emptyOK bool
}

// keySpecs holds every key of Config. A test walks Config's yaml tags and
// fails when a key is missing here or listed here but gone, so the
// reference cannot drift from the parser.
var keySpecs = map[string]keySpec{
	"tables":                                {doc: "Several tables in one process, instead of `table` and `kafka.topic` (which mean a list of one): a list of routes, each with every `table` key, the topics that feed it, an optional row filter, and its own `flush` and `maintenance` keys (those it leaves out take the process-wide sections' values). Names and tables are unique (`./data/t` and `data/t/`, `s3://b/t` and `s3a://b/t` are one table; `Weather` and `weather` one DLQ stream); topics may overlap (a topic feeding several tables is read once). One consumer group, one NATS connection, one HTTP server serve them all; each table has its own committer, DLQ stream (`DELTAFLOW_DLQ_<NAME>`), offsets and an equal share of `backpressure.memory_budget`. The table commands take `--table NAME`.", def: "— (the single form)"},
	"tables[].topics":                       {doc: "Topics whose records go to the table.", def: "—"},
	"tables[].topic_regex":                  {doc: "Also every topic whose name matches this pattern (Go regexp, unanchored: write `^sensors\\.`); a topic created later is picked up at the consumer's next metadata refresh (within `kafka.metadata_max_age`), and started at `kafka.start_offset`. `topics` or `topic_regex` is required.", def: "—"},
	"tables[].where":                        {doc: "Only rows this filter takes go to the table: comparisons joined by AND over the table's columns, as `deltaflow cat --where` takes them (`device_type = 'smart_plug' AND power > 100`), evaluated on the mapped row (deltaflow_filtered_records_total counts those left out).", def: "— (every row) In a `write_mode: upsert` table, a change the filter leaves out deletes its key (its latest state is not the table's), and a tombstone is never filtered."},
	"unrouted":                              {doc: "What happens to a record of a topic whose every table filters (`tables[].where`) when no filter takes it: `skip` counts it in `deltaflow_unrouted_records_total`; `dlq` also dead-letters it, once, in the DLQ of the first table reading the topic, naming every filter."},
	"table.uri":                             {env: "DELTAFLOW_TABLE_URI", doc: "Table root: `s3://bucket/prefix` (also `s3a://`), `file:///abs/path` or a path."},
	"table.name":                            {doc: "Table name in NATS subjects, KV keys and the DLQ stream name."},
	"table.app_id":                          {doc: "Prefix of the Delta txn appIds (`<app_id>-<topic>-<partition>`) that hold the table's Kafka offsets. Changed on a table that holds another app's offsets of the topic, every such partition is held (starting it at `start_offset` would read its records again) until `deltaflow seek --from-app OLD` adopts them or a `seek` says where to start."},
	"table.partition_columns":               {doc: "Partition columns (string, date, integer, long, boolean or decimal); must equal an existing table's (partitioning never changes). `[]`: unpartitioned.", emptyOK: true},
	"table.mode":                            {doc: "`strict`: a value that cannot be cast sends the record to the DLQ; `permissive`: it becomes null (Spark's from_json)."},
	"table.max_record_bytes":                {doc: "Record values larger than this go to the DLQ unparsed."},
	"table.columns":                         {doc: "Columns in declared order (list of the keys below).", def: "the Spark job's `sensor_events` schema"},
	"table.columns[].name":                  {doc: "Delta column name (required, unique)."},
	"table.columns[].type":                  {doc: "string, boolean, integer, long, float, double, timestamp, timestamp_ntz, date, `decimal(p,s)`, binary, variant (a JSON value as Spark's parse_json makes it: a JSON string is parsed as JSON text, e.g. raw_payload from payload; JSON path sources only), or a struct, array or map of them in Spark's DDL: `struct<name: type, ...>`, `array<type>`, `map<key, type>` (its keys string, integer, long or boolean), nested at will (`array<struct<at: timestamp, v: decimal(9,2)>>`; spaces optional, a field name that is no identifier in backquotes; no variant inside). A struct, array or map column holds the value its `source` addresses, in any format: a JSON object is a struct (members it has no field for are ignored, missing fields are null) or a map, a JSON array an array, a JSON string the JSON text it holds (as a path descends into one: `source: payload` of the sensor records, as Spark's from_json(payload, ...) reads it); an Avro record a struct (fields by name), an array an array, a map a map, a union of several types a struct of its members (`member0`, `member1`, ..., the non-null types in order, as from_avro names them), a union's null a null; a Protobuf message a struct (fields by name), a repeated field an array, a map a map (see Formats). Struct fields, array elements and map values are nullable, as in the schema Spark's from_json reads with; map keys are never null. A JSON object's and an Avro map's keys are text, cast to a key type of integer or long as a JSON number's text is (`\"7\"`, `\"1e2\"`; not `\"1.5\"` nor `\" 7\"`) and to boolean from `true` or `false` (Spark's from_json takes string keys only: transform_keys with a cast is its way); a Protobuf map's integer and bool keys are read as a column of their kind reads them (an int32 key into a string key column is a type error). A key that cannot be cast is a cast failure like any other (`codes: key \"x\": cannot cast \"x\" to integer`). Every scalar inside is cast as a column of its type is (timestamps, dates, decimals, with `cdc: debezium` Debezium's decimals: at the scale their field's schema gives through structs, in an array or a map at the column's), and a value of another shape or a scalar that cannot be cast makes the record a dead letter naming the column and the path inside it (`loc: field lat: cannot cast \"x\" to double`, `tags: element 2: expected string, got number`, `attrs: value of key \"fw\": long overflow`, `codes: value of key 7: expected string, got int32`), or with `mode: permissive` the column null. Not a partition column, key column or `sequence_by`; `where` and `delete_when` compare it with null only. Stored as Spark writes them (a LIST of a repeated group `list` of `element`, a MAP of a repeated group `key_value` of `key` and `value`). `binary` holds bytes: a JSON string's base64 (as from_json reads a binary; other text is a dead letter), Avro bytes and fixed. `timestamp_ntz` is a local date-time without zone, as Spark's TimestampNTZType: a JSON string is read as Spark 3.5's from_json reads one, `[+-]yyyy[-[m]m[-[d]d[T[h]h[:[m]m[:[s]s[.fraction]]]]]]`, T or a space before the hour (`2026-06-22T10:15:30`, `2026-06-22 10:15:30.123456`, a date alone is its midnight, `2026-06` and `2026` their first day; 1- or 2-digit fields, a year of 4 to 6 digits, surrounding whitespace ignored; a fraction of any length is cut to microseconds), stored unshifted (the same wall clock in every reader); a string with a zone or offset (`Z`, `+02:00`, ` UTC`), a field out of range (hour 24, February 30), other text, a number (from_json reads none, where its timestamp takes epoch seconds; deltaflow's timestamp takes none either, but for Debezium's temporal types, whose schema gives the unit: see `cdc`) or a year outside 0001–9999 (from_json takes years 0000 and past 9999) cannot be cast (`mode` decides: a dead letter, or null, as from_json gives it). Stored as INT64 TIMESTAMP(MICROS, isAdjustedToUTC=false), as Spark writes it; not a partition column (`date(<column>)` of it is its local date); a table with one needs the `timestampNtz` table feature (reader 3 / writer 7): a table deltaflow creates gets it, an existing table without it is refused naming the column, as Spark refuses one, until its owner enables it (Spark: `ALTER TABLE ... SET TBLPROPERTIES ('delta.feature.timestampNtz' = 'supported')`). `decimal(p,s)` (1 ≤ p ≤ 38 digits, s of them after the point, 0 ≤ s ≤ p) holds exact numbers, as Spark's DecimalType: a JSON number or a string of one (`12.3`, `\"1e2\"`, `\"1,234.5\"`: commas are dropped, as Spark's from_json does) is read from its text, never through a double, and rounded half up to s digits as from_json rounds (12.345 → 12.35 and -0.005 → -0.01 in decimal(10,2)); a value of more than p digits once rounded is an overflow and other text cannot be cast (`mode` decides: a dead letter, or null). Avro decimals, ints and longs are read exactly, rescaled the same way. Stored as Spark stores it (INT32 up to 9 digits, INT64 up to 18, else the shortest FIXED_LEN_BYTE_ARRAY). As a partition column its partition value is the plain number with s fraction digits (`12.50`, `-0.01`, `0.00`, `-7` in decimal(10,0), `0.0000000001` in decimal(20,10)), as Spark 4 writes it; Spark 3.5 writes the same but in Java's scientific form where a value has fewer digits than s − 5 (`1E-10`), and both read either. With `cdc: debezium`, a JSON string is Debezium's `decimal.handling.mode=precise` (its default) value: the base64 of the unscaled big-endian two's complement, at the scale its field's schema gives (`org.apache.kafka.connect.data.Decimal`, `parameters.scale`) and rescaled into the column; without `schemas.enable` no scale comes with it, and the column's own scale is taken, so declare the column with the numeric's scale (a numeric(12,2) into decimal(p,2)); a string that is no base64 is a dead letter naming the column (`decimal.handling.mode=string` needs `schemas.enable`, whose schema says the field is a string). A `numeric` without precision (`io.debezium.data.VariableScaleDecimal`, an object `{scale, value}`) carries its scale, with or without schemas. A `kafka.key.<path>` decimal column of a `cdc: debezium` table reads the record key's decimal the same way (a numeric primary key; with `schemas.enable` its scale is in the key's schema)."},
	"table.columns[].source":                {doc: "Dot-separated JSON path (descends into JSON-encoded string fields), `now()`, `date(<column>)`, kafka.partition/offset/timestamp/key/topic, or `kafka.key.<path>`: a field of the record key decoded as `key_format` says; with `cdc: debezium`, `cdc.<path>` and `cdc.source.binlog_position` (see `cdc`).", def: "the column name"},
	"table.columns[].required":              {doc: "Records whose value is missing or null go to the DLQ.", def: "false"},
	"table.columns[].nullable":              {doc: "Delta nullability; a non-nullable column is implicitly required. New columns of an existing table must be nullable.", def: "true"},
	"table.format":                          {doc: "How record values are encoded: `json` (objects), `json_schema` (JSON objects in the schema registry's wire format, each validated by the JSON Schema its id names: Formats, below), `protobuf` (with `schema_file` and `message`, plain Protobuf bodies of that message, no header; without it, Protobuf messages in the schema registry's wire format: Formats) or `avro`: with `schema_file`, Avro binary bodies without a header, all written with that schema; without it, records in the schema registry's wire format (a zero byte, the 4-byte schema id, the body), each read with the writer schema its id names (`schema_registry`). With `avro`, `columns` and `partition_columns` have no default: without `columns`, each field of the schema is a column of the type Spark's from_avro gives it (Formats, below), and the table is unpartitioned unless `partition_columns` says otherwise; column sources are paths into the record (`payload.power`)."},
	"table.schema_file":                     {doc: "The schema the records are written with, for a topic produced without a schema registry: the Avro schema (`.avsc`) of a `format: avro` table, or the `.proto` file of a `format: protobuf` one (with `message`; its imports are found relative to its directory, the well-known types `google/protobuf/*.proto` are known). A file that cannot be read or compiled, or lacks an import, fails the start (and `config check`) naming the file (and the line).", def: "—"},
	"table.subject":                         {doc: "The registry subject whose latest schema makes the columns of a `format: avro` or `format: protobuf` table without `schema_file`, or of a `format: json_schema` one, without `columns` (asked at each start; the columns' sources are checked against it too).", def: "`<topic>-value` (the first topic's, Confluent's TopicNameStrategy)"},
	"table.key_format":                      {doc: "How record keys are encoded, for the columns whose `source` is `kafka.key.<path>` (a field of the key: `kafka.key.id`, `kafka.key.meta.region`): `raw` (only `kafka.key` reads the key, its bytes as a string), `json` (an object), or `avro`, `json_schema`, `protobuf` in the schema registry's wire format, each key read with the schema its id names (`schema_registry`; the key's subject is not asked). A key that cannot be decoded makes its record a dead letter whose reason starts with `key:`; a record without a key has null key fields.", def: "`raw`"},
	"table.write_mode":                      {doc: "`append` adds every record as a row. `upsert` keeps one row per key (`key_columns`): each epoch's latest change of a key (by Kafka offset: a key's records share a partition) replaces the key's row, and a record whose value is null (a tombstone) deletes it; replaced and deleted rows are marked in deletion vectors in the epoch's own commit, with its offsets, so a crash neither loses nor doubles a change. A table deltaflow creates in upsert mode allows deletion vectors (`delta.enableDeletionVectors`, reader 3 / writer 7); an existing table must allow them already. A table with a change data feed (`delta.enableChangeDataFeed = true`) gets, in each epoch's commit that replaces or deletes rows, change data files holding its inserts, update pre- and post-images and deletes as Spark's MERGE writes them (a key changed several times in an epoch is one change); an epoch that only adds whole files needs none (its adds are the inserts, as every append's are); under column mapping they use its physical names, as its data files do. A row whose key column is null is a dead letter.", def: "`append`"},
	"table.key_columns":                     {doc: "The columns that identify a row of a `write_mode: upsert` table (string, integer, long or decimal data columns, not partition columns; decimals equal in value are one key, stored as INT32, INT64 or FIXED_LEN_BYTE_ARRAY alike); their source is usually the record key (`kafka.key.id`, with `key_format`), so that a tombstone names the key it deletes."},
	"table.cdc":                             {doc: "`debezium`: the values are Debezium change events from Kafka Connect's JSON converter (with or without `schemas.enable`: a `{\"schema\", \"payload\"}` value or key is read as its payload). Needs `write_mode: upsert`. Column paths address the row image (`after`; for a delete, `op` `d`, the `before` image, which names the key to delete), `cdc.<path>` the envelope (`cdc.op`, `cdc.source.lsn`, `cdc.ts_ms`), and `cdc.source.binlog_position` (a `long` column) a MySQL or MariaDB event's binlog position as one number that orders as (file, pos, row) do: the file's index (the digits after the last dot of `source.file`, 0–262143) in bits 62–45, `source.pos` (0–4294967295: binlog offsets are 32-bit) in bits 44–13, `source.row` (the row within the event, 0–8191) in bits 12–0; a position out of those ranges, or without one of the fields, is a dead letter naming the field. It does not hold the binlog's base name: a renamed `log_bin` or a failover to another server starts positions over; operations `c`, `u` and `r` (snapshot reads) upsert the row. The tombstone Debezium sends after a delete is skipped (its delete came first); an event without `op` or with another operation (`t`, truncate) is a dead letter. A change of primary key (a delete of the old key, then a create of the new) moves the row. Debezium's dates and timestamps (its default `time.precision.mode=adaptive`) are numbers whose unit only the field's schema names: with `schemas.enable`, a number of `io.debezium.time.Date` or Kafka Connect's `org.apache.kafka.connect.data.Date` (days since the epoch), of `io.debezium.time.Timestamp`, `MicroTimestamp` or `NanoTimestamp` (a `timestamp` without time zone, e.g. Postgres' `timestamp(3)` and `timestamp`: milli-, micro- or nanoseconds since the epoch of its wall clock, the local date-time read as UTC, which is what Debezium's documentation says these values are) or of Kafka Connect's `org.apache.kafka.connect.data.Timestamp` (milliseconds, an instant) casts into a `date` column (a timestamp's UTC date), a `timestamp` column (the wall clock read as UTC: a Postgres `timestamp` '2026-06-22 10:15:30' is 2026-06-22T10:15:30Z, whatever the database's time zone) or a `timestamp_ntz` column (the wall clock, unshifted; a date its midnight), and into an `integer` or `long` column as the number it is; nanoseconds are cut to microseconds, and a value outside years 0001–9999 cannot be cast (`mode` decides: a dead letter, or null). Without `schemas.enable` no unit comes with the number: it casts into an `integer` or `long` column only, as any JSON number (a date or timestamp column makes it a dead letter). Debezium's times of day (`io.debezium.time.Time`, `MicroTime`, `NanoTime`) stay numbers, `integer` or `long`: no column type holds a time of day. With `format: avro` (a registry's topic, or `schema_file` for bare bodies) the values are Debezium's envelope as an Avro converter writes it (`before` and `after` both `[\"null\", Value]`, `op` a string): the same operations, tombstones, `cdc.<path>` sources (except `cdc.before` and `cdc.after`: plain paths read the row image) and binlog position; a record of a schema that is no envelope (no nullable record `after`, `before` of the same record, string `op`) is a dead letter (with `schema_file`, the route is refused). Without `columns` the columns are the `Value` record's fields (and no `cdc.<path>` column: the Kafka offset orders the changes; declare the columns to order them by `cdc.source.lsn`), and a new column of the source table (a new field of `Value`) adds its column while running, as for any registry topic. Debezium's semantic types are read as what they mean, in any Avro topic: `io.debezium.data.VariableScaleDecimal` (a `numeric` without precision, a record `{scale, value}`) as a decimal of its own scale, derived as `decimal(38,18)` (Spark's type for a Java BigDecimal: more fraction digits are rounded half up, more than 20 integer digits overflow; declare the column to choose), `io.debezium.time.ZonedTimestamp` (a `timestamptz`, an ISO-8601 string) as a `timestamp` (or its text in a `string` column), the dates and timestamps above (an `int` or `long` with that `connect.name`) as declared columns read the JSON ones, derived as `date` (both Dates), `timestamp_ntz` (Debezium's Timestamp kinds: a local date-time, whose exact type that is; Spark's from_avro, which reads no `connect.name`, gives the int or long) and `timestamp` (Kafka Connect's Timestamp, an instant; its Avro logical types `date` and `timestamp-millis`, which Confluent's converter adds, read the same), the times of day as `integer` or `long`; Kafka Connect's Decimal is an Avro decimal already (`decimal(p,s)` from the schema). Checked with the schema the real Apicurio AvroConverter 2.6.13 made for Debezium 3.6.1's Postgres envelope and real change events re-encoded with it, not a live Avro Debezium pipeline (Confluent's AvroConverter is not on Maven Central, and no registry Apicurio's converter speaks to could be installed).", def: "— (plain records)"},
	"table.upsert_strategy":                 {doc: "How a `write_mode: upsert` table deletes replaced rows: `deletion_vectors` marks them in deletion vectors (cheap; the table needs `delta.enableDeletionVectors`), `copy_on_write` rewrites each file that holds one without it (every reader reads such a table, polars' `scan_delta` and Presto too; an epoch costs a rewrite of each file it touches, and holds a file's rows in memory while rewriting it).", def: "`deletion_vectors`"},
	"table.sequence_by":                     {doc: "In a `write_mode: upsert` table, the column that orders the changes of a key (an integer, long, date or timestamp data column, not a key): the change with the highest value wins whenever it arrives, at equal values the later record. A change older than the key's row in the table, or than the key's remembered delete, is ignored and counted (`deltaflow_upsert_stale_changes_total`); a change whose column is null is a dead letter (a tombstone has only the key's fields and `kafka.*`: a topic that deletes by tombstone orders by one of those, such as `source: kafka.timestamp`). A `cdc: debezium` table that does not say `sequence_by` is ordered by its column with `source: cdc.source.lsn` (PostgreSQL's log position) or `source: cdc.source.binlog_position` (MySQL's and MariaDB's), if it has one; `sequence_by: \"\"` keeps the offset. A deleted key's sequence is remembered in the NATS KV bucket `deltaflow_deleted_<TABLE>_<id>` (id: the Delta table id's first 8 characters) for `delete_retention`. The column's values must grow over the source's whole life: a source whose positions start over (a new database cluster) needs a new table.", def: "— (with `cdc: debezium`, the column with `source: cdc.source.lsn` or `cdc.source.binlog_position`; else the Kafka offset: a key's records share a partition, in the order they were produced)"},
	"table.delete_retention":                {doc: "How long a `sequence_by` table remembers a deleted key's sequence (the max age of its KV bucket; each delete of the key starts it again): a change older than the delete that arrives within it is ignored, one that arrives after it brings the key back.", def: "`168h` (7 days)"},
	"table.key_index_memory":                {doc: "The memory bound of a `write_mode: upsert` table's key → file index: a Bloom filter of each data file's keys (20 bits, about 2.5 bytes, a key; one false \"maybe\" in about 15,000 keys a file does not hold), so that an epoch reads the key columns only of the files that may hold one of its keys, not of every file whose key statistics span them (random keys such as UUIDs or hashed ids make every file's span the whole range). Built from the table as epochs read files' keys and from the files each commit adds, in this process's memory only; a file past the bound, or that the index does not know yet (another writer's, OPTIMIZE's), is read as without an index, so the index never changes a result. Counted in the table's share of `backpressure.memory_budget`: the buffers get the share less this bound, which is cut to half the share if above it (`deltaflow_key_index_bytes` shows what it holds). `0` turns it off.", def: "`4MiB` (about 1.6 million keys)"},
	"table.delete_when":                     {doc: "In a `write_mode: upsert` table, a filter (the language of `where`, over the table's columns) that makes a record it takes a delete of its key: a topic that marks deletes in its values, as Debezium's ExtractNewRecordState does with `delete.tombstone.handling.mode: rewrite` (`__deleted = 'true'`, with a `__deleted` column). A tombstone deletes its key too."},
	"table.message":                         {doc: "The full name of the message (`pkg.Reading`) whose fields make the columns of a `format: protobuf` table without `columns`; records of other messages of the schema are read into them by field name. With `schema_file`, required: the message every record body is (a name the file and its imports lack fails the start).", def: "the schema's first message"},
	"table.schema_evolution":                {doc: "What a registry table without `columns` does with a writer schema that has top-level fields no column reads, or fields inside a struct column that it lacks (of a nested record, object or message, at any depth, in an array's elements and a map's values too): `add_columns` adds a nullable column for each top-level one (of a type a column holds) and a nullable struct field for each nested one while running, in a commit of its own before the first rows that hold it (the records read since the last commit are read again); `none` leaves them out. Older rows read null in the new columns and fields. A change the table refuses when it is committed (a timestamp_ntz column in a table without the `timestampNtz` feature, a type widening the table no longer allows) makes that schema's records dead letters naming the refusal; the others go on."},
	"table.checkpoint_interval":             {doc: "`delta.checkpointInterval` of a table deltaflow creates (a checkpoint every N versions)."},
	"table.compression":                     {doc: "Data file codec: `snappy` or `zstd` (~40% more CPU, ~33% smaller)."},
	"storage.endpoint":                      {env: "MINIO_ENDPOINT", doc: "S3/MinIO endpoint, `host:port` or `http(s)://host:port`; for s3:// tables.", def: "$AWS_ENDPOINT_URL"},
	"storage.access_key":                    {env: "MINIO_ACCESS_KEY", doc: "S3 access key id.", def: "$AWS_ACCESS_KEY_ID"},
	"storage.secret_key":                    {env: "MINIO_SECRET_KEY", doc: "S3 secret key; never printed or logged.", def: "$AWS_SECRET_ACCESS_KEY"},
	"storage.region":                        {doc: "S3 region (optional).", def: "$AWS_REGION"},
	"storage.secure":                        {doc: "Use HTTPS; unset lets the endpoint's scheme decide (plain host:port is HTTP).", def: "auto"},
	"storage.ca_file":                       {env: "MINIO_CA_FILE", doc: "PEM CA bundle to trust for HTTPS instead of the system pool (a MinIO with a private CA).", def: "—"},
	"storage.single_writer":                 {env: "DELTAFLOW_SINGLE_WRITER", doc: "Write even when the store does not honour put-if-absent (an S3-compatible server that ignores `If-None-Match`), which every start checks: only safe when no other process ever writes the table, since two writers could then overwrite one version. The table commands take `--single-writer`.", def: "false"},
	"kafka.brokers":                         {env: "KAFKA_BOOTSTRAP", doc: "Seed brokers, `host:port`."},
	"kafka.topic":                           {env: "KAFKA_TOPIC", doc: "Topic to read."},
	"kafka.group":                           {env: "KAFKA_GROUP", doc: "Consumer group (assignment in mode group; offsets for lag tools always)."},
	"kafka.mode":                            {doc: "`group` (Kafka assigns partitions; several instances share a topic) or `partitions` (fixed list, no group)."},
	"kafka.partitions":                      {doc: "Partitions to read in mode `partitions`.", def: "—"},
	"kafka.start_offset":                    {doc: "Where a partition the table has no offset for starts: `earliest` or `latest`. The offset it resolves to is committed to the table (a `SEEK` commit) before the partition is read, so a restart resumes there, not at a newer `latest`."},
	"kafka.on_data_loss":                    {doc: "What happens when a partition's table offset is no longer in its Kafka log: records deleted by retention or DeleteRecords before they were read, or the topic deleted and created again (its topic ID, recorded in the table property `deltaflow.kafkaTopicId.<app_id>-<topic>`, changed; or its log ends before the offset). `fail` holds the partition unread and makes `/healthz` fail, naming the partition, the offsets and the count, until a human decides (Spark's `failOnDataLoss`); `skip` resumes at the log start and records a `DATA_LOSS` commit in the table's history. Both publish a `data_loss` event and count `deltaflow_data_loss_total`."},
	"kafka.isolation_level":                 {doc: "`read_committed`: records of aborted transactions never reach the table, and reading waits at an open transaction (the last stable offset); `read_uncommitted`: every record is read. Transaction markers take offsets either way; the table's offset moves past them, so an idle transactional partition is caught up."},
	"kafka.start_offsets":                   {doc: "Explicit first offsets, `{partition: offset}`, for partitions the table has no offset for; written into the table as txn actions at start (also `deltaflow seek --offsets`). Others fall back to `start_offset`.", def: "—"},
	"kafka.start_timestamp":                 {doc: "Start partitions the table has no offset for at their first record at or after this time (RFC 3339 or a date; Kafka's ListOffsets by time); written into the table at start. Exclusive with `start_offsets`.", def: "—"},
	"kafka.client_id":                       {doc: "Client id sent to the brokers."},
	"kafka.instance_id":                     {doc: "Static group membership id, unique per process: restarted after a crash, the process takes its partitions back at once instead of after the dead member's 45 s session timeout. `{hostname}` in it is replaced by the host's name (`deltaflow-{hostname}`), so one file serves every replica of `docker compose up --scale deltaflow=N`: each container has its own hostname, kept across restarts (a recreated container gets a new one, and so a new id). Letters, digits, `.`, `_` and `-` only. Mode group only.", def: "— (dynamic)"},
	"kafka.fetch_max_wait":                  {doc: "How long a broker holds an empty fetch: how often an idle deltaflow asks Kafka for news (Kafka's consumer default)."},
	"kafka.metadata_max_age":                {doc: "How old the client's view of the cluster may grow: a topic created later that a table's `topic_regex` matches is read within it (one metadata request per interval). At least 5s."},
	"kafka.fetch_max_bytes":                 {doc: "Bound on one fetch response, in bytes."},
	"kafka.fetch_max_partition_bytes":       {doc: "Bound on one partition's share of a fetch (compressed bytes); keeps fetch memory small."},
	"kafka.max_poll_records":                {doc: "Bound on the records one poll returns."},
	"kafka.max_decompress_bytes":            {doc: "Bound on what one record batch may decompress to (a few KiB of zstd can hold hundreds of MiB). A batch over it is never decompressed: it becomes one dead letter naming its partition and offsets (no body; `Deltaflow-Last-Offset` when it holds several records) and the table's offset moves past it in the same commit. It also bounds what the fetches hold decompressed until polled: a fetch of many small batches that compress well stops decompressing there, and the rest is fetched later. Raise it when producers send larger batches (Kafka's producers build at most 1 MB by default)."},
	"kafka.sasl.mechanism":                  {doc: "`PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`; empty disables SASL.", def: "—"},
	"kafka.sasl.user":                       {doc: "SASL user.", def: "—"},
	"kafka.sasl.password":                   {doc: "SASL password; never printed or logged.", def: "—"},
	"kafka.sasl.allow_plain_without_tls":    {doc: "Let `PLAIN` send the password in the clear when `kafka.tls.enabled` is false; otherwise that is refused (use TLS or SCRAM).", def: "false"},
	"kafka.tls.enabled":                     {doc: "Encrypt broker connections.", def: "false"},
	"kafka.tls.ca_file":                     {doc: "PEM CA bundle to trust instead of the system pool.", def: "—"},
	"kafka.tls.cert_file":                   {doc: "PEM client certificate (mutual TLS); with key_file.", def: "—"},
	"kafka.tls.key_file":                    {doc: "PEM client key; with cert_file.", def: "—"},
	"kafka.tls.insecure_skip_verify":        {doc: "Skip server certificate verification (tests only).", def: "false"},
	"nats.url":                              {env: "NATS_URL", doc: "NATS servers, comma-separated; empty runs an embedded nats-server with JetStream.", def: "\"\" (embedded)"},
	"nats.user":                             {doc: "NATS user (also required by the embedded server when set, with `nats.password`).", def: "—"},
	"nats.password":                         {env: "NATS_PASSWORD", doc: "NATS password; never printed or logged. The embedded server refuses to start with `nats.user` and no password (it would admit anyone sending the user); a blank one is refused everywhere.", def: "—"},
	"nats.token":                            {doc: "NATS token; never printed or logged. A blank one is refused.", def: "—"},
	"nats.creds_file":                       {doc: "NATS credentials file (JWT + nkey); needs nats.url.", def: "—"},
	"nats.tls.ca_file":                      {doc: "PEM CA bundle for the server certificate.", def: "—"},
	"nats.tls.cert_file":                    {doc: "PEM client certificate; with key_file.", def: "—"},
	"nats.tls.key_file":                     {doc: "PEM client key; with cert_file.", def: "—"},
	"nats.tls.insecure_skip_verify":         {doc: "Skip server certificate verification (tests only).", def: "false"},
	"nats.listen":                           {doc: "Where the embedded server listens (so the `nats` CLI works); port -1 picks a free one. Beyond a loopback address only with `nats.user`/`nats.password` or `nats.token`, which it then requires: whoever reaches it may pause deltaflow and read or delete its streams."},
	"nats.store_dir":                        {doc: "JetStream store of the embedded server.", def: "`nats` next to a local table (./data/nats), else $TMPDIR/deltaflow-nats"},
	"nats.kv_bucket":                        {doc: "KV bucket of the recovery offsets mirror."},
	"nats.kv_replicas":                      {doc: "Replicas of the KV bucket and DLQ stream (1 with the embedded server)."},
	"nats.dlq_stream":                       {doc: "Dead-letter stream name.", def: "DELTAFLOW_DLQ_<TABLE>"},
	"nats.dlq_max_age":                      {doc: "How long dead letters are kept; negative keeps them forever."},
	"nats.dlq_max_bytes":                    {doc: "Bound on the DLQ stream. Full, it refuses new letters rather than drop stored ones (JetStream discard new): the epoch holding them waits uncommitted (its records stay in Kafka, nothing is lost), `/healthz` fails naming this key and `deltaflow_dlq_full` is 1, until room is made (letters expire, `nats stream purge`, a larger bound); `deltaflow_dlq_stored_bytes` warns before. The embedded server's JetStream store is capped at this + 64MiB (nats-server would take 75% of the free disk); an external server must be able to reserve it (its `max_file_store`)."},
	"nats.publish_timeout":                  {doc: "Bound on every JetStream call (KV put, DLQ acks)."},
	"flush.interval":                        {env: "FLUSH_INTERVAL", doc: "Commit an epoch this often (the Spark job's trigger)."},
	"flush.max_bytes":                       {doc: "Commit early once the epoch's buffered data (rows being written, encoded files) reaches this size."},
	"flush.row_group_rows":                  {doc: "Rows per Parquet row group; bounds each buffer's encoder memory."},
	"backpressure.memory_budget":            {doc: "Pause Kafka while what the pipeline holds until commit reaches this much memory: rows being written, encoded files not yet uploaded, each open file's Parquet writer (~156 KiB for the default columns) and buffer, dead letters, and an upsert table's key → file index (`table.key_index_memory`, taken from its table's share). A new partition value's file or a dead letter that would not fit seals the epoch early and waits for room, so an epoch has at most this / a writer's memory partition values open (~100 at 16MiB). `run` also sets the Go soft memory limit to this + 16MiB, and 2MiB more for each table beyond the first, unless `GOMEMLIMIT` is set."},
	"backpressure.max_unfinished_epochs":    {doc: "Pause Kafka while more epochs than this are uncommitted."},
	"http.listen":                           {env: "DELTAFLOW_HTTP_LISTEN", doc: "Serves `/healthz`, `/readyz` and `/metrics`; `\"\"` disables.", emptyOK: true},
	"log.level":                             {env: "DELTAFLOW_LOG_LEVEL", doc: "`debug`, `info`, `warn` or `error`."},
	"log.format":                            {doc: "`text` or `json`."},
	"maintenance.optimize_every":            {doc: "Run OPTIMIZE (compaction) this often; 0 never.", def: "0 (never)"},
	"maintenance.optimize_target_size":      {doc: "Size compacted files aim for."},
	"maintenance.optimize_min_files":        {doc: "OPTIMIZE compacts a partition still being written once it holds this many files under `optimize_open_target_size`; a closed one (nothing added since the previous run) whenever it has two small files."},
	"maintenance.optimize_open_target_size": {doc: "Size the files of a partition still being written are compacted to; larger files are left alone, so a run never rewrites the whole growing partition (the closed partition is compacted to `optimize_target_size` later)."},
	"maintenance.vacuum_every":              {doc: "Run VACUUM (then log cleanup) this often; 0 never.", def: "0 (never)"},
	"maintenance.vacuum_retain":             {doc: "VACUUM keeps removed files younger than this."},
	"watchdog.stall_intervals":              {doc: "A stall is records waiting in Kafka (since they arrived, or the last commit if later) with no epoch committed for this many `flush.interval` (or the pipeline failing at its backoff cap that long): `/healthz` and `/readyz` answer 503 and a `stalled` event goes out. 0 disables the watchdog."},
	"watchdog.grace":                        {doc: "A stall lasting this long exits the process non-zero (never while a commit is in flight), for its restart policy (`restart: unless-stopped`) to start a fresh one."},
	"watchdog.restart_backoff":              {doc: "Least time between two watchdog exits of the table's processes (the NATS KV bucket remembers the last ones), doubling with each exit of the last 4 × `restart_backoff_max`."},
	"watchdog.restart_backoff_max":          {doc: "Cap of the doubling `restart_backoff`."},
	"schema_registry.url":                   {env: "DELTAFLOW_SCHEMA_REGISTRY_URL", doc: "The Confluent-API schema registry (`http(s)://host:port`), or several, tried in turn. Every `format: avro` or `format: protobuf` table without a `schema_file`, and every `format: json_schema` table, reads its records' writer schemas from it: each schema id is fetched once, off the actors (the partitions of the tables that wait for it stop there meanwhile; a registry down or slow is waited out with backoff, never a dead letter), kept in memory and in the NATS KV bucket, so a restart while the registry is down decodes every id seen before. An id the registry does not have (404) makes its records dead letters.", def: "— (no registry)"},
	"schema_registry.user":                  {doc: "Basic auth user.", def: "—"},
	"schema_registry.password":              {env: "DELTAFLOW_SCHEMA_REGISTRY_PASSWORD", doc: "Basic auth password; never printed or logged. Refused credentials (401/403) fail the start, naming this key.", def: "—"},
	"schema_registry.token":                 {env: "DELTAFLOW_SCHEMA_REGISTRY_TOKEN", doc: "Bearer token, instead of a user and password; never printed or logged.", def: "—"},
	"schema_registry.ca_file":               {doc: "PEM CA bundle to trust for an https registry instead of the system pool.", def: "—"},
	"schema_registry.cert_file":             {doc: "PEM client certificate (mutual TLS); with key_file.", def: "—"},
	"schema_registry.key_file":              {doc: "PEM client key; with cert_file.", def: "—"},
	"schema_registry.timeout":               {doc: "Bound on one request to the registry."},
	"control.max_pause":                     {doc: "A pause by the control service (`nats req deltaflow.<table>.control.pause ''`) ends by itself after this long (a pause may ask for less: `'{\"duration\": \"30s\"}'`; docs/events.md), with a `pause` event (`by: max_pause`), so a forgotten or hostile pause cannot stop ingestion for good; pausing again while paused does not extend it. `deltaflow_paused` is 1 meanwhile. At most 24h."},
	"maintenance.log_cleanup":               {doc: "After a checkpoint, delete log files older than the table's `delta.logRetentionDuration` (default 30 days), at most once a day, as Spark does with `delta.enableExpiredLogCleanup`; a table setting that property to false is left alone."},
}

// spec returns key's spec: keySpecs', or for a key of a `tables` entry
// that repeats a section's key, that key's own (tables[].uri is table.uri;
// tables[].flush.interval defaults to the process-wide flush.interval).
func spec(key string) (keySpec, bool) {
	if s, ok := keySpecs[key]; ok {
		return s, true
	}
	rest, ok := strings.CutPrefix(key, "tables[].")
	if !ok {
		return keySpec{}, false
	}
	if section, _, _ := strings.Cut(rest, "."); section == "flush" || section == "maintenance" {
		_, ok := keySpecs[rest]
		return keySpec{doc: "The table's own `" + rest + "`.", def: "`" + rest + "`"}, ok
	}
	s, ok := keySpecs["table."+rest]
	s.doc, s.env = "As `table."+rest+"`.", ""
	if rest == "uri" || rest == "name" {
		s.doc += " Required, unique."
		s.def = "—"
	}
	return s, ok
}

// configKey is one key of Config with its default value.
type configKey struct {
	key string
	def reflect.Value // invalid inside lists
}

// configKeys walks Config's yaml tags in declaration order: every leaf key,
// and each list of sections (table.columns) followed by its keys.
func configKeys() []configKey {
	var out []configKey
	var walk func(t reflect.Type, v reflect.Value, prefix string)
	walk = func(t reflect.Type, v reflect.Value, prefix string) {
		for _, f := range yamlFieldList(t) {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			key := joinKey(prefix, name)
			var fv reflect.Value
			if v.IsValid() {
				fv = v.FieldByIndex(f.Index)
			}
			ft := f.Type
			switch {
			case ft.Kind() == reflect.Struct && !implementsUnmarshaler(ft):
				walk(ft, fv, key)
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				out = append(out, configKey{key: key})
				walk(ft.Elem(), reflect.Value{}, key+"[]")
			default:
				out = append(out, configKey{key: key, def: fv})
			}
		}
	}
	walk(reflect.TypeFor[Config](), reflect.ValueOf(keyDefaults()), "")
	return out
}

// keyDefaults holds every key's default: DefaultConfig's, with those the
// kafka and nats sections fill in themselves (their packages' defaults, so
// neither the reference nor an empty value's message copies them).
func keyDefaults() Config { return DefaultConfig().Effective() }

// envFor returns the environment variable overriding key, if any.
func envFor(key string) string {
	if s, _ := spec(key); s.env != "" {
		env := s.env
		return "`" + env + "`"
	}
	return ""
}

// formatDefault renders a default value for the reference.
func formatDefault(v reflect.Value) string {
	if !v.IsValid() || v.IsZero() {
		return ""
	}
	switch x := v.Interface().(type) {
	case time.Duration:
		return x.String()
	case fmt.Stringer:
		return x.String()
	case []string:
		return "[" + strings.Join(x, ", ") + "]"
	}
	return fmt.Sprint(v.Interface())
}

// docDefault is k's default as the reference gives it: its spec's words
// where the value cannot say it (derived, optional), else the value, else,
// for a tables entry's key, that of the table section.
func docDefault(k configKey) string {
	if s, _ := spec(k.key); s.def != "" {
		return s.def
	}
	if def := formatDefault(k.def); def != "" {
		return "`" + def + "`"
	}
	if rest, entry := strings.CutPrefix(k.key, "tables[]."); entry {
		return "as `table." + rest + "`"
	}
	return ""
}

// ConfigDoc renders the configuration reference in Markdown; `go generate
// ./runtime` writes it to docs/configuration.md and a test fails when the
// committed file is stale.
func ConfigDoc() string {
	var b strings.Builder
	b.WriteString("# deltaflow configuration\n\n")
	b.WriteString("<!-- Generated by `go generate ./runtime/daemon` from runtime/daemon/config.go and runtime/daemon/configdoc.go. DO NOT EDIT. -->\n\n")
	b.WriteString("`deltaflow run --config FILE` (or `DELTAFLOW_CONFIG=FILE`) reads one YAML file (unknown keys are an error); ")
	b.WriteString("the table commands (`inspect`, `cat`, `verify`, `optimize`, `vacuum`, `seek`, `takeover`) take `--config` too, ")
	b.WriteString("for `table.uri` and the `storage` settings, and their flags win over it. Environment variables ")
	b.WriteString("override the file when set and non-empty. Sizes take bytes or a unit (`32MiB`, `128MB`); durations use Go ")
	b.WriteString("syntax (`60s`, `720h`). A key left out takes its default; a key set to an invalid value (such as ")
	b.WriteString("`flush.interval: 0s`) is an error naming the key and its line (`flush.interval (line 4): \"often\" is not a duration`), ")
	b.WriteString("or its environment variable. An empty value (`\"\"`, `[]`, nothing) for a key that has a default is an error too, ")
	b.WriteString("unless its description says what empty means; one value where a list is wanted is a list of one ")
	b.WriteString("(`kafka.brokers: kafka:9092`). Secrets are never printed or logged.\n\n")
	b.WriteString("`deltaflow config check [--config FILE] [--json] [--probe]` validates the file and the environment, prints the ")
	b.WriteString("effective configuration with every default filled in and every secret redacted, and with `--probe` asks Kafka, ")
	b.WriteString("the table's store and NATS whether they answer (exit 0 valid, 1 a probe failed, 2 invalid). ")
	b.WriteString("`run` gives each of them `--connect-timeout` (`$DELTAFLOW_CONNECT_TIMEOUT`, default 30s) to answer at start.\n")
	section := ""
	for _, k := range configKeys() {
		top, _, _ := strings.Cut(k.key, ".")
		if top != section {
			section = top
			fmt.Fprintf(&b, "\n## %s\n\n| Key | Default | Environment | Description |\n|---|---|---|---|\n", section)
		}
		d, _ := spec(k.key)
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.key, docDefault(k), envFor(k.key), d.doc)
	}
	b.WriteString(formatsDoc)
	return b.String()
}

// formatsDoc says how a binary format's values become columns.
const formatsDoc = `
## Formats

` + "`table.format: avro`" + ` reads each record value as Avro, in one of two ways:

- with ` + "`schema_file`" + `, as an Avro binary body written with that record schema (no header, no schema id);
- with ` + "`schema_registry.url`" + ` and no ` + "`schema_file`" + `, in the Confluent wire format a Schema Registry's
  serializers write: a zero byte, the 4-byte big-endian schema id, the body. Each record is read with the writer
  schema its id names, fetched from the registry the first time the id is seen (the table's partitions wait at
  that record meanwhile: a registry that is down or slow is waited out, never a dead letter) and kept in memory
  and in the NATS KV bucket. The table's columns come from the latest version of ` + "`subject`" + ` (default
  ` + "`<topic>-value`" + `) at start, all nullable (a later version may drop any field); a record written with
  an older or newer version is read into them by field name, as Avro schema resolution does: a field its
  writer schema lacks is null, one of a narrower type is cast (an int into a long column), and one of an
  incompatible type (a string into a long column) makes the record a dead letter naming the column. A writer
  schema that widens a column made of an earlier version (int → long, float → double, a decimal of at least
  as many more digits as more fraction digits) widens the column by Delta type widening when the table allows it
  (its property ` + "`delta.enableTypeWidening`" + ` is ` + "`true`" + `, with the ` + "`typeWidening`" + ` feature, or
  ` + "`typeWidening-preview`" + ` where the table lists that; read when deltaflow starts) and
  ` + "`schema_evolution`" + ` is ` + "`add_columns`" + `: the wider type, with the column's ` + "`delta.typeChanges`" + `,
  is committed as new columns are (below), old files keep their types and every reader converts them (Spark 4
  / Delta 4, delta-kernel-rs and DuckDB read such a table; Spark 3.5 with Delta 3.2 and delta-rs 1.6 refuse the
  feature). Otherwise its records are dead letters naming the field, both types and why, since the table's type
  would overflow or round its values: enable widening with
  ` + "`ALTER TABLE ... SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')`" + ` and restart (the column
  widens at start when the subject's latest version has the wider type), then ` + "`deltaflow dlq replay`" + ` maps them.
  A writer schema that adds a field inside a struct column made of an earlier version (a field of a nested
  record, of an array's or a map's records, at any depth) adds it to the column as a nullable field
  (` + "`schema_evolution: add_columns`" + `), as Delta's and Spark's schema merge add nested fields: in a commit of its
  own, as new columns are (below); older rows read null in it (Spark, delta-rs and DuckDB). With
  ` + "`schema_evolution: none`" + `, or a route that declares the column, such records are read, the new field left out.
  A partition column is not widened, nor is a field inside a struct, array or map (Delta's writer widens none):
  a writer schema whose nested field is wider (` + "`loc.floor`" + ` int → long) makes its records dead letters naming the
  field and both types (` + "`field loc.floor: the writer schema's long is wider than the table's integer field loc.floor of column loc`" + `),
  as one that turns a timestamp into a timestamp_ntz does, at the top or inside; an integer field that becomes a double or a
  decimal is an incompatible change, as Delta's schema evolution (which makes it only by hand) takes it (declared
  ` + "`columns`" + ` take the casts they ask for, and may give the wider type from the start). A writer
  schema with top-level fields no column reads adds them as nullable columns while running
  (` + "`schema_evolution: add_columns`" + `, the default, without ` + "`columns`" + `): the table's schema is evolved in
  a commit of its own, and the records read since the last commit are read again into the new columns. A value without the header, an id the registry does not have (404), a
  schema that is not Avro or references other subjects' schemas (not resolved yet) make dead letters too.
  Refused credentials (401/403) fail the start. Each column made of a registry's schema (in any registry
  format) keeps where it came from in its Delta column metadata, ` + "`deltaflow.origin`" + `: the subject and schema id
  it was created from, or the schema id whose records added it. ` + "`deltaflow schema show`" + ` shows it with each column,
  and asks the registry for the subject's latest schema id (` + "`inspect schema`" + ` shows the columns alone).

Without ` + "`columns`" + `, every field of the record is a column, in schema order, with the Delta type Spark's
` + "`from_avro`" + ` gives it:

| Avro | Column |
|---|---|
| boolean, float, double | boolean, float, double |
| int, long | integer, long |
| string, enum (its symbol), string with logical type uuid | string |
| int with logical type date | date |
| long with logical type timestamp-millis, -micros, -nanos | timestamp (microseconds: nanoseconds are cut) |
| long with logical type local-timestamp-millis, -micros, -nanos | timestamp_ntz: the wall clock the producer wrote, not shifted (microseconds: nanoseconds are cut; from_avro of Spark 3.5 reads local-timestamp-nanos, and timestamp-nanos, as a long) |
| bytes or fixed with logical type decimal (precision p ≤ 38, scale s) | decimal(p,s): the unscaled big-endian two's complement read exactly |
| int with time-millis, long with time-micros | integer (milliseconds of the day), long (microseconds), as from_avro ignores both |
| Debezium's record io.debezium.data.VariableScaleDecimal {scale: int, value: bytes} (a numeric without precision) | decimal(38,18): the value at its own scale, rounded half up to 18 digits (from_avro gives the struct; deltaflow reads what it means, as for JSON change events) |
| string with connect.name io.debezium.time.ZonedTimestamp (Debezium's timestamptz) | timestamp: the instant its ISO-8601 text names (from_avro gives the string) |
| int with connect.name io.debezium.time.Date or org.apache.kafka.connect.data.Date (days since the epoch; with or without logical type date) | date (from_avro gives the int without the logical type) |
| long with connect.name io.debezium.time.Timestamp, MicroTimestamp, NanoTimestamp (Debezium's timestamp without time zone: ms, µs, ns since the epoch of its wall clock) | timestamp_ntz: the wall clock, not shifted (microseconds: nanoseconds are cut; from_avro gives the long, as it reads no connect.name: a local date-time's exact type is timestamp_ntz) |
| long with connect.name org.apache.kafka.connect.data.Timestamp (ms, an instant; with or without logical type timestamp-millis) | timestamp |
| int or long with connect.name io.debezium.time.Time, MicroTime, NanoTime (a time of day) | integer, long, as from_avro gives them: no column type holds a time of day |
| bytes, fixed (without a valid decimal logical type) | binary |
| record | struct of its fields, by name, in schema order |
| array | array of its items' type |
| map | map<string, its values' type> |
| a union of null and one type above | that type, nullable |
| a union of int and long, of float and double (and null) | long, double (nullable) |
| any other union | struct<member0: T0, member1: T1, ...>: one field per non-null type, in order, the one the value has set, the others null, as from_avro makes it (nullable with null among its types) |
| any other type | not nullable: a null sends the record to the DLQ |

Inside a struct, array or map every field, element and value is nullable (from_avro marks those that are not
unions with null not nullable): as in the columns a route declares, and a later version of a registry schema
may drop a field of a nested record too. A decimal the Avro specification holds invalid (a scale above its
precision, a fixed too short for its digits) is its plain bytes or fixed, binary, as Avro readers take it.
Decimals of more than 38 digits, a union of nothing but null and recursive records (a record that holds
itself, directly or below) have no column type: a schema with such a field is refused naming each one (the
recursive record by name), and the route gives ` + "`columns`" + ` instead, with sources that are paths to the
values inside records and maps (` + "`payload.power`" + `, ` + "`attrs.color`" + ` for the key color of a map; below a
null record or a missing key, null), or a struct column declared as deep as wanted (a recursive record's
levels below it are left out). A path the schema does not have, or one into an array or a recursive type, is
refused naming the column. Explicit columns read Avro values
as they read JSON ones, with the same casts (an int or long into a double column, an int too large for an
integer column is an overflow; a decimal, int or long into a decimal column, rounded half up to its scale,
a value of too many digits an overflow; a local timestamp into a timestamp column, its wall clock read as UTC,
a timestamp into a timestamp_ntz column, its UTC wall clock, as Spark casts them with the session time zone
UTC; a date into either, its midnight) and ` + "`mode`" + `; a variant column takes JSON only. A writer schema whose
field turns a column made of an earlier version from timestamp to timestamp_ntz, or back, makes its records
dead letters naming the field and both types. A body that does not decode
with the schema, or has bytes after the record, is a dead letter ("not Avro of the table's schema").

` + "`table.format: json_schema`" + ` reads JSON objects in the Confluent wire format, as Confluent's
JSONSerializer writes them, through ` + "`schema_registry`" + ` as registry Avro does (the wait for a schema, the
KV, ` + "`subject`" + `, ` + "`schema_evolution`" + ` by property, at the top and inside objects, 404s and refused credentials alike). Each record is
validated against the JSON Schema its id names (draft-07 unless the schema's ` + "`$schema`" + ` says another draft):
a record the schema refuses is a dead letter saying where and why
(` + "`the writer schema refuses the record: at '/level': got string, want integer`" + `). Formats (` + "`date-time`" + `,
` + "`date`" + `, ` + "`email`" + `, ` + "`regex`" + `, ...) are annotations, never checked, as confluent-kafka's (Python) JSONSerializer
validates, with no format checker: it writes ` + "`\"yesterday\"`" + ` in a ` + "`format: date-time`" + ` string, and the record is
read, the value cast as any is (kept in a string column; in a timestamp column, such as one derived from that
format, it cannot be cast: ` + "`mode`" + ` decides, a dead letter or null). Confluent's Java KafkaJsonSchemaSerializer
validates only with ` + "`json.fail.invalid.schema=true`" + ` (by default it does not), and then checks draft-07's
formats, so its records pass here too. A ` + "`$ref`" + `
inside the schema is followed; one to another document (a URL, a file, another subject) is never loaded, and
makes the records of that schema dead letters. Values are then read as JSON records are, with the same casts,
` + "`mode`" + ` and variant columns. Without ` + "`columns`" + `, every property of the top-level object is a column, in the
schema's order, all nullable (a later version may drop a property):

| JSON Schema | Column |
|---|---|
| string | string |
| string with format date-time, date | timestamp, date |
| integer | long |
| number | double |
| boolean | boolean |
| object with properties | struct of its properties, in the schema's order (members the schema does not name are left out) |
| object with no properties, its additionalProperties a schema | map<string, that schema's type> |
| array, its items a schema | array of the items' type |
| a type list, oneOf or anyOf of null and one type above | that type |

Struct fields, array elements and map values are nullable too. A property of several types or none, an
object with neither properties nor a schema of its additionalProperties, an array without one schema of its
items (a tuple, or none), and a recursive schema (a $ref to a schema it is in) have no derived column: the
schema is refused naming each one, and the route gives ` + "`columns`" + ` instead (paths to the scalars inside, a
struct column as deep as wanted, or a variant column for the whole value). Kafka Connect's JsonSchemaConverter makes an integer an int64 and a number a float64
too; Spark has no JSON Schema reader to follow. Validation costs a second parse of each record (see
docs/performance.md).

` + "`table.format: protobuf`" + ` reads Protobuf messages in the Confluent wire format, as Confluent's
ProtobufSerializer writes them (after the schema id, the message indexes that name the record's message in
its schema), through ` + "`schema_registry`" + ` as registry Avro does (the wait, the KV, ` + "`subject`" + `,
` + "`schema_evolution`" + ` by field, at the top and inside nested messages, 404s and refused credentials alike). Each schema is read in the
registry's serialized form (a file descriptor, asked for with ` + "`format=serialized`" + ` when the registry answers
with .proto text) with the files its references name, fetched from their subjects; imports of Protobuf's
well-known types need no reference. A record is read by the message its indexes name, by field name into the
columns. Without ` + "`columns`" + `, the fields of ` + "`message`" + ` (default: the schema's first message) are the columns, in
declaration order, all nullable:

| Protobuf | Column |
|---|---|
| bool, float, double, string | boolean, float, double, string |
| int32, sint32, sfixed32 | integer |
| int64, sint64, sfixed64, uint32, fixed32 | long |
| uint64, fixed64 | long (a value past 2^63−1 makes the record a dead letter) |
| enum | string: the value's name (its number for a number the schema does not name) |
| google.protobuf.Timestamp | timestamp (microseconds: nanoseconds are cut); a declared timestamp_ntz column takes its UTC wall clock |
| the wrappers (google.protobuf.DoubleValue, Int64Value, ...) | their value's type; null when unset |
| bytes | binary |
| repeated T | array of T's type (elements packed or not; none: an empty array) |
| map<K, V> | map<K's type, V's type> (K: string, bool or an integer type, by the rules above: map<int32, V> a map<integer, …>, map<uint64, V> a map<long, …>; an entry without key has its default, 0, "" or false; no entry: an empty map) |
| any other message | struct of its fields, by the rules above (a oneof's members each a field) |

A field without presence that the record does not set reads its default (0, "", false, the enum's first
value), as Protobuf's own readers give it; Spark's from_protobuf reads it as null unless its
` + "`emit.default.values`" + ` option is set. Messages, ` + "`optional`" + ` fields and oneof members that are unset read null.
Inside a struct, fields follow the same rules (an unset message null, an unset scalar its default), and
fields, elements and values are all nullable. A singular field that occurs several times takes its last
occurrence, as Protobuf's parsers take a scalar's (two occurrences of a message field are not merged). A
message that holds itself (recursive) has no column type: the schema is refused naming it, and the route gives ` + "`columns`" + ` with
paths to the scalars of nested messages (` + "`loc.lat`" + `; below an unset message, null) or struct columns as
deep as wanted; declared struct, array and map columns read the fields as above. A body that is not the message (` + "`not Protobuf of its writer schema`" + `) or indexes past the schema's
messages make dead letters.

With ` + "`schema_file`" + ` (a ` + "`.proto`" + `) and ` + "`message`" + `, a protobuf table reads a topic produced without a registry:
each record value is a plain body of that message (` + "`SerializeToString`" + `'s bytes: no magic byte, schema id or
message indexes). The file is compiled at start, its imports found relative to its directory and the
well-known types known, and the message's fields make the columns by the table above, as a registry schema's
do; ` + "`columns`" + ` may name paths into it instead. A body that does not parse as the message is a dead letter
(` + "`not Protobuf of the schema file's pkg.Message`" + `, with the decoder's error); a record with the registry's
header is one too, its header read as fields.
`
