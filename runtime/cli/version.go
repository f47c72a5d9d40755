package cli

import (
	"fmt"
	"io"
	goruntime "runtime"

	"github.com/spf13/cobra"

	"github.com/deltaflow/deltaflow/runtime/daemon"
)

// versionJSON is `deltaflow version --json`: deltaflow_build_info's labels
// and the platform.
type versionJSON struct {
	daemon.Build
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// versionCommand prints the build the binary reports as
// deltaflow_build_info (`deltaflow --version` prints the same).
func versionCommand(out IO) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "print deltaflow's version, VCS revision and Go toolchain",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			if w := daemon.ToolchainWarning(goruntime.Version()); w != "" {
				fmt.Fprintln(out.Stderr, "warning:", w)
			}
			return printVersion(out.Stdout, asJSON)
		},
	}
	jsonFlag(cmd.Flags(), &asJSON)
	return cmd
}

func printVersion(w io.Writer, asJSON bool) error {
	v := versionJSON{Build: daemon.BuildInfo(), OS: goruntime.GOOS, Arch: goruntime.GOARCH}
	if asJSON {
		return writeJSON(w, v)
	}
	rev := v.Revision
	if rev == "" {
		rev = "unknown"
	}
	_, err := fmt.Fprintf(w, "deltaflow %s (revision %s, %s, %s/%s)\n", v.Version, rev, v.GoVersion, v.OS, v.Arch)
	return err
}
