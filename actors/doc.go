// Package actors is deltaflow's engine: protoactor actors that stream Kafka
// records into a Delta table exactly once.
//
//	committer            owns the table snapshot; runs epochs; one commit each
//	└── pipeline         one per generation; rebuilt after any failure
//	    ├── reader/<p>   one per Kafka partition: map records, route rows
//	    └── buffer/<dir> one per partition value: Parquet on Flush
//
// A fetch loop (not an actor) polls Kafka and hands each partition's records
// to its reader. Start with Engine; the epoch protocol is in the messages
// package doc. Actors only dispatch: epoch bookkeeping (epochState), the memory
// budget (Budget) and routing live in plain types.
//
// Exactly once: an epoch's rows become visible in one Delta commit that also
// records, per Kafka partition, the last offset consumed (a txn action).
// After any failure the pipeline is rebuilt with a new generation, every
// uncommitted epoch is dropped and reading resumes from the offsets in the
// log. Files uploaded for dropped epochs are never referenced; VACUUM
// removes them.
package actors
