package takeover

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTakeoverAfterSparkCrash: the real job dies between offsets/N and
// commits/N with batch N not in the table (a record makes batch N fail after
// Spark planned it, which leaves exactly what a crash there leaves).
// takeover resumes after batch N-1, and run ingests batch N's records and
// the rest exactly once.
func TestTakeoverAfterSparkCrash(t *testing.T) {
	const crashDevice = "takeover-crash-record"
	r := newRig(t, "takeover-crash")
	work := t.TempDir()
	table, ck := filepath.Join(work, "table"), filepath.Join(work, "ckpt")
	r.produce(1000, 4)
	sp := r.startSpark(table, ck, "--crash-device", crashDevice)
	sp.waitFile(t, filepath.Join(ck, "commits", "0"), 5*time.Minute)
	r.produceDevice(crashDevice, 1)
	r.produce(500, 5)
	if err := sp.wait(t, 3*time.Minute); err == nil || !strings.Contains(sp.d.Log.String(), `"event": "failed"`) {
		t.Fatalf("spark should have failed on the crash record, got %v\n%s", err, sp.d.Tail(6000))
	}
	n := lastID(t, filepath.Join(ck, "offsets"))
	if _, err := os.Stat(filepath.Join(ck, "commits", strconv.FormatInt(n, 10))); err == nil || n < 1 {
		t.Fatalf("want offsets/%d without commits/%d (n >= 1); commits/%d: %v", n, n, n, err)
	}
	qid := queryID(t, ck)
	if _, spark := r.txns(table, qid); spark != n-1 {
		t.Fatalf("Spark's txn %d, want %d (batch %d not in the table)", spark, n-1, n)
	}
	out, err := r.takeover(table, ck, quiet)
	if err != nil || !strings.Contains(out, fmt.Sprintf("batch %d did not reach the table", n)) {
		t.Fatalf("takeover: %v\n%s", err, out)
	}
	t.Logf("takeover:\n%s", out)
	want := map[int32]int64{}
	for p, o := range sparkOffsets(t, ck, n-1) {
		want[p] = o - 1
	}
	if got, _ := r.txns(table, qid); !maps.Equal(got, want) {
		t.Fatalf("txns %v, want batch %d's end offsets - 1 %v", got, n-1, want)
	}
	r.run(table, nil)
	if rep := r.check(table); rep.Rows != 1501 {
		t.Fatalf("rows %d, want 1501", rep.Rows)
	}
}
