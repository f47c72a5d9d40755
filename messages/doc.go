// Package messages holds the messages deltaflow's actors exchange: plain,
// documented structs, always sent as pointers. It imports none of
// deltaflow's packages.
//
// # Who sends what
//
//	message         from → to                       why
//	Fetch           fetch loop → reader              the records of one poll of its partition, from
//	                (one per table reading it)       where that reader continues (Fetch.From)
//	RowBatch        reader → buffer                  mapped rows of one epoch for one partition value
//	Seal            committer → every reader         close epoch e: answer Sealed, tag later rows e+1
//	                (through the pipeline)
//	Sealed          reader → committer               the partition's last offset and dead letters in e
//	Flush           committer → every buffer         write and upload the files of epochs ≤ e
//	                (live and retiring)
//	Flushed         buffer → committer               the uploaded (still invisible) files, or the error
//	CommitNow       fetch loop, engine, reader       start an epoch early (see Backpressure)
//	                → committer (of one table)
//	Assign          engine → committer               Kafka assigned partitions: spawn readers, answer
//	                                                 where the Delta log says each continues
//	Revoke          engine → committer               Kafka takes partitions away: drop their epoch
//	PipelineFailed  pipeline → committer             a reader or buffer failed: rebuild the generation
//
// Each table has its own committer, pipeline, readers and buffers; the
// fetch loop is the process's. The engine sends Assign and Revoke to the
// committer of every table reading the topic from the Kafka consumer's
// rebalance callbacks (Engine.Assigned, Engine.Revoked). DataFile and
// DeadLetter are not messages but what Flushed and Sealed carry.
//
// # One epoch
//
// An epoch is a micro-batch, like Spark's batch id:
//
//	committer → every reader:  Seal{Epoch: e}
//	reader    → committer:     Sealed{e, partition, last offset, dead letters}
//	                           (rows routed from now on carry e+1)
//	committer → every buffer:  Flush{e}
//	buffer    → committer:     Flushed{e, data files}   (files uploaded, invisible)
//	committer:                 off its actor: DLQ acknowledged, one Delta commit
//	                           (adds + one txn per partition), the checkpoint
//	                           when due; then KV mirror, Kafka offsets, events
//
// Every message of the pipeline carries the pipeline's generation: after a
// failure the pipeline is rebuilt with a new generation and late messages
// of the old one are ignored.
//
// # Backpressure
//
// Two loops bound what is in memory. The first bounds polls in flight: a
// Fetch's rows live in one pooled block (the reader's fetchMem) shared by
// the RowBatches made from it; each buffer calls RowBatch.Release once it
// has written its rows, the last release frees the block and calls
// Fetch.Done, and the fetch loop dispatches a poll only once the one before
// the last is done (at most two in flight).
//
//	fetch loop ──Fetch──► reader ──RowBatch──► buffer
//	    ▲                   │ (rows in fetchMem)  │ rows written into the encoder
//	    │                   │                     │ RowBatch.Release
//	    └──── Fetch.Done ◄──┴──── fetchMem ◄──────┘ (last release frees it)
//
// The second bounds bytes and epochs, per table (actors.Budget): the
// reader adds each RowBatch's bytes (and, for a file the rows open,
// RowBatch.Reserved) and each dead letter's before sending it, the buffer
// adjusts them to the encoded size and gives them back once the files are
// uploaded, the committer gives a dead letter's back when its epoch ends
// and counts the epochs sealed and not yet committed. A reader whose next
// record would open a file or make a dead letter that does not fit stops
// there and tells the fetch loop; while a table's budget is exhausted, or
// after such a stop, the fetch loop hands the table nothing (and seeks its
// partitions back to where its readers stopped once it has room), and
// CommitNow asks the table's committer for an early epoch, since only an
// epoch's Flush gives encoded bytes back (once uploaded) and only its
// commit frees an epoch. CommitNow is sent from five places:
//
//  1. the fetch loop, when a table's budget runs out or one of its
//     readers stops for room;
//  2. the fetch loop again, every poll wait (5 s) while the table stays
//     without room: the rows that came after the last seal may fill it on
//     their own, and only another epoch frees them;
//  3. the engine's budget watch, when a table's buffered bytes pass its
//     flush.max_bytes;
//  4. the engine for a caller that waits on Reply, to every table: the
//     control service's flush (Engine.CommitNow), the final commit of
//     Stop, and CatchUp once everything is read;
//  5. a reader that read up to its limit while the committer isolates a
//     record every epoch fails on (one step of the search: its commit
//     proves the records read good).
//
// The committer's own timer (flush.interval) starts epochs without a
// message. A CommitNow that arrives during an epoch starts the next one as
// soon as it ends.
package messages
