package cli

import (
	"context"
	"os"

	"github.com/deltaflow/deltaflow/runtime/daemon"
)

const runUsage = "--config FILE [--until-latest]"

func runCommand() *Command {
	return &Command{
		Name:    "run",
		Usage:   runUsage,
		Summary: "stream Kafka into the Delta table (the daemon)",
		Run:     runRun,
	}
}

func runRun(ctx context.Context, out IO, args []string) error {
	fs := newFlagSet("run", runUsage, out.Stderr)
	path := fs.String("config", "", "configuration `FILE` (YAML; see docs/configuration.md); empty: defaults and environment only")
	untilLatest := fs.Bool("until-latest", false, "stop once everything in the topic at start is committed")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	cfg, err := daemon.Load(*path, os.Getenv)
	if err != nil {
		return err
	}
	return daemon.Run(ctx, cfg, daemon.RunOptions{UntilLatest: *untilLatest, LogOutput: out.Stderr, MemoryLimit: true})
}
