package actors

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"
)

// OffsetCommitter commits Kafka group offsets, for lag tools only.
type OffsetCommitter interface {
	CommitOffsets(ctx context.Context, next map[tp]int64) error
}

// groupOffsets commits to the Kafka group, for lag tools, the offsets every
// table reading a partition has committed: per partition, the lowest next
// offset among those tables, so a lag tool never sees a table's records as
// read before they are in it. The Delta logs decide where reading resumes;
// these offsets are never read back. Safe for concurrent use.
type groupOffsets struct {
	commit OffsetCommitter // nil: none (tests)
	logger *slog.Logger
	// inFlight counts the commits in flight, which Stop waits for before
	// the consumer leaves the group (an answer after that is franz-go's
	// "were we kicked from the group?").
	inFlight sync.WaitGroup

	mu   sync.Mutex
	next []map[tp]int64 // per table: the next offset of each partition it owns (-1: none yet)
}

func newGroupOffsets(commit OffsetCommitter, tables int, logger *slog.Logger) *groupOffsets {
	return &groupOffsets{commit: commit, logger: logger, next: make([]map[tp]int64, tables)}
}

// committed records table i's next offsets after a commit, and commits to
// the group those of its partitions every table reading them holds.
func (g *groupOffsets) committed(i int, next map[tp]int64) {
	if g.commit == nil {
		return
	}
	g.mu.Lock()
	g.next[i] = maps.Clone(next)
	out := map[tp]int64{}
	for p := range next {
		low := int64(-1)
		for _, t := range g.next {
			off, reads := t[p]
			switch {
			case !reads:
			case off < 0:
				low = -2 // a table holds nothing of it yet
			case low == -1 || off < low:
				if low != -2 {
					low = off
				}
			}
		}
		if low >= 0 {
			out[p] = low
		}
	}
	g.mu.Unlock()
	if len(out) == 0 {
		return
	}
	g.inFlight.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.commit.CommitOffsets(ctx, out); err != nil {
			g.logger.Debug("kafka group offsets not committed (lag tools only)", "err", err)
		}
	})
}
