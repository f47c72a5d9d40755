// Package delta implements the Delta Lake transaction log protocol: actions,
// schemas, partition paths, Parquet data files with statistics, snapshots
// (log replay from checkpoints and JSON commits), commits with optimistic
// concurrency, checkpoints, OPTIMIZE, VACUUM and log cleanup.
//
// Start with Table (a log on a storage.Store), Snapshot (the table state at one
// version) and Action (one line of a commit file).
//
// Below the log, each with no knowledge of it: package schema holds the
// table schema and row values; internal/parquetfile the data file codec
// (Parquet writer with Delta statistics, reader of any engine's files);
// internal/pqnode the ordered Parquet groups data files and checkpoints
// share; internal/roaring and internal/pqguard the deletion vector bitmaps
// and the checks of a Parquet footer's claims; internal/jsonenc JSON as
// Spark writes it. delta names their types in its own API (StructType,
// Row, FileWriter, WriterOptions, ...) so that callers need only delta.
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
// a snapshot's memory (see Table.Checkpoint). Each action type's checkpoint
// columns are declared once (checkpoint_columns.go): the declarations make
// the schema checkpoints are written with, their row encoder, and the
// binding and decoding of any writer's checkpoint, so a new action field is
// one line there.
//
// Tables other engines made may use table features. Snapshot.Check gates
// each operation (read, append, OPTIMIZE, VACUUM) by the features that are
// active, not merely supported (features.go), and refuses with an
// *UnsupportedError naming the features, why, and the operation. Reads
// apply deletion vectors (dv.go, internal/roaring), resolve column mapping
// (columnmapping.go), convert widened types and read stats as the current
// schema says (columnmapping.go), read V2 checkpoints with sidecars and
// write them where the table asks (checkpoint_v2.go), and take version
// times from in-commit timestamps (ict.go). Commits assign row IDs under
// row tracking and OPTIMIZE keeps stable ones (rowtracking.go); data files
// carry partition values where the table materializes them
// (Snapshot.ApplyWriterOptions).
package delta
