// Package ledger is deltaflow's exactly-once model: how the Kafka offsets
// it has committed live in a Delta table, and every rule over them. The
// last offset committed of each partition is the version of a txn action
// of appId "<app>-<topic>-<partition>" (AppID), written in the same commit
// as the partition's rows, so the Delta log alone says where to resume
// (Spark's Delta sink and kafka-delta-ingest record their progress the
// same way). The topic ID (KIP-516) the offsets count in is a table
// property (TopicIDProperty).
//
// Read first: PlanStarts (where assigned partitions start: the table's
// offsets against the brokers' logs, data loss, recreated topics, other
// apps' and expired offsets), Write and Settle (committing offsets, and
// agreeing with concurrent writers), and Next, Moved and Stale (the checks
// around an epoch's commit).
//
// The package is plain functions over delta snapshots and the brokers'
// answers (TopicLogs), with no actor, NATS or Kafka client: the committer,
// the daemon, the consumer and the CLI (seek, takeover, inspect offsets)
// share it.
package ledger
