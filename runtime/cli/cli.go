package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

// Command is one subcommand.
type Command struct {
	Name    string
	Usage   string // argument synopsis, e.g. "snapshot|files|history --table URI"
	Summary string
	// Run executes the command with its arguments (after the name).
	Run func(ctx context.Context, io IO, args []string) error
}

// IO is where a command writes.
type IO struct {
	Stdout, Stderr io.Writer
}

// usageError marks errors in how the command was called (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// commands lists every subcommand, in help order.
func commands() []*Command {
	return []*Command{runCommand(), demoCommand(), produceCommand(), inspectCommand(), optimizeCommand(),
		vacuumCommand(), catCommand(), verifyCommand(), takeoverCommand(), seekCommand(), benchCommand(),
		healthcheckCommand(), versionCommand()}
}

// Main runs the subcommand named by args[0] and returns the exit code.
// SIGINT and SIGTERM cancel ctx.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmds := commands()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printHelp(stdout, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	i := slices.IndexFunc(cmds, func(c *Command) bool { return c.Name == args[0] })
	if i < 0 {
		fmt.Fprintf(stderr, "deltaflow: unknown command %q\n\n", args[0])
		printHelp(stderr, cmds)
		return 2
	}
	cmd := cmds[i]
	err := cmd.Run(ctx, IO{Stdout: stdout, Stderr: stderr}, args[1:])
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "deltaflow %s: %v\nusage: deltaflow %s %s\n", cmd.Name, err, cmd.Name, cmd.Usage)
		return 2
	default:
		fmt.Fprintf(stderr, "deltaflow %s: %v\n", cmd.Name, err)
		return 1
	}
}

func printHelp(w io.Writer, cmds []*Command) {
	fmt.Fprintln(w, "deltaflow streams Kafka into a Delta Lake table, exactly once, and maintains it.")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-10s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintln(w, "\nRun `deltaflow COMMAND -h` for a command's flags.")
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(cmd, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: deltaflow %s %s\n", cmd, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, allowing flags after positional arguments
// (`inspect files --table t`), and returns the positional ones.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if strings.HasPrefix(args[0], "-") && args[0] != "-" {
			continue
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
