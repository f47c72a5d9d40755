package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/failpoint"
	"github.com/deltaflow/deltaflow/messages"
	"github.com/deltaflow/deltaflow/storage"
	"github.com/deltaflow/deltaflow/upsert"
)

// epochCommit is what one epoch writes to the Delta log.
type epochCommit struct {
	actions     []delta.Action
	op          delta.Operation
	rows, bytes int64
	// upserts, for an upsert table (table), are the epoch's changes,
	// resolved into the commit's first actions when it is written.
	upserts *upsert.Changes
	table   *upsert.Table
	// stale is the resolved changes' stale ones (upsert.Result.Stale);
	// index what the commit changes in the table's key index, applied
	// once it lands.
	stale int64
	index upsert.IndexUpdate
}

// newEpochCommit builds the epoch's commit: its adds and txns, then the
// refreshed txns of idle partitions, as a STREAMING UPDATE (Spark's name,
// with the epoch as its epochId; output mode Update for an upsert table,
// else Append).
func newEpochCommit(es *epochState, app string, table *upsert.Table, refresh []delta.Txn, now time.Time) epochCommit {
	actions, rows, bytes := es.commitActions(app, table != nil, now)
	for i := range refresh {
		actions = append(actions, delta.Action{Txn: &refresh[i]})
	}
	ec := epochCommit{actions: actions, rows: rows, bytes: bytes, op: delta.Operation{
		Name:       "STREAMING UPDATE",
		Parameters: map[string]any{"outputMode": "Append", "queryId": app, "epochId": fmt.Sprint(es.epoch)},
		Metrics: map[string]any{"numAddedFiles": fmt.Sprint(len(es.files)), "numRemovedFiles": "0",
			"numOutputRows": fmt.Sprint(rows), "numOutputBytes": fmt.Sprint(bytes)},
	}}
	if table != nil {
		ch := es.changes()
		ec.upserts, ec.table = &ch, table
		ec.op.Parameters["outputMode"] = "Update"
	}
	return ec
}

// resolve makes an upsert epoch's changes the first actions of its commit
// after snap (upsert.Resolve), and its metrics say what they did.
func (ec *epochCommit) resolve(ctx context.Context, store storage.Store, snap *delta.Snapshot, now time.Time) error {
	res, err := ec.table.Resolve(ctx, store, snap, *ec.upserts, now)
	if err != nil {
		return fmt.Errorf("resolve upserts: %w", err)
	}
	var adds, removes int
	for _, a := range res.Actions { // cdc actions are neither
		if a.Add != nil {
			adds++
		} else if a.Remove != nil {
			removes++
		}
	}
	ec.actions = append(res.Actions, ec.actions...)
	ec.op.Metrics["numAddedFiles"], ec.op.Metrics["numRemovedFiles"] = fmt.Sprint(adds), fmt.Sprint(removes)
	ec.op.Metrics["numOutputRows"] = fmt.Sprint(res.Rows)
	ec.op.Metrics["numTargetRowsDeleted"] = fmt.Sprint(res.Replaced)
	ec.op.Metrics["numSourceRowsSuperseded"] = fmt.Sprint(res.Superseded)
	ec.op.Metrics["numSourceRowsStale"] = fmt.Sprint(res.Stale)
	ec.op.Metrics["numAddedChangeFiles"] = fmt.Sprint(res.ChangeFiles)
	// As Spark's MERGE names them: the table's files, and those whose key
	// columns were read (not ruled out by statistics or the key index).
	ec.op.Metrics["numTargetFilesBeforeSkipping"] = fmt.Sprint(snap.NumFiles())
	ec.op.Metrics["numTargetFilesAfterSkipping"] = fmt.Sprint(res.FilesRead)
	ec.stale, ec.index = res.Stale, res.Index
	return nil
}

// epochWriter makes an epoch durable: it publishes the epoch's dead letters,
// then writes its commit, each retried under the committer's policy. It
// knows nothing of actors; the committer reports each retry (log, /readyz,
// metrics) through onRetry and decides what a failure costs.
type epochWriter struct {
	table  *delta.Table
	outbox Outbox
	retry  retryPolicy
}

// publishDeadLetters stores letters in the DLQ and waits until all are
// acknowledged: the epoch's bad records must be stored before its commit.
func (w epochWriter) publishDeadLetters(ctx context.Context, letters []messages.DeadLetter, onRetry func(attempt int, err error)) error {
	err := retry(ctx, w.retry, func() error { return w.outbox.PublishDLQ(ctx, letters) }, onRetry)
	if err != nil {
		return fmt.Errorf("DLQ not acknowledged: %w", err)
	}
	return nil
}

// commitResult is the outcome of an epoch's commit: the version written,
// or a conflict, or an error.
type commitResult struct {
	version int64
	// conflict is another writer's commit this one cannot be reconciled
	// with (it advanced a partition of ours, or changed the table): the
	// epoch is dropped and re-read, never retried.
	conflict *delta.ConflictError
	// err is the store failing permanently, or past the retries.
	err error
}

// commit writes the epoch's commit after snap (which advances with it).
// A write whose outcome is unknown is settled by Table.Commit reading the
// log back, so retrying it never commits twice.
func (w epochWriter) commit(ctx context.Context, snap *delta.Snapshot, ec epochCommit, onRetry func(attempt int, err error)) commitResult {
	var version int64
	err := retry(ctx, w.retry, func() (err error) {
		version, err = w.table.Commit(ctx, snap, ec.actions, ec.op)
		return err
	}, onRetry)
	var conflict *delta.ConflictError
	switch {
	case errors.As(err, &conflict):
		return commitResult{conflict: conflict}
	case err != nil:
		return commitResult{err: fmt.Errorf("commit: %w", err)}
	}
	return commitResult{version: version}
}

// epochWrite is one epoch made durable, off the committer's actor: its dead
// letters published, its commit written (none: nothing to commit), then the
// checkpoint when one is due. It owns snap, which the commit advances.
type epochWrite struct {
	writer        epochWriter
	ctx           context.Context
	snap          *delta.Snapshot
	letters       []messages.DeadLetter
	commit        *epochCommit
	progress      *progress
	onDLQRetry    func(attempt int, err error)
	onCommitRetry func(attempt int, err error)
}

// epochOutcome is what an epochWrite did, for the committer to apply.
type epochOutcome struct {
	dlq    error        // the letters were not acknowledged: nothing was committed
	commit commitResult // with commit
	// committed is when the commit landed; took how long writing it took.
	committed time.Time
	took      time.Duration
	// checkpointed says a checkpoint was due and written, with checkpoint's
	// error.
	checkpointed bool
	checkpoint   error
}

func (w epochWrite) run() (out epochOutcome) {
	if len(w.letters) > 0 {
		if out.dlq = w.writer.publishDeadLetters(w.ctx, w.letters, w.onDLQRetry); out.dlq != nil {
			return out
		}
	}
	if w.commit == nil {
		return out
	}
	failpoint.Hit(failpoint.Commit)
	// In flight from here until the committer applies the outcome: the
	// stall watchdog never exits the process meanwhile.
	w.progress.committing.Store(true)
	start := time.Now()
	if w.commit.upserts != nil {
		// Resolved against the snapshot the commit follows: a winner that
		// removed a file this one re-adds is a conflict (re-read), never a
		// lost delete.
		err := retry(w.ctx, w.writer.retry, func() error {
			return w.commit.resolve(w.ctx, w.writer.table.Store(), w.snap, start)
		}, w.onCommitRetry)
		if err != nil {
			out.commit = commitResult{err: err}
			return out
		}
	}
	out.commit = w.writer.commit(w.ctx, w.snap, *w.commit, w.onCommitRetry)
	out.committed, out.took = time.Now(), time.Since(start)
	if out.commit.conflict == nil && out.commit.err == nil {
		w.commit.index.Committed()
	}
	if out.commit.conflict == nil && out.commit.err == nil && w.snap.CheckpointDue() {
		out.checkpointed = true
		out.checkpoint = w.writer.table.Checkpoint(w.ctx, w.snap)
	}
	return out
}
