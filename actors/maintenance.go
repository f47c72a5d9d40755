package actors

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
)

// Maintenance schedules OPTIMIZE and VACUUM inside the daemon, replacing a
// separate optimize job. A zero interval disables that task.
type Maintenance struct {
	// OptimizeEvery runs OPTIMIZE this often; 0 never.
	OptimizeEvery time.Duration
	// OptimizeTargetSize is the size compacted files aim for; 0 means
	// delta.DefaultTargetFileSize.
	OptimizeTargetSize int64
	// VacuumEvery runs VACUUM (then log cleanup) this often; 0 never.
	VacuumEvery time.Duration
	// VacuumRetain keeps removed files this long; 0 means the table's
	// delta.deletedFileRetentionDuration. A retention shorter than the
	// table's is refused (logged each round): the daemon never forces it.
	VacuumRetain time.Duration
}

func (m Maintenance) enabled() bool { return m.OptimizeEvery > 0 || m.VacuumEvery > 0 }

// maintainer runs one OPTIMIZE or VACUUM round on its own fresh snapshot,
// independent of the committer's: delta's commit protocol reconciles the
// compaction with concurrent appends.
type maintainer struct {
	cfg    Maintenance
	table  *delta.Table
	writer delta.WriterOptions
	outbox Outbox
	logger *slog.Logger
}

// optimize runs one round. A ConflictDelete (another compaction removed a
// file first) is not a failure: the next round plans again.
func (m *maintainer) optimize(ctx context.Context) {
	start := time.Now()
	snap, err := m.table.Snapshot(ctx)
	if err != nil {
		m.logger.Warn("optimize: cannot read the table; trying next round", "err", err)
		return
	}
	res, err := m.table.Optimize(ctx, snap, delta.OptimizeOptions{TargetSize: m.cfg.OptimizeTargetSize, Writer: m.writer})
	switch {
	case delta.IsConflict(err, delta.ConflictDelete):
		m.logger.Info("optimize: a concurrent commit removed a file being compacted; trying next round", "err", err)
		return
	case err != nil:
		m.logger.Warn("optimize failed; trying next round", "err", err)
		return
	case res.Version < 0:
		m.logger.Debug("optimize: nothing to compact", "version", snap.Version())
		return
	}
	ev := &bridge.OptimizeEvent{Version: res.Version, FilesAdded: res.FilesAdded, FilesRemoved: res.FilesRemoved,
		BytesAdded: res.BytesAdded, BytesRemoved: res.BytesRemoved, DurationMS: time.Since(start).Milliseconds()}
	m.logger.Info("optimized", "version", ev.Version, "files_removed", ev.FilesRemoved, "files_added", ev.FilesAdded,
		"bytes_removed", ev.BytesRemoved, "bytes_added", ev.BytesAdded, "took", time.Since(start).Round(time.Millisecond))
	m.outbox.Publish(ev)
}

// vacuum runs one VACUUM round, then deletes expired log files.
func (m *maintainer) vacuum(ctx context.Context) {
	start := time.Now()
	snap, err := m.table.Snapshot(ctx)
	if err != nil {
		m.logger.Warn("vacuum: cannot read the table; trying next round", "err", err)
		return
	}
	res, err := m.table.Vacuum(ctx, snap, delta.VacuumOptions{Retention: m.cfg.VacuumRetain})
	if err != nil {
		m.logger.Warn("vacuum failed; trying next round", "retain", m.cfg.VacuumRetain, "err", err)
		return
	}
	logs, err := m.table.CleanupLog(ctx, snap)
	if err != nil {
		m.logger.Warn("log cleanup failed; trying next round", "err", err)
	}
	ev := &bridge.VacuumEvent{FilesDeleted: len(res.Files), BytesDeleted: res.Bytes, DurationMS: time.Since(start).Milliseconds()}
	m.logger.Info("vacuumed", "files_deleted", ev.FilesDeleted, "bytes_deleted", ev.BytesDeleted, "log_files_deleted", len(logs),
		"took", time.Since(start).Round(time.Millisecond))
	m.outbox.Publish(ev)
}

// Maintenance actor messages, sent by its own timers.
type (
	optimizeDue struct{}
	vacuumDue   struct{}
)

// maintenanceActor only dispatches: timers tick, maintainer works. Rounds
// run one at a time in the actor; a tick while a round of the same kind is
// queued or running is dropped, so a slow round never piles up work.
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
	}
}

// start runs the timers until the actor stops or restarts; ctx also aborts
// a running round on stop.
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
	a.m.logger.Info("maintenance scheduled", "optimize_every", a.m.cfg.OptimizeEvery, "vacuum_every", a.m.cfg.VacuumEvery,
		"vacuum_retain", a.m.cfg.VacuumRetain)
}
