//go:build !nodevtools

package cli

import "github.com/spf13/cobra"

// devToolsBuilt: this build has the developer tools; help lists them.
const devToolsBuilt = true

// devTools are the developer tools: the demo, the simulator and the
// benchmark. They are registered here only, so the daemon build for the
// image (-tags nodevtools, devtools_none.go) leaves them and what only they
// link (kfake, the simulator, the benchmark and its charts) out.
func devTools(out IO) []*cobra.Command {
	return []*cobra.Command{demoCommand(out), produceCommand(out), benchCommand(out)}
}
