// Package failpoint lets the crash scenarios SIGKILL deltaflow at exact
// moments (mid upload, between upload and commit, mid checkpoint, mid KV
// mirror update) that random kills rarely hit.
//
// In a release build [Hit] and [Reader] compile to nothing. In a binary built
// with `-tags failpoints`, the environment variable DELTAFLOW_FAILPOINTS
// selects points as a comma-separated list of name=n ("upload=3,commit=1"):
// the n-th time the process hits that point it writes
// "failpoint <name> hit <n>: SIGKILL" to stderr and sends itself SIGKILL, so
// nothing after the point runs — no deferred call, no flush, exactly like a
// power cut there. "name=n:hang" instead blocks the goroutine that hits the
// point forever, deaf to its context, like a connection that never answers
// (the stall watchdog's scenario).
package failpoint

// Env is the environment variable that selects the failpoints.
const Env = "DELTAFLOW_FAILPOINTS"

// The failpoints deltaflow has, by where the process dies.
const (
	// Upload: half of a Parquet data file's bytes have gone to the store's
	// PUT, which has not completed.
	Upload = "upload"
	// Commit: the epoch's files are uploaded (and its dead letters
	// acknowledged), its Delta commit is not written yet.
	Commit = "commit"
	// Checkpoint: the checkpoint Parquet file is written, _last_checkpoint
	// does not point at it yet.
	Checkpoint = "checkpoint"
	// Mirror: one partition's KV offset is written, the others of the same
	// commit are not.
	Mirror = "mirror"
)
