// Package delta implements the Delta Lake transaction log protocol: actions,
// schemas, partition paths, Parquet data files with statistics, snapshots
// (log replay from checkpoints and JSON commits), commits with optimistic
// concurrency, checkpoints, OPTIMIZE, VACUUM and log cleanup.
//
// Start with Table (a log on a storage.Store), Snapshot (the table state at one
// version) and Action (one line of a commit file).
//
// The package is pure: it knows nothing of actors, Kafka or NATS, and reaches
// storage only through storage.Store. The rules it follows, with their sources,
// are in docs/delta-notes.md; every table it writes must read identically in Spark,
// delta-rs and DuckDB.
//
// File paths in the log are URIs, relative to the table root or absolute;
// replay, checkpoints, commit conflicts, VACUUM and reads compare them in one
// canonical form (pathID, see path.go), never as the strings written, which
// stay byte for byte as they were.
//
// A commit that changes metaData carries the protocol the new metadata needs
// (see Table.Commit), and a checkpoint holds the log's state as stored, never
// a snapshot's memory (see Table.Checkpoint).
package delta
