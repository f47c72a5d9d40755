package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// IO is where a command writes: results to Stdout, diagnostics to Stderr.
type IO struct {
	Stdout, Stderr io.Writer
}

// usageError marks errors in how the command was called (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitError is a command's failure with its own exit code.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// errNoCommand is returned when deltaflow runs without a command: the help
// is shown, and the exit code is 2.
var errNoCommand = errors.New("no command")

// Command groups of the root help.
const (
	groupDaemon = "daemon"
	groupTable  = "table"
	groupDev    = "dev"
	groupOther  = "other"
)

// newRoot builds the command tree. *parsed turns true once the command line
// parsed: errors after that are the command's own (exit 1, or 2 for a
// usageError); errors before it are usage errors.
func newRoot(out IO) (root *cobra.Command, parsed *bool) {
	parsed = new(bool)
	var showVersion bool
	root = &cobra.Command{
		Use:   "deltaflow",
		Short: "stream Kafka into a Delta Lake table, exactly once, and maintain it",
		Long: "deltaflow streams Kafka into a Delta Lake table, exactly once, and maintains it.\n\n" +
			"Flags take precedence over environment variables ($NAME in a flag's help),\n" +
			"which take precedence over the --config file.",
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := refuseCredentials(cmd.Flags()); err != nil {
				return err
			}
			if err := applyEnv(cmd.Flags()); err != nil {
				return err
			}
			// Cobra checks these after this hook; here their errors are
			// still usage errors.
			if err := cmd.ValidateRequiredFlags(); err != nil {
				return usageError{err.Error()}
			}
			if err := cmd.ValidateFlagGroups(); err != nil {
				return usageError{err.Error()}
			}
			*parsed = true
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if showVersion {
				return printVersion(out.Stdout, false)
			}
			return needCommand(cmd, args)
		},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.Flags().BoolVar(&showVersion, "version", false, "print the version and exit (as the version command)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		// The flag package took -table for --table; pflag reads it as -t -a ...
		if m := singleDash.FindStringSubmatch(err.Error()); m != nil {
			return fmt.Errorf("%w (long flags take two dashes: -%s)", err, m[1])
		}
		return explainRemovedSecretFlag(err)
	})
	root.SetOut(out.Stdout)
	root.SetErr(out.Stderr)
	root.AddGroup(&cobra.Group{ID: groupDaemon, Title: "Daemon:"}, &cobra.Group{ID: groupTable, Title: "Table commands:"})
	dev := devTools(out)
	if devToolsBuilt {
		root.AddGroup(&cobra.Group{ID: groupDev, Title: "Developer tools:"})
	}
	root.AddGroup(&cobra.Group{ID: groupOther, Title: "Other commands:"})
	root.SetHelpCommand(helpCommand(root))
	root.SetHelpCommandGroupID(groupOther)
	root.SetCompletionCommandGroupID(groupOther)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add(groupDaemon, runCommand(out), healthcheckCommand(), configCommand(out))
	add(groupTable, inspectCommand(out), schemaCommand(out), catCommand(out), verifyCommand(out), optimizeCommand(out),
		vacuumCommand(out), restoreCommand(out), seekCommand(out), takeoverCommand(out), dlqCommand(out))
	if devToolsBuilt {
		add(groupDev, dev...)
	} else {
		root.AddCommand(dev...)
	}
	add(groupOther, versionCommand(out))
	return root, parsed
}

// Main runs the command args name and returns the exit code: 0, 1 when the
// command failed, 2 for a usage error. SIGINT and SIGTERM cancel ctx.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, parsed := newRoot(IO{Stdout: stdout, Stderr: stderr})
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if errors.Is(err, errNoCommand) {
		return 2
	}
	// Library errors often start with the operation ("vacuum: ..."): the
	// prefix already names it.
	msg := strings.TrimPrefix(err.Error(), cmd.Name()+": ")
	var ue usageError
	if !*parsed || errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", cmd.CommandPath(), msg, cmd.CommandPath())
		return 2
	}
	fmt.Fprintf(stderr, "%s: %s\n", cmd.CommandPath(), msg)
	if ee, ok := errors.AsType[exitError](err); ok {
		return ee.code
	}
	return 1
}

// singleDash matches pflag's error for a long flag given with one dash.
var singleDash = regexp.MustCompile(`^unknown shorthand flag: '.' in (-[a-z][a-z0-9-]+)`)

// envAnnotation names the environment variable a flag falls back to.
const envAnnotation = "deltaflow_env"

// bindEnv makes flag name fall back to the environment variable env when it
// is not given, and says so in its help.
func bindEnv(fs *pflag.FlagSet, name, env string) {
	f := fs.Lookup(name)
	f.Usage += " [$" + env + "]"
	_ = fs.SetAnnotation(name, envAnnotation, []string{env})
}

// applyEnv sets the flags not given on the command line from their
// environment variables (flag > environment > --config).
func applyEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		env := f.Annotations[envAnnotation]
		if err != nil || f.Changed || len(env) == 0 {
			return
		}
		if v := os.Getenv(env[0]); v != "" {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = usagef("$%s: %v", env[0], serr)
			}
		}
	})
	return err
}

// needCommand is the Run of a command that only groups others: called
// without one, it shows the help (exit 2).
func needCommand(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	if err := cmd.Help(); err != nil {
		return err
	}
	return errNoCommand
}

// noArgs rejects positional arguments.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}

// jsonFlag adds --json, which every command that prints results has.
func jsonFlag(fs *pflag.FlagSet, p *bool) {
	fs.BoolVar(p, "json", false, "print the result as JSON (timestamps RFC 3339, UTC)")
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// helpCommand is cobra's `help [command]`, except that an unknown topic is
// a usage error (cobra's own prints a line and exits 0).
func helpCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "help shows the usage and flags of any command: deltaflow help [command ...].",
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, _, err := root.Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []cobra.Completion
			for _, c := range cmd.Commands() {
				if c.IsAvailableCommand() {
					names = append(names, c.Name())
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(_ *cobra.Command, args []string) error {
			cmd, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				return usagef("unknown help topic %q", strings.Join(args, " "))
			}
			return cmd.Help()
		},
	}
}
