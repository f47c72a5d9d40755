package cli

import (
	"context"
	"fmt"
	goruntime "runtime"

	"github.com/deltaflow/deltaflow/runtime/daemon"
)

// versionCommand prints the version stamped into the binary (see
// daemon.Version), the one deltaflow_build_info reports.
func versionCommand() *Command {
	return &Command{
		Name:    "version",
		Summary: "print deltaflow's version and Go toolchain",
		Run: func(_ context.Context, out IO, args []string) error {
			fs := newFlagSet("version", "", out.Stderr)
			if pos, err := parseFlags(fs, args); err != nil {
				return err
			} else if len(pos) > 0 {
				return usagef("unexpected argument %q", pos[0])
			}
			fmt.Fprintf(out.Stdout, "deltaflow %s %s %s/%s\n", daemon.Version(), goruntime.Version(), goruntime.GOOS, goruntime.GOARCH)
			return nil
		},
	}
}
