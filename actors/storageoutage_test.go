package actors

import (
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/storage"
)

// TestStorageOutageLongerThanMaxRetry: the store refuses everything for
// longer than the retry budget, while records keep arriving. Uploads and
// the commit give up, the abort cannot even re-read the table (the
// committer fails and is restarted), and once the store is back the
// engine resumes by itself: every record exactly once.
func TestStorageOutageLongerThanMaxRetry(t *testing.T) {
	h := newHarness(t, nil)
	faulty := storage.NewFaulty(h.store)
	h.produce(5_000, 0, 3)
	r := h.start(Config{MaxRetry: 300 * time.Millisecond}, faulty)
	h.waitCommitted(r, 30*time.Second)
	faulty.Fail(storage.Rule{})
	h.produce(5_000, 0, 4)
	time.Sleep(3 * time.Second)
	faulty.Reset()
	h.produce(5_000, 0, 5)
	h.waitCommitted(r, 60*time.Second)
	r.stop(t)
	h.checkExactlyOnce()
	if n := value(t, r.metrics().Restarts.WithLabelValues("committer")); n == 0 {
		t.Error("the committer never failed: the outage did not outlast the retries")
	}
}
