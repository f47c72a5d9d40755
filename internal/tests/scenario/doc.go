// Package scenario is the toolkit of the reliability suite: it runs the
// deltaflow binary as a real process against real servers (Kafka, MinIO,
// NATS), kills and restarts it, and accounts for every Kafka record.
//
// The accounting rule is the one deltaflow promises: every (partition,
// offset) the topic holds is in the table (the scenario config adds the
// kafka_partition and kafka_offset columns) or in the DLQ stream, exactly
// once. [Account] computes that from the table's live files and the DLQ and
// returns a [Report] with produced, rows, DLQ, duplicates, missing and
// unexpected counts, which every scenario prints and asserts.
package scenario
