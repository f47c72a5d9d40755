package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
)

// applyStartPositions writes kafka.start_offsets or kafka.start_timestamp
// into the table as txn actions for the partitions it holds no offset for
// yet, so the engine starts there; a partition with an offset is left
// alone (the Delta log is the authority). Another instance doing the same
// at the same time makes the commit conflict: the snapshot then holds its
// txns, and the rest is retried (ledger.Settle).
func applyStartPositions(ctx context.Context, cfg *Config, tbl *delta.Table, snap *delta.Snapshot, logger *slog.Logger) error {
	k := cfg.Kafka
	if len(k.StartOffsets) == 0 && k.StartTimestamp == "" {
		return nil
	}
	app := cfg.Table.AppID
	held := func(p int32) bool {
		_, ok := snap.TxnVersion(ledger.AppID(app, k.Topic, p))
		return ok
	}
	var next map[int32]int64
	v, err := ledger.Settle(ctx, tbl, snap, app, k.Topic, func() (ledger.Change, error) {
		var op delta.Operation
		var err error
		next, op, err = startPositions(ctx, k, held, logger)
		return ledger.Change{Next: next, Op: op}, err
	})
	if err != nil {
		return fmt.Errorf("kafka start positions: %w", err)
	}
	if v >= 0 {
		logger.Info("start positions written to the table", "version", v, "topic", k.Topic, "next", next)
	}
	return nil
}

// startPositions returns the next offset to read for each partition
// without an offset (held false), from start_offsets or start_timestamp,
// and the commit's operation.
func startPositions(ctx context.Context, k kafka.Config, held func(int32) bool, logger *slog.Logger) (map[int32]int64, delta.Operation, error) {
	next := map[int32]int64{}
	if len(k.StartOffsets) > 0 {
		for p, o := range k.StartOffsets {
			if !held(p) {
				next[p] = o
			}
		}
		return next, delta.Operation{Name: "SEEK", Parameters: map[string]any{"by": "kafka.start_offsets"}}, nil
	}
	t, err := k.StartTime()
	if err != nil {
		return nil, delta.Operation{}, err
	}
	adm, err := kafka.NewAdmin(k, logger)
	if err != nil {
		return nil, delta.Operation{}, err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	at, err := adm.OffsetsAt(ctx, t)
	if err != nil {
		return nil, delta.Operation{}, fmt.Errorf("kafka.start_timestamp: %w", err)
	}
	for p, o := range at {
		if !held(p) {
			next[p] = o
		}
	}
	return next, delta.Operation{Name: "SEEK", Parameters: map[string]any{"by": "kafka.start_timestamp", "timestamp": t.UTC().Format(time.RFC3339Nano)}}, nil
}
