package cli

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// bracketedVars matches "[$NAME]" and "[$A, $B]" in a flag's help.
var bracketedVars = regexp.MustCompile(`\[\$[A-Z_]+(, \$[A-Z_]+)*\]`)

var update = flag.Bool("update", false, "rewrite testdata/help/*.golden from the current --help output")

// helpPaths lists the command line of every command that --help documents:
// the root and each command that is not hidden, depth first.
func helpPaths() [][]string {
	root, _ := newRoot(IO{Stdout: io.Discard, Stderr: io.Discard})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			if !sub.Hidden {
				walk(sub, append(slices.Clone(path), sub.Name()))
			}
		}
	}
	walk(root, nil)
	return paths
}

// TestHelpGolden compares the --help of every command with
// testdata/help/*.golden (go test -run TestHelpGolden -update rewrites them).
func TestHelpGolden(t *testing.T) {
	dir := filepath.Join("testdata", "help")
	want := map[string]bool{}
	for _, path := range helpPaths() {
		name := strings.Join(append([]string{"deltaflow"}, path...), "_") + ".golden"
		want[name] = true
		code, out, errs := run(t, append(path, "--help")...)
		if code != 0 || errs != "" {
			t.Errorf("%s: exit %d, stderr %q", name, code, errs)
			continue
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Count(line, "(default") > 1 {
				t.Errorf("%s: default shown twice: %q", name, line)
			}
			// A flag's variables show one way, as [$NAME] (README).
			if rest := bracketedVars.ReplaceAllString(line, ""); strings.Contains(rest, "default $") || strings.Contains(rest, ", $") {
				t.Errorf("%s: a variable not shown as [$NAME]: %q", name, line)
			}
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "-") && !strings.HasPrefix(f[0], "--") && !strings.HasPrefix(f[0], "-h,") {
				t.Errorf("%s: single-dash flag: %q", name, line)
			}
		}
		file := filepath.Join(dir, name)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		golden, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%v (run go test ./runtime/cli -run TestHelpGolden -update)", err)
			continue
		}
		if !bytes.Equal(golden, []byte(out)) {
			t.Errorf("%s differs from --help (rerun with -update if the change is meant):\n--- golden\n%s\n--- got\n%s", file, golden, out)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !want[e.Name()] {
			if *update {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			} else {
				t.Errorf("%s: no such command (rerun with -update)", e.Name())
			}
		}
	}
}
