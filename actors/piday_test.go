package actors

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/sim"
	"github.com/deltaflow/deltaflow/storage"
)

// piDay makes TestPiMaintenanceKeepsTableFlat also measure a whole day at
// the seed's real load and log the figures the README reports:
//
//	go test ./actors -run TestPiMaintenanceKeepsTableFlat -piday -v
var piDay = flag.Bool("piday", false, "TestPiDay: simulate a whole day at 1,000 records/min with and without maintenance and print the figures")

// agingStore is a fast clock for object ages: advance makes every object
// existing at that moment look older by d (its ModTime moves back), as if
// d had passed since it was written. Log cleanup and VACUUM judge age by
// ModTime, so a simulated day passes in seconds.
type agingStore struct {
	storage.Store
	offset atomic.Int64 // simulated time passed so far, ns

	mu   sync.Mutex
	born map[string]int64 // offset when the object was written
	// written counts the data (.parquet outside the log) and log objects
	// written, and their bytes.
	written storeFigures
}

func newAgingStore(s storage.Store) *agingStore {
	return &agingStore{Store: s, born: map[string]int64{}}
}

func (s *agingStore) advance(d time.Duration) { s.offset.Add(int64(d)) }

// now is the simulated clock: the real one plus the time simulated.
func (s *agingStore) now() time.Time { return time.Now().Add(time.Duration(s.offset.Load())) }

func (s *agingStore) wrote(key string, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.born[key] = s.offset.Load()
	s.written.count(key, size)
}

func (s *agingStore) aged(o storage.ObjectInfo) storage.ObjectInfo {
	s.mu.Lock()
	born := s.born[o.Key]
	s.mu.Unlock()
	o.ModTime = o.ModTime.Add(-time.Duration(s.offset.Load() - born))
	return o
}

func (s *agingStore) Put(ctx context.Context, key string, data []byte) error {
	s.wrote(key, int64(len(data)))
	return s.Store.Put(ctx, key, data)
}

func (s *agingStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	s.wrote(key, int64(len(data)))
	return s.Store.PutIfAbsent(ctx, key, data)
}

func (s *agingStore) PutStream(ctx context.Context, key string, r io.Reader, size int64) error {
	// size may be -1 (unknown): count what the store is given.
	cr := &countingReader{r: r}
	err := s.Store.PutStream(ctx, key, cr, size)
	s.wrote(key, cr.n)
	return err
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (s *agingStore) List(ctx context.Context, prefix, startAfter string) ([]storage.ObjectInfo, error) {
	objs, err := s.Store.List(ctx, prefix, startAfter)
	for i := range objs {
		objs[i] = s.aged(objs[i])
	}
	return objs, err
}

func (s *agingStore) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	o, err := s.Store.Stat(ctx, key)
	if err != nil {
		return o, err
	}
	return s.aged(o), nil
}

// dayPlan is the load and maintenance of one simulation.
type dayPlan struct {
	hours          int
	epochsPerHour  int
	recordsPerEpch int
	maintenance    bool
	minFiles       int
	openTarget     int64 // OptimizeOpenTargetSize; 0: the default
	vacuumRetain   time.Duration
	tableConfig    map[string]string
}

// storeFigures is what the table's store holds at one moment.
type storeFigures struct {
	liveFiles, dataFiles, logFiles int
	liveBytes, dataBytes, logBytes int64
}

// count adds the object key of size bytes to the data or log figures.
func (f *storeFigures) count(key string, size int64) {
	switch {
	case strings.HasPrefix(key, delta.LogDir):
		f.logFiles++
		f.logBytes += size
	case strings.HasSuffix(key, ".parquet"):
		f.dataFiles++
		f.dataBytes += size
	}
}

func (f storeFigures) String() string {
	return fmt.Sprintf("live %d files %s; data on store %d files %s; _delta_log %d files %s",
		f.liveFiles, mib(f.liveBytes), f.dataFiles, mib(f.dataBytes), f.logFiles, mib(f.logBytes))
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// dayRun is the outcome of a simulation: the figures after every hour,
// what was written to the store in all, and the commits.
type dayRun struct {
	hourly  []storeFigures
	written storeFigures
	commits int64
}

// simulateDay streams plan.hours simulated hours of sensor records through
// the engine, one explicit flush per epoch, into a table on an agingStore.
// With maintenance it runs OPTIMIZE after every hour and VACUUM after every
// 24, as the Pi config schedules them, and log cleanup after checkpoints.
func simulateDay(t *testing.T, plan dayPlan) dayRun {
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	aging := newAgingStore(store)
	h := newHarness(t, aging)
	if plan.tableConfig != nil {
		s, err := h.table.Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		meta := s.Metadata()
		meta.Configuration = plan.tableConfig
		if _, err := h.table.Commit(t.Context(), s, []delta.Action{{MetaData: &meta}}, delta.Operation{Name: "SET TBLPROPERTIES"}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{FlushInterval: time.Hour} // epochs are flushed explicitly
	if plan.maintenance {
		cfg.Maintenance = Maintenance{OptimizeMinFiles: plan.minFiles, OptimizeOpenTargetSize: plan.openTarget,
			VacuumRetain: plan.vacuumRetain, LogCleanupAfterCheckpoint: true, now: aging.now}
	}
	r := h.start(cfg, nil)
	defer r.stop(t)

	p, err := kafka.NewProducer(h.kcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	total := plan.hours * plan.epochsPerHour * plan.recordsPerEpch
	gen := sim.New(sim.Config{Seed: 7, Events: total, Span: time.Duration(plan.hours) * time.Hour})
	epoch := time.Hour / time.Duration(plan.epochsPerHour)
	var run dayRun
	round := func(msg any) {
		if _, err := r.engine.system.Root.RequestFuture(r.engine.tables[0].maintenance, msg, time.Minute).Result(); err != nil {
			t.Fatalf("maintenance run %T: %v", msg, err)
		}
	}
	var buf []byte
	for hour := 1; hour <= plan.hours; hour++ {
		for range plan.epochsPerHour {
			for range plan.recordsPerEpch {
				key, value, ev := gen.Next(buf[:0])
				p.ProduceAsync(t.Context(), &kgo.Record{Topic: topic, Key: slices.Clone(key), Value: slices.Clone(value)})
				h.events = append(h.events, ev)
			}
			if err := p.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			h.records += plan.recordsPerEpch
			flushAll(t, r, int64(h.records))
			aging.advance(epoch)
		}
		if plan.maintenance {
			round(&optimizeDue{})
			if hour%24 == 0 {
				// Tombstones carry the table's clock, the real one: wait out
				// a short retention so that what VACUUM keeps does not
				// depend on how many simulated hours the last real second
				// held (the machine's speed).
				if plan.vacuumRetain < time.Minute {
					time.Sleep(plan.vacuumRetain + 100*time.Millisecond)
				}
				round(&vacuumDue{})
			}
		}
		run.hourly = append(run.hourly, figures(t, h.table, store))
	}
	run.commits = int64(testutil.ToFloat64(r.metrics().Commits))
	aging.mu.Lock()
	run.written = aging.written
	aging.mu.Unlock()
	h.checkExactlyOnce()
	return run
}

// flushAll commits epochs until the table holds want records (the fetch
// loop may not have read them all at the first flush).
func flushAll(t *testing.T, r *running, want int64) {
	t.Helper()
	var n int64
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if err := r.engine.CommitNow(t.Context()); err != nil {
			t.Fatal(err)
		}
		committed, err := r.engine.Committed(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		n = 0
		for _, next := range committed {
			n += max(next, 0)
		}
		if n == want {
			return
		}
	}
	t.Fatalf("%d of %d records produced committed within 2 minutes of flushing", n, want)
}

// figures measures the table: live files from the snapshot, data and log
// files from a listing of the store.
func figures(t *testing.T, tbl *delta.Table, store storage.Store) storeFigures {
	t.Helper()
	s, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var f storeFigures
	for _, a := range s.Files() {
		f.liveFiles++
		f.liveBytes += a.Size
	}
	objs, err := store.List(t.Context(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		f.count(o.Key, o.Size)
	}
	return f
}

// TestPiMaintenanceKeepsTableFlat runs four simulated days of the Pi's
// schedule (OPTIMIZE hourly, VACUUM daily, log cleanup after checkpoints)
// with short retentions on a fast clock. What the store holds stays flat
// while the table keeps every row exactly once: after each day's VACUUM the
// data files are the live ones (every file removed before it is past the
// short retention), and the log holds at most the retention (under a day here, from the
// cleanup cutoff's midnight truncation) plus a day between cleanups. Without
// maintenance both would hold all four days.
func TestPiMaintenanceKeepsTableFlat(t *testing.T) {
	const days = 4
	plan := dayPlan{hours: days * 24, epochsPerHour: 2, recordsPerEpch: 10, maintenance: true, minFiles: 3, vacuumRetain: time.Second,
		tableConfig: map[string]string{
			"delta.checkpointInterval":           "10",
			"delta.deletedFileRetentionDuration": "interval 1 second",
			"delta.logRetentionDuration":         "interval 1 hour",
		}}
	run := simulateDay(t, plan)
	perDay := func(n int) float64 { return float64(n) / days }
	for day := 2; day <= days; day++ {
		f := run.hourly[day*24-1] // after the day's VACUUM
		t.Logf("end of day %d: %s", day, f)
		if f.dataFiles != f.liveFiles {
			t.Errorf("day %d: %d data files on the store, %d live (%d written in %d days): VACUUM left files removed past the retention",
				day, f.dataFiles, f.liveFiles, run.written.dataFiles, days)
		}
		if float64(f.logFiles) > 2.5*perDay(run.written.logFiles) {
			t.Errorf("day %d: %d files in _delta_log; %d written in %d days: expired log files are not cleaned up",
				day, f.logFiles, run.written.logFiles, days)
		}
		if float64(f.logBytes) > 2.5*float64(run.written.logBytes)/days {
			t.Errorf("day %d: _delta_log holds %s; %s written in %d days: expired log files are not cleaned up",
				day, mib(f.logBytes), mib(run.written.logBytes), days)
		}
	}
	// After a round every partition holds fewer than minFiles small files
	// and, at this size, one compacted file.
	end := run.hourly[len(run.hourly)-1]
	partitions := 2 * (days + 1) // device types × event dates
	if end.liveFiles > partitions*plan.minFiles {
		t.Errorf("%d live files in at most %d partitions: OPTIMIZE does not keep up", end.liveFiles, partitions)
	}
	if *piDay {
		measurePiDay(t)
	}
}

// measurePiDay measures a day of the seed's load (1,000 records/min, a 60 s
// epoch) with the Pi config's maintenance (configs/deltaflow.yaml:
// optimize_min_files 10, optimize_open_target_size 1MiB, vacuum_retain
// 720h) and without. Retentions are the Pi's (30 days), so within a day
// VACUUM and log cleanup delete nothing: the figures show what a day adds.
func measurePiDay(t *testing.T) {
	for _, maintained := range []bool{false, true} {
		start := time.Now()
		run := simulateDay(t, dayPlan{hours: 24, epochsPerHour: 60, recordsPerEpch: 1000, maintenance: maintained, minFiles: 10,
			openTarget: 1 << 20, vacuumRetain: 720 * time.Hour})
		t.Logf("maintenance %v, after 24 h (%d commits, simulated in %s): %s; written %s", maintained, run.commits,
			time.Since(start).Round(time.Second), run.hourly[len(run.hourly)-1], run.written)
	}
}
