package daemon

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
)

// TestCorruptCheckpointReported: a corrupt checkpoint is read around, as
// Spark does (from the commits before it), but not without a word: the
// daemon logs it once, naming the file, however often it reads the table,
// and counts it in deltaflow_corrupt_checkpoints_total.
func TestCorruptCheckpointReported(t *testing.T) {
	cluster := newCluster(t)
	brokers := cluster.ListenAddrs()
	cfg := testConfig(t, brokers)
	cfg.Table.CheckpointInterval = 2
	cfg.Flush.Interval = 300 * time.Millisecond
	for i := range 2 {
		produce(t, brokers, 100, int64(i+1))
		if err := Run(t.Context(), cfg, RunOptions{UntilLatest: true, LogOutput: logOutput()}); err != nil {
			t.Fatal(err)
		}
	}
	logDir := filepath.Join(cfg.Table.URI, "_delta_log")
	checkpoints, err := filepath.Glob(filepath.Join(logDir, "*.checkpoint.parquet"))
	if err != nil || len(checkpoints) == 0 {
		t.Fatalf("no checkpoint written (%v): the test proves nothing", err)
	}
	latest := checkpoints[len(checkpoints)-1]
	if err := os.WriteFile(latest, []byte("PAR1 not a checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := "_delta_log/" + filepath.Base(latest)

	var logs testenv.SyncBuffer
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, RunOptions{LogOutput: &logs}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	base := "http://" + cfg.HTTP.Listen
	waitUntil(t, "/readyz", 30*time.Second, func() bool { code, _ := httpGet(t, base+"/readyz"); return code == http.StatusOK })
	// More commits: the table is read again (the committer's start, each
	// update), the corrupt checkpoint with it until a newer one is written.
	produce(t, brokers, 100, 3)
	waitUntil(t, "the new records committed", 30*time.Second, func() bool { n, _ := tableRecords(t, cfg.Table.URI); return n == 300 })
	_, body := httpGet(t, base+"/metrics")
	if !strings.Contains(body, `deltaflow_corrupt_checkpoints_total{table="sensor_events"} 1`+"\n") {
		t.Errorf("/metrics does not count the corrupt checkpoint once (deltaflow_corrupt_checkpoints_total 1)")
	}
	var reports []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "corrupt checkpoint") {
			reports = append(reports, line)
		}
	}
	if len(reports) != 1 || !strings.Contains(reports[0], file) {
		t.Errorf("log lines on the corrupt checkpoint %s: %q; want one naming it", file, reports)
	}
}
