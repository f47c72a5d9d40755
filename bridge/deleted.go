package bridge

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
)

// DeletedKeysPrefix starts the name of a table's deleted-keys bucket,
// followed by the table name reduced as DefaultDLQStream reduces it, and
// the first 8 characters of the Delta table's id.
const DeletedKeysPrefix = "deltaflow_deleted_"

// DeletedKeysBucket returns the name of the deleted-keys bucket of table,
// whose Delta table id (metaData.id) is tableID: a table made again under
// the same name (its directory deleted, a source re-snapshotted whose
// positions start over) has a new id, and remembers no delete of the
// table before it.
func DeletedKeysBucket(table, tableID string) string {
	id := []byte(tableID[:min(8, len(tableID))])
	for i, c := range id {
		if !isTokenByte(c) {
			id[i] = '_'
		}
	}
	return DeletedKeysPrefix + strings.TrimPrefix(DefaultDLQStream(table), DLQStreamPrefix) + "_" + string(id)
}

// deletedKeysInFlight bounds the KV requests a batch of keys has open at
// once: each is a round trip, and an epoch may ask thousands.
const deletedKeysInFlight = 32

// DeletedKeys is the KV bucket where an upsert table ordered by a
// sequence_by column remembers the sequence of each key it deleted, for
// retention after the delete (the bucket's max age): the value is the
// sequence in decimal, the KV key the row key's token (the token function
// given to Bridge.DeletedKeys), so `nats kv get
// deltaflow_deleted_ACCOUNTS_1b2c3d4e 42` reads key 42's.
//
// Most keys an epoch asks about were never deleted (every new key is one),
// so a filter in memory (seen) holding every token in the bucket, kept by
// a watcher of its keys and by Remember, answers them without a round
// trip; only a token the filter may hold is read from the bucket.
type DeletedKeys struct {
	b         *Bridge
	bucket    string
	retention time.Duration
	token     func(dst []byte, key string) []byte
	seen      *filter

	mu      sync.Mutex
	kv      jetstream.KeyValue
	watcher jetstream.KeyWatcher
}

// DeletedKeys opens the deleted-keys bucket of the table whose Delta id is
// tableID, creating it or updating its retention as needed, and fills its
// filter from the keys in it; keys are rendered as KV keys by token.
func (b *Bridge) DeletedKeys(ctx context.Context, tableID string, retention time.Duration, token func(dst []byte, key string) []byte) (*DeletedKeys, error) {
	d := &DeletedKeys{b: b, bucket: DeletedKeysBucket(b.table, tableID), retention: retention, token: token, seen: newFilter(deletedKeysFilterBits)}
	if err := d.ensure(ctx); err != nil {
		return nil, err
	}
	b.conn.mu.Lock()
	b.deleted = append(b.deleted, d)
	b.conn.mu.Unlock()
	return d, nil
}

// ensure creates or updates the bucket and (re)starts the watcher that
// fills the filter, waiting until it has seen every key already there.
func (d *DeletedKeys) ensure(ctx context.Context) error {
	bctx, cancel := d.b.bound(ctx)
	defer cancel()
	kv, err := d.b.js.CreateOrUpdateKeyValue(bctx, jetstream.KeyValueConfig{
		Bucket:      d.bucket,
		Description: "deltaflow: the sequences of keys table " + d.b.table + " deleted",
		History:     1,
		TTL:         d.retention,
		Replicas:    d.b.cfg.KVReplicas,
	})
	if err != nil {
		return fmt.Errorf("create kv bucket %s: %w", d.bucket, err)
	}
	// The watcher lives as long as the bridge (stop): not bound to ctx.
	w, err := kv.WatchAll(context.Background(), jetstream.MetaOnly())
	if err != nil {
		return fmt.Errorf("watch kv bucket %s: %w", d.bucket, err)
	}
	initial := make(chan struct{})
	go d.watch(w, initial)
	select {
	case <-initial:
	case <-bctx.Done():
		_ = w.Stop()
		return fmt.Errorf("read the keys of kv bucket %s: %w", d.bucket, bctx.Err())
	}
	d.mu.Lock()
	old := d.watcher
	d.kv, d.watcher = kv, w
	d.mu.Unlock()
	if old != nil {
		_ = old.Stop()
	}
	return nil
}

// watch adds every key the bucket holds or gets (from this process or
// another that deleted keys of a partition before it moved here) to the
// filter; initial is closed once the keys already there are in.
func (d *DeletedKeys) watch(w jetstream.KeyWatcher, initial chan struct{}) {
	for e := range w.Updates() {
		if e == nil {
			close(initial)
			continue
		}
		d.seen.add(e.Key())
	}
}

func (d *DeletedKeys) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.watcher != nil {
		_ = d.watcher.Stop()
		d.watcher = nil
	}
}

func (d *DeletedKeys) handle() jetstream.KeyValue {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.kv
}

// Sequences returns the remembered delete sequence of each of keys (the
// table's encoded row keys, as the result is keyed) that has one.
func (d *DeletedKeys) Sequences(ctx context.Context, keys []string) (map[string]int64, error) {
	var ask []string
	var buf []byte
	for _, k := range keys {
		buf = d.token(buf[:0], k)
		if d.seen.mayHold(buf) {
			ask = append(ask, k)
		}
	}
	var mu sync.Mutex
	out := map[string]int64{}
	err := d.each(ctx, ask, func(ctx context.Context, kv jetstream.KeyValue, key, token string) error {
		e, err := kv.Get(ctx, token)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return nil
		}
		if err != nil {
			return err
		}
		seq, err := strconv.ParseInt(string(e.Value()), 10, 64)
		if err != nil {
			return fmt.Errorf("not a sequence: %q", e.Value())
		}
		mu.Lock()
		out[key] = seq
		mu.Unlock()
		return nil
	})
	return out, err
}

// Remember stores each key's delete sequence (keyed by encoded row key),
// for the bucket's retention from now.
func (d *DeletedKeys) Remember(ctx context.Context, deletes map[string]int64) error {
	keys := make([]string, 0, len(deletes))
	for k := range deletes {
		keys = append(keys, k)
	}
	return d.each(ctx, keys, func(ctx context.Context, kv jetstream.KeyValue, key, token string) error {
		d.seen.add(token) // before the put: a lookup must never miss it
		_, err := kv.Put(ctx, token, strconv.AppendInt(nil, deletes[key], 10))
		return err
	})
}

// each runs op on every key (with its token), deletedKeysInFlight at a
// time, each bounded by the publish timeout. A bucket gone (deleted by
// hand, or the server lost its store) is created again once: what it
// remembered is lost, which the retention documents as possible.
func (d *DeletedKeys) each(ctx context.Context, keys []string, op func(ctx context.Context, kv jetstream.KeyValue, key, token string) error) error {
	if len(keys) == 0 {
		return nil
	}
	run := func() error {
		kv := d.handle()
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(deletedKeysInFlight)
		for _, key := range keys {
			token := string(d.token(nil, key))
			g.Go(func() error {
				ctx, cancel := d.b.bound(gctx)
				defer cancel()
				if err := op(ctx, kv, key, token); err != nil {
					return fmt.Errorf("bucket %s key %s: %w", d.bucket, token, err)
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

// deletedKeysFilterBits sizes a table's filter: 1 MiB, under 2% false
// positives up to a million remembered deletes; past that more lookups
// go to the bucket, and the answers stay exact.
const deletedKeysFilterBits = 1 << 23

// filterHashes is how many bits a token sets in the filter.
const filterHashes = 5

// filter is a Bloom filter of tokens, safe for concurrent use: mayHold is
// false only for a token never added.
type filter struct {
	seed maphash.Seed
	bits []atomic.Uint64
}

func newFilter(bits int) *filter {
	return &filter{seed: maphash.MakeSeed(), bits: make([]atomic.Uint64, bits/64)}
}

// positions calls f with each of the token's bit positions (double
// hashing over one 64-bit hash).
func (f *filter) positions(h uint64, fn func(word int, bit uint64) bool) bool {
	h1, h2 := uint32(h), uint32(h>>32)|1
	n := uint32(len(f.bits) * 64)
	for i := range uint32(filterHashes) {
		p := (h1 + i*h2) % n
		if !fn(int(p/64), 1<<(p%64)) {
			return false
		}
	}
	return true
}

func (f *filter) add(token string) {
	f.positions(maphash.String(f.seed, token), func(w int, bit uint64) bool {
		f.bits[w].Or(bit)
		return true
	})
}

func (f *filter) mayHold(token []byte) bool {
	return f.positions(maphash.Bytes(f.seed, token), func(w int, bit uint64) bool {
		return f.bits[w].Load()&bit != 0
	})
}
