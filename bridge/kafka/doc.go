// Package kafka is deltaflow's franz-go layer: plain types that the reader
// actors drive, with no actor code of their own.
//
// Learn three things first: [Config], the "kafka" section of deltaflow.yaml;
// [Consumer], which reads the topic in [Batch]es per partition; and
// [Handler], which the engine implements to say where each partition starts
// and to hear when one is taken away. [Producer] and [CreateTopic] serve the
// tools, the demo and benchmarks.
//
// Invariants:
//   - The Delta log is the only authority on where a partition starts: on
//     every assignment the consumer asks [Handler.Assigned] and ignores the
//     Kafka group's committed offsets, which [Consumer.CommitOffsets] writes
//     for lag tools only.
//   - After [Consumer.Seek], Poll returns no record fetched before the seek:
//     franz-go drops buffered fetches when offsets are set.
//   - In group mode auto-commit is off and a rebalance waits for the poll
//     loop (BlockRebalanceOnPoll): it runs only inside Poll, never between a
//     Poll and the next. On a revocation (unlike a loss, e.g. after a session
//     timeout) [Handler.Revoked] returns before the partitions can be
//     assigned to another member.
//   - The client is never closed from a rebalance callback (it would
//     deadlock); only [Consumer.Close] closes it.
package kafka
