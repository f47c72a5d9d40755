// Package sparkcheckpoint reads the checkpoint of a Spark Structured
// Streaming query that reads Kafka and writes a Delta table, the way Spark's
// own recovery reads it, so that deltaflow can take over from that query.
//
// Start with [Read], which returns a [Checkpoint], and [Checkpoint.Resolve],
// which says where the query's output ends in the topic. A checkpoint is a
// directory of:
//
//	metadata      {"id":"<query id>"}: the Delta sink's txn appId
//	offsets/N     "v1", a batch metadata line, then one line per source; for
//	              Kafka {"topic":{"partition":offset}}, the END offsets of
//	              batch N (the next offset to read), written before batch N runs
//	commits/N     "v1" and a line of metadata, written after batch N reached
//	              the sink
//
// Spark reruns batch N when offsets/N exists without commits/N; its Delta
// sink then skips the batch if the table's txn for the query id is ≥ N.
// Resolve settles that case the same way. The package is pure: it reads a
// [storage.Store] and knows nothing of Kafka clients or the Delta log.
package sparkcheckpoint
