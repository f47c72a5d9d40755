package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// WatchdogRecord is the KV value under WatchdogKey: the last times the
// stall watchdog exited a deltaflow process of the table, oldest first,
// e.g. {"exits":["2026-06-22T09:15:30Z"]}. A restarted process reads it to
// space its own exits by a capped backoff, so a stall that a restart does
// not cure never becomes a fast restart loop.
type WatchdogRecord struct {
	Exits []time.Time `json:"exits"`
}

// WatchdogExits returns the recorded exits; a missing bucket or key is an
// empty record.
func (b *Bridge) WatchdogExits(ctx context.Context) (WatchdogRecord, error) {
	key := WatchdogKey(b.table)
	ctx, cancel := b.bound(ctx)
	defer cancel()
	var rec WatchdogRecord
	e, err := b.kvHandle().Get(ctx, key)
	if isMissing(err) {
		return rec, nil
	}
	if err != nil {
		return rec, fmt.Errorf("get %s: %w", key, err)
	}
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return rec, fmt.Errorf("get %s: %w", key, err)
	}
	return rec, nil
}

// RecordWatchdogExit appends at to the recorded exits, keeping the last
// keep of them.
func (b *Bridge) RecordWatchdogExit(ctx context.Context, at time.Time, keep int) error {
	rec, err := b.WatchdogExits(ctx)
	if err != nil {
		return err
	}
	rec.Exits = append(rec.Exits, at.UTC())
	if n := len(rec.Exits); n > keep {
		rec.Exits = rec.Exits[n-keep:]
	}
	val, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("put %s: %w", WatchdogKey(b.table), err)
	}
	ctx, cancel := b.bound(ctx)
	defer cancel()
	if _, err := b.kvHandle().Put(ctx, WatchdogKey(b.table), val); err != nil {
		return fmt.Errorf("put %s: %w", WatchdogKey(b.table), err)
	}
	return nil
}
