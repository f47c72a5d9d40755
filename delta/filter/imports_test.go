package filter_test

import (
	"os/exec"
	"strings"
	"testing"
)

// filter is pure: it reads delta's types and nothing of the daemon.
func TestForbiddenImports(t *testing.T) {
	forbidden := []string{
		"github.com/deltaflow/deltaflow/actors",
		"github.com/deltaflow/deltaflow/bridge",
		"github.com/deltaflow/deltaflow/runtime/daemon",
		"github.com/asynkron/protoactor-go",
		"github.com/twmb/franz-go",
		"github.com/nats-io/",
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", "github.com/deltaflow/deltaflow/delta/filter").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for dep := range strings.FieldsSeq(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("delta/filter depends on %s", dep)
			}
		}
	}
}
