//go:build nodevtools

package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// devToolsBuilt: this build has only hidden stand-ins for the tools.
const devToolsBuilt = false

// devTools in the daemon build (-tags nodevtools, the container image's)
// are hidden stand-ins that say where the tools are: about 2.3 MiB of the
// arm64 binary is the demo's in-process Kafka, the simulator and the
// benchmark.
func devTools(IO) []*cobra.Command {
	var cmds []*cobra.Command
	for _, name := range []string{"demo", "produce", "bench"} {
		cmds = append(cmds, &cobra.Command{
			Use: name, Hidden: true, DisableFlagParsing: true, SilenceUsage: true,
			RunE: func(*cobra.Command, []string) error {
				return fmt.Errorf("a developer tool this build leaves out (built with -tags nodevtools, as the container image is); use a release binary or `go run ./cmd/deltaflow %s`", name)
			},
		})
	}
	return cmds
}
