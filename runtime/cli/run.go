package cli

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/deltaflow/deltaflow/runtime/daemon"
)

func runCommand(out IO) *cobra.Command {
	var path string
	var untilLatest bool
	var connectTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "run",
		Short: "stream Kafka into the Delta table (the daemon)",
		Long: "run streams the configured Kafka topic into the Delta table until stopped (SIGINT, SIGTERM),\n" +
			"or with --until-latest until everything in the topic at start is committed, then prints a\n" +
			"summary line (rows, commits, dead letters, seconds), as a cron job wants.\n\n" +
			"A start fails fast: Kafka, the table's store and NATS each have --connect-timeout to answer,\n" +
			"or run exits 1 with one line naming the one that did not. `deltaflow config check --probe`\n" +
			"asks the same questions without starting.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := daemon.Load(path, os.Getenv)
			if err != nil {
				return err
			}
			return daemon.Run(cmd.Context(), cfg, daemon.RunOptions{UntilLatest: untilLatest, LogOutput: out.Stderr, MemoryLimit: true,
				ConnectTimeout: connectTimeout})
		},
	}
	configFlag(cmd.Flags(), &path, "configuration `FILE` (YAML; see docs/configuration.md); empty: defaults and environment only")
	cmd.Flags().BoolVar(&untilLatest, "until-latest", false, "stop once everything in the topic at start is committed")
	atLeast(cmd.Flags(), &connectTimeout, "connect-timeout", daemon.DefaultConnectTimeout, time.Millisecond,
		"give up the start when Kafka, the store or NATS does not answer within this long")
	bindEnv(cmd.Flags(), "connect-timeout", "DELTAFLOW_CONNECT_TIMEOUT")
	return cmd
}
