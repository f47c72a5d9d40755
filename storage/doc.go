// Package storage is deltaflow's object store: the one place Delta tables are
// read from and written to.
//
// Learn three things first: the [Store] interface, whose contract every
// implementation honours (the conformance suite in storagetest checks it);
// [Local], a directory on a local filesystem; and [S3], a bucket prefix on
// MinIO or any S3-compatible service. [Open] picks one from a URI. [NewMem]
// and [Faulty] exist for tests elsewhere: an in-memory twin and a wrapper that
// injects errors.
//
// Invariants:
//   - Keys are relative to the store root, '/'-separated, and never start with
//     '/', end with '/', or contain empty, "." or ".." segments; every
//     implementation rejects such keys with [ErrInvalidKey], so a key can never
//     leave its root.
//   - PutIfAbsent is atomic: of concurrent callers on one key exactly one
//     succeeds, the others get [ErrExist]. The Delta log relies on it to commit
//     versions (on a filesystem by link(2), never rename(2); on S3 by
//     If-None-Match: *). Some S3-compatible servers ignore If-None-Match;
//     [ProbePutIfAbsent] finds them out before anything is written.
//   - Put and PutStream replace atomically: a reader sees the old object or the
//     new one, never a partial one.
//   - List returns keys in ascending byte order; directories are not objects.
//   - Deleting a missing key is not an error (VACUUM may run twice).
//   - Missing objects are reported as errors matching [ErrNotExist] with
//     errors.Is, whatever the backend.
package storage
