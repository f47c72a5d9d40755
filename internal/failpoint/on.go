//go:build failpoints

package failpoint

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// Enabled reports whether this build has failpoints (built with -tags
// failpoints).
const Enabled = true

// point is one selected failpoint: the process dies (or, with hang, the
// goroutine blocks) on hit number at.
type point struct {
	name string
	at   int64
	hang bool
	hits atomic.Int64
}

// points are parsed once from the environment; a malformed entry is fatal,
// so a scenario never runs believing a point is armed when it is not.
var points = parse(os.Getenv(Env))

func parse(spec string) []*point {
	var out []*point
	for _, item := range strings.Split(spec, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, n, ok := strings.Cut(item, "=")
		n, action, _ := strings.Cut(n, ":")
		at, err := strconv.ParseInt(n, 10, 64)
		if !ok || err != nil || at < 1 || (action != "" && action != "hang") {
			fmt.Fprintf(os.Stderr, "failpoint: %s=%q: want name=n or name=n:hang with n >= 1\n", Env, item)
			os.Exit(2)
		}
		out = append(out, &point{name: name, at: at, hang: action == "hang"})
	}
	return out
}

// Hit SIGKILLs the process when name is selected and this is its n-th hit,
// or blocks forever for a point selected with ":hang".
func Hit(name string) {
	for _, p := range points {
		if p.name == name && p.hits.Add(1) == p.at {
			if p.hang {
				fmt.Fprintf(os.Stderr, "failpoint %s hit %d: hanging\n", name, p.at)
				select {}
			}
			fmt.Fprintf(os.Stderr, "failpoint %s hit %d: SIGKILL\n", name, p.at)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // never run past the point while the signal lands
		}
	}
}

// Reader wraps r so that reading past byte at hits the failpoint name (once
// per Reader): a kill there lands in the middle of a transfer.
func Reader(name string, r io.Reader, at int64) io.Reader {
	return &reader{r: r, name: name, at: at}
}

type reader struct {
	r    io.Reader
	name string
	at   int64
	read int64
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	before := r.read
	r.read += int64(n)
	if before < r.at && r.read >= r.at {
		Hit(r.name)
	}
	return n, err
}
