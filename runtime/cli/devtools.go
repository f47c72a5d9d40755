package cli

import "github.com/spf13/cobra"

// devTools are the developer tools: the demo, the simulator and the
// benchmark. They are registered here only, so they can move behind a
// build tag or into another binary without touching the other commands.
func devTools(out IO) []*cobra.Command {
	return []*cobra.Command{demoCommand(out), produceCommand(out), benchCommand(out)}
}
