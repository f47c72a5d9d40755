// Package messages holds the messages deltaflow's actors exchange: plain,
// documented structs, always sent as pointers. It imports none of
// deltaflow's packages.
//
// One epoch (a micro-batch, like Spark's batch id) goes:
//
//	committer → every reader:  Seal{Epoch: e}
//	reader    → committer:     Sealed{e, partition, last offset, dead letters}
//	                           (rows routed from now on carry e+1)
//	committer → every buffer:  Flush{e}
//	buffer    → committer:     Flushed{e, data files}   (files uploaded, invisible)
//	committer:                 DLQ acknowledged, one Delta commit (adds + one txn
//	                           per partition), checkpoint, KV mirror, Kafka offsets,
//	                           commit event
//
// Rows travel reader → buffer as RowBatch; Kafka records travel from the
// fetch loop to a reader as Fetch. Every message of the pipeline carries the
// pipeline's generation: after a failure the pipeline is rebuilt with a new
// generation and late messages of the old one are ignored.
package messages
