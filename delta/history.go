package delta

import (
	"context"
	"slices"
	"time"

	"github.com/deltaflow/deltaflow/storage"
)

// HistoryEntry describes one commit, from its commitInfo.
type HistoryEntry struct {
	Version             int64          `json:"version"`
	Timestamp           time.Time      `json:"timestamp"`
	Operation           string         `json:"operation"`
	OperationParameters map[string]any `json:"operationParameters,omitempty"`
	OperationMetrics    map[string]any `json:"operationMetrics,omitempty"`
	ReadVersion         *int64         `json:"readVersion,omitempty"`
	IsBlindAppend       *bool          `json:"isBlindAppend,omitempty"`
	EngineInfo          string         `json:"engineInfo,omitempty"`
}

// History returns the commits whose JSON files still exist, newest first, at
// most limit of them (0: all). The timestamp is commitInfo's in-commit
// timestamp, else its timestamp, or the commit file's modification time when
// a writer left both out.
func (t *Table) History(ctx context.Context, limit int) ([]HistoryEntry, error) {
	l, versions, err := t.listCommits(ctx)
	if err != nil {
		return nil, err
	}
	slices.Reverse(versions)
	if limit > 0 && len(versions) > limit {
		versions = versions[:limit]
	}
	files := make([]storage.ObjectInfo, len(versions))
	for i, v := range versions {
		files[i] = l.commits[v]
	}
	commits, err := t.readCommits(ctx, files)
	if err != nil {
		return nil, err
	}
	out := make([]HistoryEntry, len(versions))
	for i, v := range versions {
		e := HistoryEntry{Version: v, Timestamp: l.commits[v].ModTime.UTC()}
		for _, a := range commits[i] {
			if ci := a.CommitInfo; ci != nil {
				if ci.InCommitTimestamp != nil {
					e.Timestamp = time.UnixMilli(*ci.InCommitTimestamp).UTC()
				} else if ci.Timestamp > 0 {
					e.Timestamp = time.UnixMilli(ci.Timestamp).UTC()
				}
				e.Operation, e.OperationParameters, e.OperationMetrics = ci.Operation, ci.OperationParameters, ci.OperationMetrics
				e.ReadVersion, e.IsBlindAppend, e.EngineInfo = ci.ReadVersion, ci.IsBlindAppend, ci.EngineInfo
			}
		}
		out[i] = e
	}
	return out, nil
}
