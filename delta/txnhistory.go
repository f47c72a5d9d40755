package delta

import (
	"context"
	"fmt"
	"slices"

	"github.com/deltaflow/deltaflow/storage"
)

// TxnHistory looks in the table's log for the last txn of each of appIDs
// that s does not hold: a txn another engine dropped from its checkpoint
// once it was past delta.setTransactionRetentionDuration is still in the
// commits before that checkpoint until log cleanup deletes them. It reads
// the commits at or below s's checkpoint, newest first, stopping once
// every appId is found or at the first missing commit; then the
// checkpoint just below the oldest commit read, if there is one.
//
// found holds the txns found; complete reports that the answer is certain:
// every appId was found, or the log was read back to version 0, so one not
// found never committed a txn. Without a checkpoint below s, s replayed
// every commit: nothing is missing.
func (t *Table) TxnHistory(ctx context.Context, s *Snapshot, appIDs []string) (found map[string]Txn, complete bool, err error) {
	found = map[string]Txn{}
	want := map[string]bool{}
	for _, id := range appIDs {
		if _, ok := s.txns[id]; !ok {
			want[id] = true
		}
	}
	cp := s.checkpointVersion
	if len(want) == 0 || cp < 0 {
		return found, cp < 0, nil
	}
	l, err := t.listLog(ctx, "")
	if err != nil {
		return nil, false, fmt.Errorf("txn history: %w", err)
	}
	take := func(a *Action) {
		if a.Txn != nil && want[a.Txn.AppID] {
			found[a.Txn.AppID] = *a.Txn
			delete(want, a.Txn.AppID)
		}
	}
	// Commits newest first, a batch at a time; within a commit the last
	// txn of an appId wins, as in replay.
	const batch = 16
	oldest := cp + 1 // the oldest version read
	for v := cp; v >= 0 && len(want) > 0; {
		var files []storage.ObjectInfo
		for ; v >= 0 && len(files) < batch; v-- {
			f, ok := l.commits[v]
			if !ok {
				break
			}
			files = append(files, f)
		}
		if len(files) == 0 {
			break // a gap, or cleaned up: older commits may be overtaken by the missing ones
		}
		commits, err := t.readCommits(ctx, files)
		if err != nil {
			return nil, false, fmt.Errorf("txn history: %w", err)
		}
		for _, actions := range commits {
			for i := range slices.Backward(actions) {
				take(&actions[i])
			}
		}
		oldest -= int64(len(files))
		if len(files) < batch {
			break
		}
	}
	if len(want) == 0 || oldest == 0 {
		return found, true, nil
	}
	// The state at oldest-1, when a checkpoint of it is left.
	if ccp, keys := l.checkpoint(oldest-1, nil); ccp == oldest-1 {
		err := ReadCheckpoint(ctx, t.store, keys, func(a *Action) error {
			take(a)
			return nil
		})
		if err != nil {
			return nil, false, fmt.Errorf("txn history: read checkpoint %d: %w", ccp, err)
		}
	}
	return found, len(want) == 0, nil
}
