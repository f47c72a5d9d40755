package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/deltaflow/deltaflow/delta/internal/jsonenc"
	"github.com/deltaflow/deltaflow/storage"
)

// EngineInfo is written as commitInfo.engineInfo.
var EngineInfo = "deltaflow"

// Operation describes a commit for its commitInfo: Name as Spark names
// operations ("STREAMING UPDATE", "WRITE", "OPTIMIZE", "CREATE TABLE"...),
// with its parameters and metrics (Spark writes metric values as strings).
type Operation struct {
	Name       string
	Parameters map[string]any
	Metrics    map[string]any
}

// DefaultMaxCommitAttempts bounds how often Commit retries at a later version
// after losing races to concurrent blind appends.
const DefaultMaxCommitAttempts = 100

// Create writes version 0 of a new table: protocol, metaData and commitInfo.
// ErrTableExists if version 0 is already there.
func (t *Table) Create(ctx context.Context, schema *StructType, partitionColumns []string, configuration map[string]string) (*Snapshot, error) {
	for _, c := range partitionColumns {
		if schema.Field(c) == nil {
			return nil, fmt.Errorf("create table: partition column %q is not in the schema", c)
		}
	}
	// Spark's and delta-rs's default; commit raises it to reader 3 /
	// writer 7 with just the features the schema needs (timestamp_ntz).
	proto := &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	created := t.now().UnixMilli()
	meta := &Metadata{
		ID:               uuid.NewString(),
		Format:           Format{Provider: "parquet", Options: map[string]string{}},
		SchemaString:     schema.SchemaString(),
		PartitionColumns: append([]string{}, partitionColumns...),
		Configuration:    configuration,
		CreatedTime:      &created,
	}
	partitionBy, _ := jsonenc.Marshal(meta.PartitionColumns)
	props, _ := jsonenc.Marshal(meta.Configuration)
	op := Operation{Name: "CREATE TABLE", Parameters: map[string]any{
		"isManaged": "false", "description": nil, "partitionBy": string(partitionBy), "properties": string(props),
	}}
	s := newSnapshot(t.root)
	actions := []Action{{Protocol: proto}, {MetaData: meta}}
	if _, err := t.commit(ctx, s, actions, op, 1); err != nil {
		if IsConflict(err) {
			return nil, ErrTableExists
		}
		return nil, fmt.Errorf("create table: %w", err)
	}
	return s, nil
}

// Commit writes actions as the next version after s, with optimistic
// concurrency: the commit file is created with put-if-absent, and when
// another writer took the version, the commits in between are checked.
// A metaData or protocol change, a txn for one of our appIds, or a removal of
// a file we remove aborts with a *ConflictError; anything else (concurrent
// blind appends, compactions of other files) is reconciled by retrying at the
// next version. A write whose outcome is unknown is resolved by reading the
// log, never by blind retry.
//
// A commit that changes metaData also carries the protocol the new metadata
// needs (a timestamp_ntz column needs reader 3 / writer 7, for example): see
// requiredProtocol.
//
// On success s has advanced to the new version (including the concurrent
// commits it absorbed) and the version is returned. On a conflict s has
// advanced to the winning commit; re-read what the commit depends on.
func (t *Table) Commit(ctx context.Context, s *Snapshot, actions []Action, op Operation) (int64, error) {
	if s == nil || s.version < 0 {
		return 0, fmt.Errorf("commit %s: %w (create it first)", op.Name, ErrTableNotFound)
	}
	if err := s.Check(opOf(op.Name)); err != nil {
		return 0, fmt.Errorf("commit %s: %w", op.Name, err)
	}
	return t.commit(ctx, s, actions, op, DefaultMaxCommitAttempts)
}

// commitPlan is what conflict checking needs to know about our commit.
// Removed files are keyed by canonical path, without the deletion vector: a
// winner that removed the file under any spelling, with any vector, took it.
type commitPlan struct {
	root    tableRoot
	appIDs  map[string]bool
	removes map[pathID]bool
}

func (t *Table) commit(ctx context.Context, s *Snapshot, actions []Action, op Operation, attempts int) (int64, error) {
	actions, err := withRequiredProtocol(s, actions)
	if err != nil {
		return 0, fmt.Errorf("commit %s: %w", op.Name, err)
	}
	plan, blind, err := checkActions(s, actions)
	if err != nil {
		return 0, fmt.Errorf("commit %s: %w", op.Name, err)
	}
	info := t.commitInfo(s, actions, op, blind)
	actions = stampTxns(actions, info.Timestamp)
	for attempt := 0; attempt < attempts; attempt++ {
		if attempt > 0 && info.InCommitTimestamp != nil {
			// Past the commits we lost to: stay monotonic.
			ict := s.nextInCommitTimestamp(t.now())
			info.InCommitTimestamp, info.Timestamp = &ict, ict
		}
		v := s.version + 1
		final, err := s.withRowIDs(actions, v)
		if err != nil {
			return 0, fmt.Errorf("commit %s: %w", op.Name, err)
		}
		data, err := EncodeActions(append([]Action{{CommitInfo: info}}, final...))
		if err != nil {
			return 0, fmt.Errorf("commit %s: %w", op.Name, err)
		}
		ours, err := t.tryCommit(ctx, v, data)
		if err != nil {
			return 0, fmt.Errorf("commit version %d: %w", v, err)
		}
		if ours {
			if err := s.applyCommit(final); err != nil {
				return 0, err
			}
			s.version, s.timestamp = v, info.Timestamp // the in-commit timestamp, if any
			return v, nil
		}
		// Another writer won version v: replay it and look for a conflict.
		winner, err := t.readCommits(ctx, []storage.ObjectInfo{{Key: CommitKey(v), Size: -1}})
		if err != nil {
			return 0, fmt.Errorf("commit: read winning version %d: %w", v, err)
		}
		conflict := plan.conflict(v, winner[0])
		if err := s.applyCommit(winner[0]); err != nil {
			return 0, err
		}
		s.version = v
		if ict, ok := commitICT(winner[0]); ok {
			s.timestamp = ict
		}
		if conflict != nil {
			return 0, conflict
		}
	}
	return 0, &ConflictError{Kind: ConflictRetries, Version: s.version}
}

// tryCommit creates the commit file for version v. ours is false when another
// writer's commit holds the version. An error means the outcome could not be
// determined even by reading the log.
func (t *Table) tryCommit(ctx context.Context, v int64, data []byte) (ours bool, err error) {
	key := CommitKey(v)
	const unknownRetries = 3
	for i := 0; ; i++ {
		err := t.store.PutIfAbsent(ctx, key, data)
		if err == nil {
			return true, nil
		}
		if ctx.Err() != nil {
			return false, fmt.Errorf("outcome unknown: %w", err)
		}
		// Taken — or our own write whose response was lost and was retried
		// (an earlier attempt may have landed). The log decides; a file of
		// another size is not ours, and is not read (it may be huge).
		info, gerr := t.store.Stat(ctx, key)
		var got []byte
		if gerr == nil && info.Size == int64(len(data)) {
			got, gerr = t.store.Get(ctx, key)
		}
		switch {
		case gerr == nil:
			return bytes.Equal(got, data), nil
		case errors.Is(gerr, storage.ErrNotExist) && !errors.Is(err, storage.ErrExist) && i < unknownRetries:
			select {
			case <-ctx.Done():
				return false, fmt.Errorf("outcome unknown: %w", err)
			case <-time.After(time.Duration(i+1) * 100 * time.Millisecond):
			}
			continue // nothing landed: the put-if-absent is safe to repeat
		case errors.Is(gerr, storage.ErrNotExist):
			return false, fmt.Errorf("put %s: %w", key, err)
		default:
			return false, fmt.Errorf("outcome unknown: put: %w; read back: %w", err, gerr)
		}
	}
}

// stampTxns sets lastUpdated (ms) on every txn action that lacks it: a txn
// without one never expires under delta.setTransactionRetentionDuration, so
// the property would not mean what the table says for it.
func stampTxns(actions []Action, ms int64) []Action {
	unstamped := func(a Action) bool { return a.Txn != nil && a.Txn.LastUpdated == nil }
	if !slices.ContainsFunc(actions, unstamped) {
		return actions
	}
	out := slices.Clone(actions) // the caller's actions stay as they were
	for i, a := range out {
		if unstamped(a) {
			txn := *a.Txn
			txn.LastUpdated = &ms
			out[i] = Action{Txn: &txn}
		}
	}
	return out
}

// conflict checks one winning commit against our plan (docs/delta-notes.md §8).
func (p *commitPlan) conflict(v int64, winner []Action) *ConflictError {
	for _, a := range winner {
		switch {
		case a.MetaData != nil || a.Protocol != nil:
			return &ConflictError{Kind: ConflictMetadata, Version: v}
		case a.Txn != nil && p.appIDs[a.Txn.AppID]:
			return &ConflictError{Kind: ConflictTxn, Version: v, AppID: a.Txn.AppID}
		case a.Remove != nil && p.removes[p.root.id(a.Remove.Path)]:
			return &ConflictError{Kind: ConflictDelete, Version: v, Path: a.Remove.Path}
		}
	}
	return nil
}

// checkActions enforces the per-commit rules (≤1 metaData, ≤1 protocol, ≤1
// txn per appId, no path added or removed twice, append-only tables) and
// reports whether the commit is a blind append.
func checkActions(s *Snapshot, actions []Action) (*commitPlan, bool, error) {
	plan := &commitPlan{root: s.root, appIDs: map[string]bool{}, removes: map[pathID]bool{}}
	added := map[pathID]bool{}
	var metas, protos int
	blind := true
	for _, a := range actions {
		switch {
		case a.CommitInfo != nil:
			return nil, false, errors.New("commitInfo is written by Commit")
		case a.MetaData != nil:
			metas++
			blind = false
		case a.Protocol != nil:
			protos++
			blind = false
		case a.Txn != nil:
			if plan.appIDs[a.Txn.AppID] {
				return nil, false, fmt.Errorf("two txn actions for app id %q", a.Txn.AppID)
			}
			plan.appIDs[a.Txn.AppID] = true
		case a.Add != nil:
			id := s.root.id(a.Add.Path)
			if added[id] {
				return nil, false, fmt.Errorf("file %q added twice", a.Add.Path)
			}
			added[id] = true
			blind = blind && a.Add.DataChange
		case a.Remove != nil:
			id := s.root.id(a.Remove.Path)
			if plan.removes[id] {
				return nil, false, fmt.Errorf("file %q removed twice", a.Remove.Path)
			}
			plan.removes[id] = true
			blind = false
			if a.Remove.DataChange && s.metadata != nil && s.AppendOnly() {
				return nil, false, fmt.Errorf("table is append-only (delta.appendOnly): cannot remove %q", a.Remove.Path)
			}
		default:
			blind = false
		}
	}
	if metas > 1 || protos > 1 {
		return nil, false, errors.New("more than one metaData or protocol action")
	}
	return plan, blind, nil
}

func (t *Table) commitInfo(s *Snapshot, actions []Action, op Operation, blind bool) *CommitInfo {
	now := t.now()
	info := &CommitInfo{
		Timestamp:           now.UnixMilli(),
		Operation:           op.Name,
		OperationParameters: op.Parameters,
		OperationMetrics:    op.Metrics,
		IsolationLevel:      "Serializable",
		IsBlindAppend:       &blind,
		EngineInfo:          EngineInfo,
		TxnID:               uuid.NewString(),
	}
	if s.version >= 0 {
		rv := s.version
		info.ReadVersion = &rv
		if s.inCommitTimestamps() {
			ict := s.nextInCommitTimestamp(now)
			info.InCommitTimestamp, info.Timestamp = &ict, ict
		}
	}
	// A commit that only rearranges data (OPTIMIZE) runs at snapshot isolation.
	rearrangeOnly := true
	for _, a := range actions {
		if a.Add != nil && a.Add.DataChange || a.Remove != nil && a.Remove.DataChange || a.Add == nil && a.Remove == nil {
			rearrangeOnly = false
		}
	}
	if rearrangeOnly {
		info.IsolationLevel = "SnapshotIsolation"
	}
	return info
}
