package messages

// CommitNow asks the committer to start an epoch now: sent by the fetch
// loop when the memory budget is exhausted, by the engine when buffered
// bytes pass flush.max_bytes, and by the engine for the control service's
// flush, shutdown and catch-up; the package doc lists the four sites. Reply, if set, receives
// nil once that epoch (and every earlier one) is committed, or the error
// that stopped it.
type CommitNow struct {
	Reason Reason // why; the epoch's flush event says it
	Reply  chan error
}

// Reason is why an epoch was sealed: CommitNow's, the epoch's and its flush
// event's (bridge.FlushEvent), one snake_case set.
type Reason string

const (
	ReasonTimer        Reason = "timer"         // the flush interval
	ReasonMaxBytes     Reason = "max_bytes"     // buffers past flush.max_bytes
	ReasonMemoryBudget Reason = "memory_budget" // the memory budget full, Kafka paused
	ReasonRequest      Reason = "request"       // Engine.CommitNow: the control service's flush
	ReasonShutdown     Reason = "shutdown"      // Engine.Stop's final commit
	ReasonCatchUp      Reason = "catch_up"      // Engine.CatchUp: everything up to the targets read
	ReasonIsolate      Reason = "isolate"       // a reader read up to its limit while a failing record is isolated
)

// Assign is sent by the engine to the committer when Kafka assigns
// partitions (the consumer's rebalance callback, Engine.Assigned). The
// committer checks the Delta log's offsets against the partitions' logs,
// writes the start of partitions the log has none for, spawns their
// readers and answers on Reply.
type Assign struct {
	Topic      string
	Partitions []int32
	Reply      chan Assigned
}

// Assigned answers Assign: Next is the next offset to read for each
// partition, or -2 (ledger.Held) for one refused because the log no longer
// holds its offset; Gen is the committer's generation whose readers take
// them; Err, when set, fails the assignment.
type Assigned struct {
	Next map[int32]int64
	Gen  uint64
	Err  error
}

// Revoke is sent by the engine to the committer before Kafka takes
// partitions away (Engine.Revoked). Their uncommitted rows are dropped: the
// in-flight epoch is aborted, the pipeline stopped (asynchronously) and
// rebuilt for the partitions still assigned, which are re-read from their
// committed offsets. Reply is closed once the epoch is aborted and the
// revoked partitions forgotten, so nothing of theirs is committed after.
type Revoke struct {
	Topic      string
	Partitions []int32
	Reply      chan struct{}
}

// PipelineFailed is sent by the pipeline to the committer when a reader or
// buffer failed: every in-flight epoch is aborted and the pipeline rebuilt.
type PipelineFailed struct {
	Gen    uint64
	Actor  string
	Reason string
}
