package actors

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
)

// Maintenance schedules OPTIMIZE, VACUUM and log cleanup inside the
// daemon, replacing a separate optimize job. A zero interval disables that
// task; the zero Maintenance does nothing.
type Maintenance struct {
	// OptimizeEvery runs OPTIMIZE this often; 0 never.
	OptimizeEvery time.Duration
	// OptimizeTargetSize is the size compacted files aim for; 0 means
	// delta.DefaultTargetFileSize.
	OptimizeTargetSize int64
	// OptimizeMinFiles leaves a partition still being written alone until
	// it holds at least this many files under OptimizeOpenTargetSize; 0 or
	// 1 means 2. A closed partition (nothing added since the previous
	// run) is compacted whenever it has two small files.
	OptimizeMinFiles int
	// OptimizeOpenTargetSize is the size files of a partition still being
	// written are compacted to (files at or above it are left alone, so a
	// run rewrites at most this much of a growing partition); 0 means
	// DefaultOpenTargetSize.
	OptimizeOpenTargetSize int64
	// VacuumEvery runs VACUUM (then log cleanup) this often; 0 never.
	VacuumEvery time.Duration
	// VacuumRetain keeps removed files this long; 0 means the table's
	// delta.deletedFileRetentionDuration. A retention shorter than the
	// table's is refused (logged each run): the daemon never forces it.
	VacuumRetain time.Duration
	// LogCleanupAfterCheckpoint deletes the log files older than the
	// table's delta.logRetentionDuration after a checkpoint, as Spark does
	// when delta.enableExpiredLogCleanup is on (a table that turns it off
	// is left alone). The cutoff moves once a day, so a cleanup runs at
	// most once per UTC day (a listing of the whole log each time).
	LogCleanupAfterCheckpoint bool

	now func() time.Time // test clock; time.Now when nil
}

func (m Maintenance) enabled() bool {
	return m.OptimizeEvery > 0 || m.VacuumEvery > 0 || m.LogCleanupAfterCheckpoint
}

func (m Maintenance) minFiles() int { return max(m.OptimizeMinFiles, DefaultOptimizeMinFiles) }

// Defaults of Maintenance's compaction sizes.
const (
	// DefaultOptimizeMinFiles is Maintenance.OptimizeMinFiles's default
	// (and its least value: one file alone is never compacted).
	DefaultOptimizeMinFiles = 2
	// DefaultOpenTargetSize is Maintenance.OptimizeOpenTargetSize's default.
	DefaultOpenTargetSize = 8 << 20
)

func (m Maintenance) openTarget() int64 {
	if m.OptimizeOpenTargetSize <= 0 {
		return DefaultOpenTargetSize
	}
	return m.OptimizeOpenTargetSize
}

// maintainer does one OPTIMIZE or VACUUM run on its own fresh snapshot,
// independent of the committer's: delta's commit protocol reconciles the
// compaction with concurrent appends.
type maintainer struct {
	cfg     Maintenance
	table   *delta.Table
	writer  delta.WriterOptions
	outbox  Outbox
	metrics *Metrics
	logger  *slog.Logger

	// cleanedUpTo is the log cleanup cutoff (a UTC midnight) of the last
	// cleanup that succeeded; the next one waits for a later cutoff.
	cleanedUpTo time.Time
	// newest is, per partition directory, the newest file's modification
	// time at the last OPTIMIZE run: a partition whose newest file is
	// unchanged since is closed.
	newest map[string]int64
}

func (m *maintainer) now() time.Time {
	if m.cfg.now != nil {
		return m.cfg.now()
	}
	return time.Now()
}

// Maintenance task names, the task label of the maintenance metrics.
const (
	taskOptimize   = "optimize"
	taskVacuum     = "vacuum"
	taskLogCleanup = "log_cleanup"
)

// Results of a maintenance run, the result label of
// deltaflow_maintenance_runs_total.
const (
	resultDone     = "done"     // committed or deleted something
	resultNoop     = "noop"     // nothing to do
	resultConflict = "conflict" // lost to a concurrent commit; the next run plans again
	resultError    = "error"
)

// observe counts one run of task and its duration.
func (m *maintainer) observe(task, result string, start time.Time) {
	if m.metrics == nil {
		return
	}
	m.metrics.MaintenanceRuns.WithLabelValues(task, result).Inc()
	m.metrics.MaintenanceDuration.WithLabelValues(task).Observe(time.Since(start).Seconds())
}

// compaction is one OPTIMIZE pass: the partitions it covers and the size
// it compacts files to (files at or above it are left alone).
type compaction struct {
	dirs   map[string]bool
	target int64
	what   string // for the commitInfo predicate and the log
}

// plan splits the partitions worth compacting into two passes. A closed
// partition (no file added since the previous run) with two small files
// or more is compacted to the target size. An open one (still being
// written, or unknown on the first run) is compacted only once it holds
// OptimizeMinFiles files under OptimizeOpenTargetSize, and only those: the
// growing compacted file of the current partition is not rewritten every
// run, which at the seed's load would write the day's data again each
// hour (555 MiB a day instead of 40 on an SD card). plan remembers each
// partition's newest file for the next run.
func (m *maintainer) plan(snap *delta.Snapshot) []compaction {
	target := m.cfg.OptimizeTargetSize
	if target <= 0 {
		target = delta.DefaultTargetFileSize
	}
	open := min(m.cfg.openTarget(), target)
	type stats struct {
		newest           int64
		small, openSmall int
	}
	parts := map[string]*stats{}
	for _, a := range snap.Files() {
		dir := delta.PartitionDir(snap.PartitionColumns(), a.PartitionValues)
		st := parts[dir]
		if st == nil {
			st = &stats{}
			parts[dir] = st
		}
		st.newest = max(st.newest, a.ModificationTime)
		if a.DeletionVector != nil {
			continue
		}
		if a.Size < target {
			st.small++
		}
		if a.Size < open {
			st.openSmall++
		}
	}
	closed := compaction{dirs: map[string]bool{}, target: target, what: "closed partitions with 2 or more small files"}
	growing := compaction{dirs: map[string]bool{}, target: open,
		what: fmt.Sprintf("open partitions with %d or more files under %d bytes", m.cfg.minFiles(), open)}
	for dir, st := range parts {
		prev, seen := m.newest[dir]
		switch {
		case seen && prev == st.newest && st.small >= 2:
			closed.dirs[dir] = true
		case (!seen || prev != st.newest) && st.openSmall >= m.cfg.minFiles():
			growing.dirs[dir] = true
		}
	}
	m.newest = make(map[string]int64, len(parts))
	for dir, st := range parts {
		m.newest[dir] = st.newest
	}
	var out []compaction
	for _, c := range []compaction{closed, growing} {
		if len(c.dirs) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// optimize does one run (see plan). A ConflictDelete (another compaction
// removed a file first) is not a failure: the next run plans again.
func (m *maintainer) optimize(ctx context.Context) {
	start := time.Now()
	result := resultNoop
	defer func() { m.observe(taskOptimize, result, start) }()
	snap, err := m.table.Snapshot(ctx)
	if err != nil {
		result = resultError
		m.logger.Warn("optimize: cannot read the table; trying next run", "err", err)
		return
	}
	passes := m.plan(snap)
	if len(passes) == 0 {
		m.logger.Debug("optimize: no partition to compact", "version", snap.Version())
		return
	}
	for i, c := range passes {
		if i > 0 {
			if err := m.table.Update(ctx, snap); err != nil {
				result = resultError
				m.logger.Warn("optimize: cannot re-read the table; trying next run", "err", err)
				return
			}
		}
		cols := snap.PartitionColumns()
		passStart := time.Now()
		res, err := m.table.Optimize(ctx, snap, delta.OptimizeOptions{TargetSize: c.target, Writer: m.writer,
			Filter:    func(pv map[string]*string) bool { return c.dirs[delta.PartitionDir(cols, pv)] },
			Predicate: c.what})
		switch {
		case delta.IsConflict(err, delta.ConflictDelete):
			result = resultConflict
			m.logger.Info("optimize: a concurrent commit removed a file being compacted; trying next run", "err", err)
			return
		case err != nil:
			result = resultError
			m.logger.Warn("optimize failed; trying next run", "err", err)
			return
		case res.Version < 0:
			continue
		}
		result = resultDone
		ev := &bridge.OptimizeEvent{Version: res.Version, FilesAdded: res.FilesAdded, FilesRemoved: res.FilesRemoved,
			BytesAdded: res.BytesAdded, BytesRemoved: res.BytesRemoved, DurationMS: time.Since(passStart).Milliseconds()}
		m.logger.Info("optimized", "partitions", c.what, "version", ev.Version, "files_removed", ev.FilesRemoved,
			"files_added", ev.FilesAdded, "bytes_removed", ev.BytesRemoved, "bytes_added", ev.BytesAdded,
			"took", time.Since(passStart).Round(time.Millisecond))
		m.outbox.Publish(ev)
	}
}

// vacuum does one VACUUM run, then deletes expired log files.
func (m *maintainer) vacuum(ctx context.Context) {
	start := time.Now()
	result := resultError
	defer func() { m.observe(taskVacuum, result, start) }()
	snap, err := m.table.Snapshot(ctx)
	if err != nil {
		m.logger.Warn("vacuum: cannot read the table; trying next run", "err", err)
		return
	}
	res, err := m.table.Vacuum(ctx, snap, delta.VacuumOptions{Retention: m.cfg.VacuumRetain})
	if err != nil {
		m.logger.Warn("vacuum failed; trying next run", "retain", m.cfg.VacuumRetain, "err", err)
		return
	}
	result = resultDone
	if len(res.Files) == 0 {
		result = resultNoop
	}
	logs := m.cleanupLog(ctx, snap)
	ev := &bridge.VacuumEvent{FilesDeleted: len(res.Files), BytesDeleted: res.Bytes, DurationMS: time.Since(start).Milliseconds()}
	m.logger.Info("vacuumed", "files_deleted", ev.FilesDeleted, "bytes_deleted", ev.BytesDeleted, "log_files_deleted", logs,
		"took", time.Since(start).Round(time.Millisecond))
	m.outbox.Publish(ev)
}

// logCleanupCutoff is the day before which CleanupLog deletes log files of
// snap: now minus delta.logRetentionDuration, truncated to UTC midnight.
func (m *maintainer) logCleanupCutoff(snap *delta.Snapshot) time.Time {
	return m.now().Add(-snap.LogRetention()).UTC().Truncate(24 * time.Hour)
}

// afterCheckpoint runs the log cleanup a checkpoint makes possible, once
// per cutoff day: earlier in the day it would list the whole log to find
// nothing new.
func (m *maintainer) afterCheckpoint(ctx context.Context) {
	if !m.cfg.LogCleanupAfterCheckpoint {
		return
	}
	snap, err := m.table.Snapshot(ctx)
	if err != nil {
		m.logger.Warn("log cleanup: cannot read the table; trying after the next checkpoint", "err", err)
		return
	}
	if !m.logCleanupCutoff(snap).After(m.cleanedUpTo) {
		return
	}
	m.cleanupLog(ctx, snap)
}

// cleanupLog deletes the expired log files of snap and returns how many.
func (m *maintainer) cleanupLog(ctx context.Context, snap *delta.Snapshot) int {
	start := time.Now()
	cutoff := m.logCleanupCutoff(snap)
	logs, err := m.table.CleanupLog(ctx, snap)
	if err != nil {
		m.observe(taskLogCleanup, resultError, start)
		m.logger.Warn("log cleanup failed; trying again later", "err", err)
		return 0
	}
	m.cleanedUpTo = cutoff
	result := resultDone
	if len(logs) == 0 {
		result = resultNoop
	}
	m.observe(taskLogCleanup, result, start)
	if len(logs) > 0 {
		m.logger.Info("expired log files deleted", "files", len(logs), "retention", snap.LogRetention(),
			"took", time.Since(start).Round(time.Millisecond))
	}
	return len(logs)
}

// Maintenance actor messages, sent by its own timers.
type (
	optimizeDue struct{}
	vacuumDue   struct{}
	// checkpointed is sent by the committer after it wrote a checkpoint.
	checkpointed struct{}
)

// maintenanceActor only dispatches: timers tick, maintainer works. Runs
// happen one at a time in the actor; a tick while a run of the same kind is
// queued or running is dropped, so a slow run never piles up work.
type maintenanceActor struct {
	m        *maintainer
	ctx      context.Context
	cancel   context.CancelFunc
	optQueue atomic.Bool
	vacQueue atomic.Bool
}

func newMaintenanceActor(m *maintainer) actor.Producer {
	return func() actor.Actor { return &maintenanceActor{m: m} }
}

func (a *maintenanceActor) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started:
		a.start(c)
	case *actor.Stopping, *actor.Restarting:
		a.cancel()
	case *optimizeDue:
		defer a.optQueue.Store(false)
		a.m.optimize(a.ctx)
	case *vacuumDue:
		defer a.vacQueue.Store(false)
		a.m.vacuum(a.ctx)
	case *checkpointed:
		a.m.afterCheckpoint(a.ctx)
	default:
		return
	}
	// A run requested with RequestFuture (rather than sent by a timer)
	// is answered once done.
	if c.Sender() != nil {
		c.Respond(c.Message())
	}
}

// start runs the timers until the actor stops or restarts; ctx also aborts
// a run in progress on stop.
func (a *maintenanceActor) start(c actor.Context) {
	a.ctx, a.cancel = context.WithCancel(context.Background())
	root, self := c.ActorSystem().Root, c.Self()
	every := func(d time.Duration, queued *atomic.Bool, msg any) {
		if d <= 0 {
			return
		}
		go func() {
			t := time.NewTicker(d)
			defer t.Stop()
			for {
				select {
				case <-a.ctx.Done():
					return
				case <-t.C:
					if queued.CompareAndSwap(false, true) {
						root.Send(self, msg)
					}
				}
			}
		}()
	}
	every(a.m.cfg.OptimizeEvery, &a.optQueue, &optimizeDue{})
	every(a.m.cfg.VacuumEvery, &a.vacQueue, &vacuumDue{})
	a.m.logger.Info("maintenance scheduled", "optimize_every", a.m.cfg.OptimizeEvery, "optimize_min_files", a.m.cfg.minFiles(),
		"vacuum_every", a.m.cfg.VacuumEvery, "vacuum_retain", a.m.cfg.VacuumRetain, "log_cleanup_after_checkpoint", a.m.cfg.LogCleanupAfterCheckpoint)
}
