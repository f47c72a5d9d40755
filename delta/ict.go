package delta

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/deltaflow/deltaflow/storage"
)

// In-commit timestamps (PROTOCOL.md "In-Commit Timestamps", feature
// inCommitTimestamp, inCommitTimestamp-preview in delta-spark 3.2): with
// delta.enableInCommitTimestamps on, commitInfo is the first action of
// every commit and carries inCommitTimestamp (ms), strictly greater than
// the previous commit's; readers take a version's time from it, not from
// the commit file's modification time, from the enablement version
// (delta.inCommitTimestampEnablementVersion; from the start when unset) on.

// commitICT returns the inCommitTimestamp of a commit's commitInfo.
func commitICT(actions []Action) (int64, bool) {
	for i := range actions {
		if ci := actions[i].CommitInfo; ci != nil && ci.InCommitTimestamp != nil {
			return *ci.InCommitTimestamp, true
		}
	}
	return 0, false
}

// commitTime is a commit's time: its in-commit timestamp if it has one,
// else its file's modification time.
func commitTime(modTime time.Time, actions []Action) int64 {
	if ict, ok := commitICT(actions); ok {
		return ict
	}
	return modTime.UnixMilli()
}

// nextInCommitTimestamp is the in-commit timestamp of a commit made now
// after s: now, or 1 ms past the snapshot's own when the clock is behind.
func (s *Snapshot) nextInCommitTimestamp(now time.Time) int64 {
	return max(s.timestamp+1, now.UnixMilli())
}

// ictEnablementVersion is the first version with in-commit timestamps, 0
// when the property is unset (enabled at creation).
func ictEnablementVersion(conf map[string]string) (int64, error) {
	for _, k := range []string{"delta.inCommitTimestampEnablementVersion", "delta.inCommitTimestampEnablementVersion-preview"} {
		if v, ok := conf[k]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %q: %w", k, v, err)
			}
			return n, nil
		}
	}
	return 0, nil
}

// readCommitICT reads one commit's in-commit timestamp.
func (t *Table) readCommitICT(ctx context.Context, l *logListing, v int64) (int64, bool, error) {
	commits, err := t.readCommits(ctx, []storage.ObjectInfo{l.commits[v]})
	if err != nil {
		return 0, false, err
	}
	ict, ok := commitICT(commits[0])
	return ict, ok, nil
}

// timeTravelICT finds the latest version committed at or before ts when
// the table has in-commit timestamps, by binary search over the commits
// from the enablement version on. When ts is before those, or the table has
// none, found is -1 and rest are the versions whose modification times
// decide.
func (t *Table) timeTravelICT(ctx context.Context, l *logListing, versions []int64, ts time.Time) (found int64, rest []int64, err error) {
	last := versions[len(versions)-1]
	if _, ok, err := t.readCommitICT(ctx, l, last); err != nil || !ok {
		return -1, versions, err
	}
	latest, err := t.Snapshot(ctx)
	if err != nil {
		return -1, nil, err
	}
	if !latest.inCommitTimestamps() {
		return -1, versions, nil
	}
	enabled, err := ictEnablementVersion(latest.metadata.Configuration)
	if err != nil {
		return -1, nil, err
	}
	first := sort.Search(len(versions), func(i int) bool { return versions[i] >= enabled })
	ictVersions := versions[first:]
	want := ts.UnixMilli()
	var searchErr error
	// The first commit whose in-commit timestamp is after ts.
	i := sort.Search(len(ictVersions), func(i int) bool {
		ict, ok, err := t.readCommitICT(ctx, l, ictVersions[i])
		if err == nil && !ok {
			err = &CorruptLogError{File: CommitKey(ictVersions[i]), Err: fmt.Errorf("no inCommitTimestamp although in-commit timestamps are on since version %d", enabled)}
		}
		if err != nil && searchErr == nil {
			searchErr = err
		}
		return err != nil || ict > want
	})
	if searchErr != nil {
		return -1, nil, searchErr
	}
	if i == 0 {
		return -1, versions[:first], nil // before in-commit timestamps began
	}
	return ictVersions[i-1], nil, nil
}

// inCommitTimestamps reports whether commits must carry in-commit
// timestamps.
func (s *Snapshot) inCommitTimestamps() bool {
	on, _ := inCommitTimestampsOn(s)
	return on
}
