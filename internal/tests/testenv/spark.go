package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Spark returns the Python of [Python] after checking that it has pyspark
// and delta-spark (scripts/install-deps.sh installs them), and the
// directory of the seed's Spark scripts (scripts/spark).
func Spark(t testing.TB) (python, dir string) {
	t.Helper()
	py := Python(t)
	if out, err := exec.Command(py, "-c", "import pyspark, delta").CombinedOutput(); err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("pyspark/delta-spark missing from %s (%v: %s); run scripts/install-deps.sh", py, err, out)
		}
		t.Skipf("pyspark/delta-spark missing from %s; %s", py, howTo)
	}
	return py, filepath.Join(RepoRoot(t), "scripts", "spark")
}
