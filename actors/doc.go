// Package actors is deltaflow's engine: protoactor actors that stream Kafka
// records into a Delta table exactly once.
//
//	committer                   owns the table snapshot; runs epochs; one commit each
//	└── pipeline-<gen>          one per generation; rebuilt after any failure
//	    ├── reader-<topic>-<p>  one per Kafka partition: map records, route rows
//	    └── buffer-<n>          one per partition value (device_type=…/event_date=…):
//	                            Parquet on Flush
//	maintenance                 OPTIMIZE, VACUUM, log cleanup (when enabled)
//
// Those are the actors' names: a buffer's PID id (messages.Flushed.Buffer)
// is e.g. "committer/pipeline-3/buffer-7"; the partition directory it
// writes is its key in the registry.
//
// A fetch loop (not an actor) polls Kafka and hands each partition's records
// to its reader. Start with Engine: NewEngine takes the configuration
// (DefaultConfig holds every default) and the outside connections (Deps);
// Start takes the Kafka consumer, built with the engine as its handler. The
// top-level actors are spawned at PIDs reserved by name, so every actor's
// configuration is complete when built. Actors only dispatch: epoch
// bookkeeping (epochState), the epoch schedule (schedule), the pipeline's
// generations (lifecycle), the memory budget (Budget) and routing live in
// plain types, and the committer's slow table work (an epoch's DLQ publish,
// commit and checkpoint; a partition's start plan) runs off the actor, its
// result applied as a message (committer.offActor). The messages package
// doc says which actor sends which message to whom, and the epoch protocol.
//
// Exactly once: an epoch's rows become visible in one Delta commit that also
// records, per Kafka partition, the last offset consumed (a txn action).
// After any failure the pipeline is rebuilt with a new generation, every
// uncommitted epoch is dropped and reading resumes from the offsets in the
// log. Files uploaded for dropped epochs are never referenced; VACUUM
// removes them. The committer and maintenance actors are restarted by their
// guardian, the pipeline by the committer, all on one capped backoff
// (failureStreak).
//
// # Backpressure
//
//	fetcher.run ──Fetch──► reader.handleFetch ──RowBatch──► buffer.handleRows
//	     ▲                    │ rows in one pooled fetchMem      │ rows encoded
//	     │                    │ Budget.Add(bytes)                │ Budget.Adjust(encoded)
//	     │                    ▼                                  │ RowBatch.Release
//	     └──── Fetch.Done ◄── fetchMem.free ◄── fetchMem.release ◄┘ (last of the Fetch)
//
// The fetch loop waits for the Done of the poll before the last, so at most
// two polls are in flight. Independently, Budget counts what the pipeline
// holds until an epoch commits — rows and encoded files until uploaded
// (buffer.handleFlush releases them), each open file's writer and each
// buffer, dead letters (released by committer.finishEpoch) — and the epochs
// not yet committed; while it is exhausted the fetch loop pauses Kafka. A
// reader takes a record that opens a file or makes a dead letter only if
// it fits (reader.hold); otherwise it stops there and waits for room
// (reader.waitRoom). Six places send the committer messages.CommitNow for
// an early epoch: the fetch loop when the budget pauses it (fetcher.run),
// the fetch loop again when the budget stays exhausted a whole poll wait, a
// reader waiting for room, the budget watch when buffered bytes pass
// FlushMaxBytes (Engine.watchBudget), Engine.commitNow: the control
// service's flush (Engine.CommitNow), Stop's final commit and CatchUp, and
// a reader at its readLimit while a failing record is isolated. Each names
// its reason (memory_budget, max_bytes, request, shutdown, catch_up,
// isolate; the timer's epochs say timer), which the epoch keeps and its
// flush event reports.
package actors
