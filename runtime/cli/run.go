package cli

import (
	"errors"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/deltaflow/deltaflow/runtime/daemon"
)

// exitStopTimeout is run's exit code when it stopped without its final
// commit (daemon.ErrStopTimeout): nothing failed and nothing is lost, but
// what was read is read again at the next start.
const exitStopTimeout = 3

func runCommand(out IO) *cobra.Command {
	var path string
	var untilLatest, asJSON bool
	var connectTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "run",
		Short: "stream Kafka into the Delta table (the daemon)",
		Long: "run streams the configured Kafka topic into the Delta table until stopped (SIGINT, SIGTERM),\n" +
			"or with --until-latest until everything in the topic at start is committed, then prints a\n" +
			"summary line on stdout (rows, commits, dead letters, seconds; --json: also per table), as a\n" +
			"cron job wants. The logs go to stderr.\n\n" +
			"A start fails fast: Kafka, the table's store and NATS each have --connect-timeout to answer,\n" +
			"or run exits 1 with one line naming the one that did not. `deltaflow config check --probe`\n" +
			"asks the same questions without starting.\n\n" +
			"A stop (SIGINT, SIGTERM) commits what was read within the stop timeout (" + daemon.StopTimeout.String() + ") and exits 0;\n" +
			"a commit that does not land by then (a slow store, a full DLQ) is given up and run exits 3:\n" +
			"nothing is lost, its records are read again at the next start.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := daemon.Load(path, os.Getenv)
			if err != nil {
				return err
			}
			err = daemon.Run(cmd.Context(), cfg, daemon.RunOptions{UntilLatest: untilLatest, LogOutput: out.Stderr, MemoryLimit: true,
				ConnectTimeout: connectTimeout, Summary: out.Stdout, SummaryJSON: asJSON})
			if errors.Is(err, daemon.ErrStopTimeout) {
				return exitError{code: exitStopTimeout, err: err}
			}
			return err
		},
	}
	configFlag(cmd.Flags(), &path, "configuration `FILE` (YAML; see docs/configuration.md); empty: defaults and environment only")
	cmd.Flags().BoolVar(&untilLatest, "until-latest", false, "stop once everything in the topic at start is committed")
	cmd.Flags().BoolVar(&asJSON, "json", false, "with --until-latest: print the summary as JSON")
	atLeast(cmd.Flags(), &connectTimeout, "connect-timeout", daemon.DefaultConnectTimeout, time.Millisecond,
		"give up the start when Kafka, the store or NATS does not answer within this long")
	bindEnv(cmd.Flags(), "connect-timeout", "DELTAFLOW_CONNECT_TIMEOUT")
	return cmd
}
