package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// EnvSpark4Python is the Python of the Spark 4 venv (pyspark 4.2.0), which
// scripts/install-deps.sh makes and scripts/servers.sh exports.
const EnvSpark4Python = "DELTAFLOW_TEST_SPARK4_PYTHON"

// Spark4 returns the Python that has pyspark 4 and the directory of the
// Spark 4 scripts (scripts/spark4): $DELTAFLOW_TEST_SPARK4_PYTHON, else the
// cache's venv-spark4. Missing, it skips the test, or fails it when servers
// are required.
func Spark4(t testing.TB) (python, dir string) {
	t.Helper()
	py := os.Getenv(EnvSpark4Python)
	if py == "" {
		cache := os.Getenv("DELTAFLOW_CACHE")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache", "deltaflow")
		}
		py = filepath.Join(cache, "venv-spark4", "bin", "python")
	}
	if out, err := exec.Command(py, "-c", "import pyspark; assert pyspark.__version__.startswith('4.')").CombinedOutput(); err != nil {
		missing(t, fmt.Sprintf("pyspark 4 at %s (%v: %s); scripts/install-deps.sh installs it", py, err, out))
	}
	return py, filepath.Join(RepoRoot(t), "scripts", "spark4")
}

// RunSparkJSON is RunSpark decoding the last line the script printed (the
// JVM may print before it) as JSON into v.
func RunSparkJSON(t testing.TB, v any, py, dir, script string, args ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(string(RunSpark(t, py, dir, script, args...))), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), v); err != nil {
		t.Fatalf("%s output, last line: %v\n%s", script, err, lines[len(lines)-1])
	}
}

// RunSpark runs script, a file of the Spark scripts' directory dir, under
// py with args (in dir, within 10 minutes: one JVM) and returns its stdout;
// a failure fails the test with the end of its stderr. It logs how long
// the run took.
func RunSpark(t testing.TB, py, dir, script string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{filepath.Join(dir, script)}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
		t.Fatalf("%s: %v\n%s", script, err, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
	t.Logf("%s took %s", script, time.Since(start).Round(time.Second))
	return out
}
