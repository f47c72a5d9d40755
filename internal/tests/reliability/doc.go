// Package reliability is deltaflow's crash, outage, scale-out and
// hostile-input suite. Each scenario runs the real deltaflow binary against
// real Kafka, MinIO and NATS, injects its failure, and checks with
// scenario.Account that every record the topic holds is in the table or the
// DLQ exactly once, printing its figures (produced, rows, DLQ, duplicates,
// missing, recovery time).
//
// `make test` runs the short variants; `make reliability` runs the long
// ones (DELTAFLOW_SCENARIO_LONG=1).
package reliability
