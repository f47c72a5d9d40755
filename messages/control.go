package messages

// CommitNow asks the committer to start an epoch now: sent by the fetch
// loop when the memory budget is exhausted, by the engine when buffered
// bytes pass flush.max_bytes, and by the engine for the control service's
// flush, shutdown and catch-up; the package doc lists the four sites. Reply, if set, receives
// nil once that epoch (and every earlier one) is committed, or the error
// that stopped it.
type CommitNow struct {
	// Reason is why: max_bytes, memory_budget, request, shutdown or
	// catch_up, the reason the epoch's flush event says.
	Reason string
	Reply  chan error
}

// Assign is sent by the engine to the committer when Kafka assigns
// partitions (the consumer's rebalance callback, Engine.Assigned). The
// committer spawns their readers and answers, on Reply, the next offset to
// read for each partition (from the Delta log; -1: none).
type Assign struct {
	Topic      string
	Partitions []int32
	Reply      chan map[int32]int64
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
