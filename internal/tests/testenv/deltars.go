package testenv

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// DeltaRS runs scripts/deltars.py (the delta-rs oracle) with args under the
// Python of [Python] and env (nil: this process's) and returns its stdout.
// deltalake 1.6.6's native code sometimes crashes (SIGSEGV, or abort with
// "terminate called without an active exception"); a crashed oracle is no
// verdict, so it is run again, up to four times in all. Any other failure fails
// the test with the oracle's stderr.
func DeltaRS(t testing.TB, env []string, args ...string) []byte {
	t.Helper()
	py := Python(t)
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "deltars.py")
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, py, append([]string{script}, args...)...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil {
			return out
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) && !ee.Exited() && !timedOut && attempt < 4 {
			t.Logf("delta-rs %v crashed (%v); running it again", args, err)
			continue
		}
		t.Fatalf("delta-rs %v: %v\n%s", args, err, stderr.String())
	}
}
