package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// OffsetRecord is the KV value of one partition's recovery offset, e.g.
// {"offset":41,"next":42,"version":7,"time":"2026-06-22T09:15:30Z"}. It is
// a hint for a fast start and for `nats kv watch`: the Delta log's txn
// actions are the authority, and recovery corrects the mirror when they
// differ.
type OffsetRecord struct {
	// Offset is the last Kafka offset committed to the table.
	Offset int64 `json:"offset"`
	// Next is the next offset to read (Offset + 1, PutOffset sets it): the
	// meaning the control service's status, inspect offsets and Kafka's
	// group offsets give "offset".
	Next int64 `json:"next"`
	// Version is the Delta table version whose commit holds Offset.
	Version int64 `json:"version"`
	// Time is when that version was committed.
	Time time.Time `json:"time"`
}

func (b *Bridge) kvHandle() jetstream.KeyValue {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.kv
}

// PutOffset stores rec as the recovery offset of topic/partition. Writes are
// latest-wins (a plain Put, no revision check): the mirror only has to end up
// equal to the last commit, and the committer is its only writer per table.
func (b *Bridge) PutOffset(ctx context.Context, topic string, partition int32, rec OffsetRecord) error {
	key := OffsetKey(b.table, topic, partition)
	rec.Next = rec.Offset + 1
	val, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("put offset %s: %w", key, err)
	}
	ctx, cancel := b.bound(ctx)
	defer cancel()
	_, err = b.kvHandle().Put(ctx, key, val)
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		// No stream behind the bucket's subjects: the bucket was deleted
		// (or the server lost its store). Recreate it so the mirror heals;
		// if JetStream is just restarting this fails the same way.
		if e := b.ensureKV(ctx); e == nil {
			_, err = b.kvHandle().Put(ctx, key, val)
		}
	}
	if err != nil {
		return fmt.Errorf("put offset %s: %w", key, err)
	}
	return nil
}

// Offsets returns the mirrored recovery offsets of topic by partition. A
// missing bucket or key is not an error: the result is then empty (or lacks
// that partition) and recovery relies on the Delta log alone.
func (b *Bridge) Offsets(ctx context.Context, topic string) (map[int32]OffsetRecord, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	out, err := readOffsets(ctx, b.kvHandle(), b.table, topic)
	if isMissing(err) {
		return map[int32]OffsetRecord{}, nil
	}
	return out, err
}

// ReadOffsets reads the mirrored offsets of table's topic from the bucket
// over nc, for tools: unlike New it creates nothing, and a missing bucket
// is an error.
func ReadOffsets(ctx context.Context, nc *nats.Conn, bucket, table, topic string) (map[int32]OffsetRecord, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", bucket, err)
	}
	return readOffsets(ctx, kv, table, topic)
}

// OffsetKeyPrefix is the prefix of the KV keys of table's topic,
// "<table>.<topic>.", which the partition follows.
func OffsetKeyPrefix(table, topic string) string {
	key := OffsetKey(table, topic, 0)
	return key[:len(key)-1]
}

// readOffsets reads the offsets of table's topic from kv.
func readOffsets(ctx context.Context, kv jetstream.KeyValue, table, topic string) (map[int32]OffsetRecord, error) {
	prefix := OffsetKeyPrefix(table, topic)
	out := make(map[int32]OffsetRecord)
	// One watcher delivers every current value, then nil: a single pass
	// instead of listing keys and getting each.
	w, err := kv.WatchFiltered(ctx, []string{prefix + "*"}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("watch offsets %s*: %w", prefix, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("read offsets %s*: %w", prefix, ctx.Err())
		case entry, ok := <-w.Updates():
			if !ok || entry == nil {
				return out, nil
			}
			p, err := strconv.ParseInt(strings.TrimPrefix(entry.Key(), prefix), 10, 32)
			if err != nil {
				continue // not one of ours (written by hand)
			}
			var rec OffsetRecord
			if err := json.Unmarshal(entry.Value(), &rec); err != nil {
				return nil, fmt.Errorf("decode offset %s: %w", entry.Key(), err)
			}
			out[int32(p)] = rec
		}
	}
}

// DeleteOffset removes the mirrored offset of topic/partition (partition
// revoked for good, topic removed). Deleting a missing key is not an error.
func (b *Bridge) DeleteOffset(ctx context.Context, topic string, partition int32) error {
	key := OffsetKey(b.table, topic, partition)
	ctx, cancel := b.bound(ctx)
	defer cancel()
	if err := b.kvHandle().Delete(ctx, key); err != nil && !isMissing(err) {
		return fmt.Errorf("delete offset %s: %w", key, err)
	}
	return nil
}

// isMissing reports the not-found family: no bucket, no key, no keys.
func isMissing(err error) bool {
	return errors.Is(err, jetstream.ErrKeyNotFound) ||
		errors.Is(err, jetstream.ErrNoKeysFound) ||
		errors.Is(err, jetstream.ErrBucketNotFound) ||
		errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, nats.ErrStreamNotFound) || // KV watchers still use the legacy API
		errors.Is(err, jetstream.ErrKeyDeleted)
}
