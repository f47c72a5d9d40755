package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/deltaflow/deltaflow/runtime/daemon"
)

func runCommand(out IO) *cobra.Command {
	var path string
	var untilLatest bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "stream Kafka into the Delta table (the daemon)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := daemon.Load(path, os.Getenv)
			if err != nil {
				return err
			}
			return daemon.Run(cmd.Context(), cfg, daemon.RunOptions{UntilLatest: untilLatest, LogOutput: out.Stderr, MemoryLimit: true})
		},
	}
	configFlag(cmd.Flags(), &path, "configuration `FILE` (YAML; see docs/configuration.md); empty: defaults and environment only")
	cmd.Flags().BoolVar(&untilLatest, "until-latest", false, "stop once everything in the topic at start is committed")
	return cmd
}
