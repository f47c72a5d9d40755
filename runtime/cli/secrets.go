package cli

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// Secrets never go on the command line, where `ps` and /proc/<pid>/cmdline
// show them to every user of the host: a flag takes a file holding the
// secret, or the secret comes from the environment.

// secretFile is a flag whose value is a file path; setting it reads the
// secret the file holds (trailing newlines trimmed) into dst.
type secretFile struct {
	path string
	dst  *string
}

func (f *secretFile) String() string { return f.path }
func (f *secretFile) Type() string   { return "file" }

func (f *secretFile) Set(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	f.path, *f.dst = path, strings.TrimRight(string(data), "\r\n")
	return nil
}

// secretFileFlag adds --name FILE, whose file holds the secret stored in dst.
func secretFileFlag(fs *pflag.FlagSet, dst *string, name, usage string) {
	fs.Var(&secretFile{dst: dst}, name, usage)
}

// credentialsAnnotation marks a URL flag whose URL may carry a password.
const credentialsAnnotation = "deltaflow_credentials"

// noCredentials marks URL flag name: a password in it on the command line
// is refused (env names where it may go instead).
func noCredentials(fs *pflag.FlagSet, name, env string) {
	_ = fs.SetAnnotation(name, credentialsAnnotation, []string{env})
}

// refuseCredentials fails when a flag given on the command line holds a
// URL with a password. Called before the environment fills in the flags
// not given.
func refuseCredentials(fs *pflag.FlagSet) error {
	var err error
	fs.Visit(func(f *pflag.Flag) {
		env := f.Annotations[credentialsAnnotation]
		if err != nil || len(env) == 0 {
			return
		}
		for _, u := range strings.Split(f.Value.String(), ",") {
			if pu, perr := url.Parse(strings.TrimSpace(u)); perr == nil && pu.User != nil {
				if _, hasPW := pu.User.Password(); hasPW {
					err = usagef("--%s: the URL holds a password, which `ps` shows to every user of the host; set %s instead", f.Name, env[0])
					return
				}
			}
		}
	})
	return err
}

// removedSecretFlags are flags that once took a secret as their value,
// with what replaces them.
var removedSecretFlags = map[string]string{
	"--s3-secret-key": "--s3-secret-key-file FILE or $MINIO_SECRET_KEY",
}

// explainRemovedSecretFlag adds to pflag's "unknown flag" error for a
// removed secret flag where the secret goes now.
func explainRemovedSecretFlag(err error) error {
	for name, instead := range removedSecretFlags {
		if err.Error() == "unknown flag: "+name {
			return fmt.Errorf("%w (a secret on the command line is shown by `ps`: use %s)", err, instead)
		}
	}
	return err
}
