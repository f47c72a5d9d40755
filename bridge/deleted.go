package bridge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
)

// DeletedKeysPrefix starts the name of a table's deleted-keys bucket,
// followed by the table name reduced as DefaultDLQStream reduces it.
const DeletedKeysPrefix = "deltaflow_deleted_"

// DeletedKeysBucket returns the name of table's deleted-keys bucket.
func DeletedKeysBucket(table string) string {
	return DeletedKeysPrefix + strings.TrimPrefix(DefaultDLQStream(table), DLQStreamPrefix)
}

// deletedKeysInFlight bounds the KV requests a batch of keys has open at
// once: each is a round trip, and an epoch may ask thousands.
const deletedKeysInFlight = 32

// DeletedKeys is the KV bucket where an upsert table ordered by a
// sequence_by column remembers the sequence of each key it deleted, for
// retention after the delete (the bucket's max age): the value is the
// sequence in decimal, the key the row key's token, so `nats kv get
// deltaflow_deleted_ACCOUNTS 42` reads key 42's.
type DeletedKeys struct {
	b         *Bridge
	bucket    string
	retention time.Duration

	mu sync.Mutex
	kv jetstream.KeyValue
}

// DeletedKeys opens the table's deleted-keys bucket, creating it, or
// updating its retention, as needed.
func (b *Bridge) DeletedKeys(ctx context.Context, retention time.Duration) (*DeletedKeys, error) {
	d := &DeletedKeys{b: b, bucket: DeletedKeysBucket(b.table), retention: retention}
	if err := d.ensure(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *DeletedKeys) ensure(ctx context.Context) error {
	ctx, cancel := d.b.bound(ctx)
	defer cancel()
	kv, err := d.b.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      d.bucket,
		Description: "deltaflow: the sequences of keys table " + d.b.table + " deleted",
		History:     1,
		TTL:         d.retention,
		Replicas:    d.b.cfg.KVReplicas,
	})
	if err != nil {
		return fmt.Errorf("create kv bucket %s: %w", d.bucket, err)
	}
	d.mu.Lock()
	d.kv = kv
	d.mu.Unlock()
	return nil
}

func (d *DeletedKeys) handle() jetstream.KeyValue {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.kv
}

// Sequences returns the remembered delete sequence of each of keys that
// has one.
func (d *DeletedKeys) Sequences(ctx context.Context, keys []string) (map[string]int64, error) {
	var mu sync.Mutex
	out := map[string]int64{}
	err := d.each(ctx, keys, func(ctx context.Context, kv jetstream.KeyValue, key string) error {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return nil
		}
		if err != nil {
			return err
		}
		seq, err := strconv.ParseInt(string(e.Value()), 10, 64)
		if err != nil {
			return fmt.Errorf("%s: not a sequence: %q", key, e.Value())
		}
		mu.Lock()
		out[key] = seq
		mu.Unlock()
		return nil
	})
	return out, err
}

// Remember stores each key's delete sequence, for the bucket's retention
// from now.
func (d *DeletedKeys) Remember(ctx context.Context, deletes map[string]int64) error {
	keys := make([]string, 0, len(deletes))
	for k := range deletes {
		keys = append(keys, k)
	}
	return d.each(ctx, keys, func(ctx context.Context, kv jetstream.KeyValue, key string) error {
		_, err := kv.Put(ctx, key, strconv.AppendInt(nil, deletes[key], 10))
		return err
	})
}

// each runs op on every key, deletedKeysInFlight at a time. A bucket gone
// (deleted by hand, or the server lost its store) is created again once:
// what it remembered is lost, which the retention documents as possible.
func (d *DeletedKeys) each(ctx context.Context, keys []string, op func(context.Context, jetstream.KeyValue, string) error) error {
	run := func() error {
		kv := d.handle()
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(deletedKeysInFlight)
		for _, key := range keys {
			g.Go(func() error {
				ctx, cancel := d.b.bound(gctx)
				defer cancel()
				if err := op(ctx, kv, key); err != nil {
					return fmt.Errorf("bucket %s key %s: %w", d.bucket, key, err)
				}
				return nil
			})
		}
		return g.Wait()
	}
	err := run()
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrBucketNotFound) ||
		errors.Is(err, jetstream.ErrStreamNotFound) {
		if e := d.ensure(ctx); e == nil {
			err = run()
		}
	}
	return err
}
