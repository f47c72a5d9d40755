// Package cli is deltaflow's command line: one file per subcommand (run,
// demo, produce, inspect, optimize, vacuum, cat, verify, takeover, seek,
// bench), each returning a *Command that Main dispatches to. Commands write
// results to stdout and diagnostics to stderr; a failure exits 1 with the
// reason on stderr, a usage error exits 2.
package cli
