// Package mapping turns Kafka records into typed table rows, driven by the
// table section of the configuration: it is the decode hot path of a
// PartitionReader. It knows nothing of actors or Kafka clients; it sees a
// plain Record.
//
// # What a Mapper does
//
// New compiles a Config (columns in declared order, each with a type and a
// source) and the table's partition columns once. Map then parses a
// record's JSON value with fastjson, finds every column's value, casts it,
// and fills a reusable Row with:
//
//   - Values: the data columns (DataSchema: Schema minus the partition
//     columns) as a parquet.Row ready for WriteRows, in declared order, with
//     column index and definition level set. DATE is int32 days since the
//     epoch, TIMESTAMP int64 µs UTC. Zero values (0, 0.0, false, "") are
//     present values, never null: only a missing or JSON-null value is null.
//   - PartitionValues: the partition columns as Delta partitionValues
//     strings ("smart_plug", "2026-06-22"); nil is null ("" is null too, as
//     in Delta).
//   - Key: the routing key, exactly delta.PartitionDir of those values
//     ("device_type=smart_plug/event_date=2026-06-22"): one Hive-escaped
//     segment per column, so values like "../../etc" or "a/b" cannot leave
//     their directory.
//   - Size: an estimate of the row's memory, for buffer budgets.
//
// A Mapper is not safe for concurrent use; Clone one per goroutine.
//
// # Sources
//
//   - a dot-separated JSON path: "device_id", "payload.power". When a value
//     on the way is a JSON string holding JSON (the sensor payload), it is
//     decoded transparently, once per record, and the path continues inside
//     it; the path to the string itself ("payload") yields the string. A
//     missing or null intermediate makes everything below it null.
//   - now(): processing time, one value per record for all such columns.
//   - date(<column>): the UTC date of an earlier timestamp column.
//   - kafka.partition (integer or long), kafka.offset (long),
//     kafka.timestamp (timestamp or date; a zero time is null), kafka.key
//     and kafka.topic (string). Paths starting with "kafka." are reserved.
//   - kafka.key.<path>: a field of the record key, decoded as
//     Config.KeyFormat says (JSON, or a registry format through the same
//     Registry as the values): a second, smaller plan of the key's paths,
//     read by the key format's values. A key that cannot be decoded is a
//     dead letter whose reason starts with "key: "; no key reads null.
//   - with CDC, cdc.<path>: a path into the change event's envelope
//     (cdc.op, cdc.source.lsn); and BinlogPositionSource,
//     cdc.source.binlog_position (long): a MySQL or MariaDB event's
//     source.file index, pos and row packed into one long that orders as
//     they do (binlog.go), a dead letter when one does not fit.
//
// # Strict and permissive
//
// A record goes to the DLQ with a *MapError whose Reason is short and stable
// ("not JSON", "missing required field device_id", "power: cannot cast
// \"abc\" to double") when it is a tombstone, empty, larger than
// max_record_bytes, not JSON, nested deeper than fastjson.MaxDepth (300;
// fastjson checks while parsing, so the stack is bounded), not a JSON
// object, or lacks a required value (required: true, or nullable: false).
// With PathLimits (Mapper.WithPathLimits; the engine sets the store's), a
// partition value whose escaped directory passes them rejects the record
// too, naming the column and the length: its data file could not be
// stored.
// Invalid UTF-8 in a string column also always rejects the record: it is
// corrupt input, and Delta strings are UTF-8. NUL bytes are ordinary
// characters.
//
// A value that cannot be cast to its column's type rejects the record in
// strict mode (the default). In permissive mode it becomes null, as with
// Spark's from_json, unless the column is required; a payload string that is
// not JSON makes its fields null likewise.
//
// Casting rules: strings only from JSON strings; booleans only from true and
// false; integer and long from JSON numbers with an integral value (248,
// 248.0 and 2.48e2 are 248; 248.5 is a cast error, where Spark's from_json
// gives null; out of range is "integer overflow"; NaN and ±inf are "not a
// finite number"); a numeric string such as "97" is a cast error. Double and
// float take any finite JSON number. A decimal(p,s) takes a JSON number or
// a string of one, read from its text (Java BigDecimal's syntax; commas in
// a string are dropped, as Spark's from_json drops them), never through a
// float, rounded half up to s fraction digits as from_json rounds (12.345
// is 12.35 in decimal(10,2)); more than p digits once rounded is an
// overflow ("amount: decimal(10,2) overflow"), other text a cast error.
// Its value is the unscaled 128-bit integer: INT32, INT64 or a
// FIXED_LEN_BYTE_ARRAY in the arena. Avro decimals (bytes, fixed) and
// integers are read into it exactly, rescaled the same way. Timestamps are
// RFC 3339 strings
// (fractions of 0–9 digits, truncated to µs; 'T' or space separator; a
// value without zone is UTC; a bare date is midnight UTC) within years
// 0001–9999; a hand-rolled parser handles the common form and time.Parse
// the rest. A date column takes the UTC date of such a string. A
// timestamp_ntz column takes a local date-time as Spark 3.5's from_json
// reads one (parseTimestampNTZ: 1 to 7 fields, a fraction of any length
// truncated to µs, whitespace around ignored), its wall clock held as µs
// as if UTC; a zone or offset, other text, a number or a year outside
// 0001–9999 is a cast error (from_json: null, but a value for such years).
// Avro local timestamps are read into it unshifted; an Avro or Protobuf
// timestamp becomes its UTC wall clock.
//
// Duplicate keys in an object: the first occurrence wins, compared after
// unescaping ("device\u005fid" and "device_id" are the same key).
//
// Struct, array and map columns (types in Spark's DDL, nested.go) hold
// the subtree their source addresses, walked along the compiled type by
// the record's format (a JSON object or array, JSON text in a string; an
// Avro record, array, map or union, re-read from the bytes the record's
// walk kept for it; a Protobuf message, repeated field or map, read from
// its message's bytes). Their scalars take the casting rules above, and a
// failure anywhere names the path inside the column ("loc: field lat:
// cannot cast \"x\" to double"). A struct's fields are found by name,
// the first of duplicates; a map keeps its entries as the record has them,
// a repeated key an entry each. The row carries the column as one value,
// the encoding of its leaves' values with their Dremel levels
// (delta.AppendNested), built in a reused buffer and copied into the
// arena.
//
// # Allocation and the arena
//
// Map does not allocate in steady state (BenchmarkMapSensor reports 0
// allocs/op): parsers and scratch buffers are reused, and string bytes are
// copied into Row.Arena, a list of 64 KiB slabs. Nothing in a Row aliases
// the Record or the parser once Map returns, so the Kafka fetch buffer can
// be reused at once. The Row's slices are overwritten by the next Map into
// the same Row; the arena's bytes stay valid until its owner calls Reset,
// which must wait until no row refers to them: for example a buffer resets
// its arena after flushing its rows, and a reader that hands each row's
// values on with Row.AppendValues (which copies them into the receiver's
// arena) can reset its own after every record. Errors allocate; they are
// off the hot path.
package mapping
