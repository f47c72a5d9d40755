package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// No flag takes a secret as its value: `ps` and /proc/<pid>/cmdline show a
// process's arguments to every user of the host. A flag named for a secret
// takes a file holding it.
func TestNoFlagTakesASecret(t *testing.T) {
	secretName := regexp.MustCompile(`secret|password|passwd|token|credential`)
	root, _ := newRoot(IO{Stdout: os.Stdout, Stderr: os.Stderr})
	var walk func(c *cobra.Command)
	checked := 0
	walk = func(c *cobra.Command) {
		visit := func(f *pflag.Flag) {
			checked++
			if secretName.MatchString(f.Name) && f.Value.Type() != "file" {
				t.Errorf("%s --%s takes the secret itself (a %s); want a file holding it, or the environment", c.CommandPath(), f.Name, f.Value.Type())
			}
		}
		c.LocalFlags().VisitAll(visit)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if checked < 50 {
		t.Fatalf("only %d flags checked", checked)
	}
}

// A secret on the command line is refused with a usage error that says
// where it goes instead and never repeats it; from a file or the
// environment it is taken.
func TestSecretsOffTheCommandLine(t *testing.T) {
	code, _, errs := run(t, "inspect", "snapshot", "--table", "s3://b/t", "--s3-secret-key", "sup3rsecret")
	if code != 2 || !strings.Contains(errs, "--s3-secret-key-file") || !strings.Contains(errs, "$MINIO_SECRET_KEY") || strings.Contains(errs, "sup3rsecret") {
		t.Errorf("--s3-secret-key: exit %d, stderr %q; want a usage error pointing at --s3-secret-key-file", code, errs)
	}
	code, _, errs = run(t, "inspect", "snapshot", "--table", "s3://b/t", "--s3-secret-key=sup3rsecret")
	if code != 2 || strings.Contains(errs, "sup3rsecret") {
		t.Errorf("--s3-secret-key=: exit %d, stderr %q", code, errs)
	}

	table := newCLITable(t)
	url := "nats://deltaflow:n4tspw@127.0.0.1:1"
	code, _, errs = run(t, "inspect", "offsets", "--table", table, "--nats", url)
	if code != 2 || !strings.Contains(errs, "$NATS_URL") || strings.Contains(errs, "n4tspw") {
		t.Errorf("--nats with a password: exit %d, stderr %q; want a usage error pointing at $NATS_URL", code, errs)
	}
	t.Setenv("NATS_URL", url)
	code, out, errs := run(t, "inspect", "offsets", "--table", table)
	if code != 0 || !strings.Contains(out, "nats: skipped") || strings.Contains(out+errs, "n4tspw") {
		t.Errorf("$NATS_URL with a password: exit %d, stdout %q, stderr %q; want it used (and unreachable)", code, out, errs)
	}

	missing := filepath.Join(t.TempDir(), "nope")
	code, _, errs = run(t, "inspect", "snapshot", "--table", "s3://b/t", "--s3-secret-key-file", missing)
	if code != 2 || !strings.Contains(errs, "--s3-secret-key-file") || !strings.Contains(errs, missing) {
		t.Errorf("--s3-secret-key-file missing: exit %d, stderr %q", code, errs)
	}
}

// The file's secret is what the command uses, without its trailing
// newline (echo adds one).
func TestSecretFileFlag(t *testing.T) {
	var got string
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	secretFileFlag(fs, &got, "key-file", "")
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte("s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--key-file", path}); err != nil {
		t.Fatal(err)
	}
	if got != "s3cr3t" || fs.Lookup("key-file").Value.String() != path {
		t.Errorf("secret %q, flag shows %q; want s3cr3t from the file, and the path", got, fs.Lookup("key-file").Value.String())
	}
}
