package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// oracleTimeout bounds one run of the oracle: the largest table the suite
// reads takes seconds, even on a loaded 2-core machine.
const oracleTimeout = 3 * time.Minute

// DeltaRS runs scripts/deltars.py (the delta-rs oracle) with args under the
// Python of [Python] and env (nil: this process's) and returns its stdout.
// deltalake 1.6.6's native code sometimes aborts the interpreter's shutdown
// ("terminate called without an active exception"; 1 run in 30 on a loaded
// machine, four in a row once in CI), which the script skips once its answer
// is out; it has also crashed mid-run (SIGSEGV) and hung (once on a small
// golden table, 5 minutes without output): a crashed or hung oracle is no
// verdict, so it is run again, up to four times in all. Any other failure
// fails the test with the oracle's stderr.
func DeltaRS(t testing.TB, env []string, args ...string) []byte {
	t.Helper()
	py := Python(t)
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "deltars.py")
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(t.Context(), oracleTimeout)
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
		if errors.As(err, &ee) && !ee.Exited() && attempt < 4 {
			what := "crashed"
			if timedOut {
				what = "hung for " + oracleTimeout.String()
			}
			t.Logf("delta-rs %v %s (%v); running it again", args, what, err)
			continue
		}
		t.Fatalf("delta-rs %v: %v\n%s", args, err, stderr.String())
	}
}

// CheckDuckDB fails the test unless the output of `deltars.py read --rows
// --duckdb` shows DuckDB's delta_scan reading the same rows as delta-rs
// (both rendered and sorted by the script), so "readable by DuckDB" is
// checked wherever it runs.
func CheckDuckDB(t testing.TB, out []byte) {
	t.Helper()
	var v struct {
		Rows        []any  `json:"rows"`
		DuckDBRows  []any  `json:"duckdbRows"`
		RowsError   string `json:"rowsError"`
		DuckDBError string `json:"duckdbError"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("deltars.py output: %v", err)
	}
	switch {
	case v.DuckDBError != "":
		t.Fatalf("DuckDB cannot read the table: %s (scripts/install-deps.sh installs duckdb and its delta extension)", v.DuckDBError)
	case v.RowsError != "":
		t.Fatalf("delta-rs cannot read the rows: %s", v.RowsError)
	case v.DuckDBRows == nil:
		t.Fatal("deltars.py printed no duckdbRows: call it with --rows --duckdb")
	}
	for i := range max(len(v.Rows), len(v.DuckDBRows)) {
		var a, b []byte
		if i < len(v.Rows) {
			a, _ = json.Marshal(v.Rows[i])
		}
		if i < len(v.DuckDBRows) {
			b, _ = json.Marshal(v.DuckDBRows[i])
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("DuckDB reads %d rows, delta-rs %d; sorted, row %d differs:\nDuckDB:   %s\ndelta-rs: %s", len(v.DuckDBRows), len(v.Rows), i, b, a)
		}
	}
}
