// Package bridge is deltaflow's link to NATS JetStream. Start with Bridge
// (New, Close, Healthy), Config (the `nats` YAML section), and IsTransient
// and IsPermanent, which classify its errors for the engine's one retry
// policy: a permanent error escalates at once with its reason, any other is
// retried inside the actor with capped, jittered backoff.
//
// A Bridge owns one NATS connection and, when no URL is configured, an
// embedded nats-server with JetStream listening on 127.0.0.1:4222 so the nats
// CLI works. Over it, for one Delta table:
//
//   - Recovery offsets mirror: KV bucket "deltaflow_offsets", one key
//     <table>.<topic>.<partition> per partition holding OffsetRecord JSON
//     (PutOffset, Offsets, DeleteOffset; OffsetMirror writes in the
//     background and catches up after an outage). It is a hint: the Delta
//     log is the authority.
//   - Events: typed JSON (CommitEvent, FlushEvent, CheckpointEvent,
//     ActorEvent, DLQEvent, LagEvent, OptimizeEvent, VacuumEvent), each with
//     the Header {type: io.deltaflow.v1.<kind>, id, time, table}, published
//     fire-and-forget on deltaflow.<table>.events.<kind> (Publish).
//   - Dead letters: stream DELTAFLOW_DLQ_<TABLE> on
//     deltaflow.<table>.dlq.<topic>.<partition>, original bytes plus
//     Deltaflow-* headers, deduplicated by topic/partition/offset
//     (PublishDLQ returns nil only when every letter is acknowledged).
//   - Control: micro service "deltaflow" with endpoints status, flush, pause
//     and resume in group deltaflow.<table>.control (StartControl,
//     Controller).
//
// Every subject is listed once in subjects.go; table and topic names are
// escaped with Token. The generated reference is docs/events.md (go
// generate ./bridge). The package imports none of protoactor, franz-go or
// the delta package: actors call it through small interfaces of their own.
package bridge

//go:generate go run ./internal/eventsdoc ../docs/events.md
