// Package daemon is deltaflow's composition root: it loads the
// configuration ([Load] → [Config]), wires storage, the Delta table, the
// NATS bridge, the Kafka consumer and the actor engine together, and runs
// them until the context ends ([Run]), serving /healthz, /readyz and
// /metrics on the way.
//
// Start with [Config] (the YAML file; docs/configuration.md is generated from
// it) and [Run]. Nothing here is global: the logger and the Prometheus
// registry are created per Run and passed down.
//
// Shutdown rule: when ctx ends, Run stops fetching, commits what was read
// (bounded by [StopTimeout]) and closes everything, so a SIGTERM exits
// within 10 s: 0, or 3 with [ErrStopTimeout] when the final commit did not
// land in time; anything not committed is re-read on the next start.
package daemon

//go:generate go run ./internal/configdoc ../../docs/configuration.md
