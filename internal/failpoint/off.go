//go:build !failpoints

package failpoint

import "io"

// Enabled reports whether this build has failpoints (built with -tags
// failpoints).
const Enabled = false

// Hit does nothing in a release build.
func Hit(string) {}

// Reader returns r unchanged in a release build.
func Reader(_ string, r io.Reader, _ int64) io.Reader { return r }
