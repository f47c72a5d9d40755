package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/storage"
)

// commitRec is what the bench needs of one Delta commit.
type commitRec struct {
	Version   int64
	Operation string
	At        time.Time // commitInfo timestamp: when the writer committed
	Files     int
	Rows      int64
	Txns      map[string]int64
}

// readCommits reads the JSON commits from version from on, up to the first
// missing one.
func readCommits(ctx context.Context, store storage.Store, from int64) ([]commitRec, error) {
	var out []commitRec
	for v := from; ; v++ {
		key := delta.CommitKey(v)
		data, err := store.Get(ctx, key)
		if errors.Is(err, storage.ErrNotExist) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		actions, err := delta.ParseActions(key, data)
		if err != nil {
			return out, err
		}
		c := commitRec{Version: v, Txns: map[string]int64{}}
		for _, a := range actions {
			switch {
			case a.CommitInfo != nil:
				c.At, c.Operation = time.UnixMilli(a.CommitInfo.Timestamp), a.CommitInfo.Operation
			case a.Add != nil:
				c.Files++
				if st, err := delta.ParseStats(a.Add.Stats); err == nil && st.NumRecords > 0 {
					c.Rows += st.NumRecords
				}
			case a.Txn != nil:
				c.Txns[a.Txn.AppID] = a.Txn.Version
			}
		}
		if c.At.IsZero() {
			if info, err := store.Stat(ctx, key); err == nil {
				c.At = info.ModTime
			}
		}
		out = append(out, c)
	}
}

// tableSummary totals the streaming commits of a table written by one run.
type tableSummary struct {
	commits     []commitRec
	Commits     int
	Files       int
	Rows        int64
	FirstCommit time.Time
}

func summarize(ctx context.Context, uri string, opts storage.Options) (*tableSummary, error) {
	store, err := storage.Open(ctx, uri, opts)
	if err != nil {
		return nil, err
	}
	cs, err := readCommits(ctx, store, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", uri, err)
	}
	s := &tableSummary{}
	for _, c := range cs {
		if c.Operation != "STREAMING UPDATE" {
			continue // CREATE TABLE
		}
		s.commits = append(s.commits, c)
		s.Commits++
		s.Files += c.Files
		s.Rows += c.Rows
		if s.FirstCommit.IsZero() {
			s.FirstCommit = c.At
		}
	}
	return s, nil
}
