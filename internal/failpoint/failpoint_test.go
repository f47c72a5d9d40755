package failpoint_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/deltaflow/deltaflow/internal/failpoint"
)

// A release build must ignore the environment: a stray DELTAFLOW_FAILPOINTS
// on a production box can never kill deltaflow.
func TestReleaseBuildIgnoresEnv(t *testing.T) {
	if failpoint.Enabled {
		t.Skip("built with -tags failpoints; the crash scenario exercises that build")
	}
	t.Setenv(failpoint.Env, failpoint.Upload+"=1,"+failpoint.Commit+"=1")
	failpoint.Hit(failpoint.Commit) // would SIGKILL this test process if armed
	r := bytes.NewReader([]byte("data"))
	if got := failpoint.Reader(failpoint.Upload, r, 1); got != io.Reader(r) {
		t.Fatalf("Reader wrapped %T in a release build", got)
	}
}
