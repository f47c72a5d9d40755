// Package cli is deltaflow's command line, on cobra: cli.go builds the
// command tree and maps errors to exit codes; one file per command (run,
// inspect, optimize and vacuum in maintain.go, cat, verify, takeover,
// seek, healthcheck, version), and devtools.go registers the developer
// tools (demo, produce, bench) in one place. Commands write results to
// stdout (with --json as JSON, timestamps RFC 3339 UTC) and diagnostics to
// stderr; a failure exits 1 with the reason on stderr, a usage error exits
// 2. A flag wins over its environment variable ($NAME in its help), which
// wins over the --config file.
package cli
