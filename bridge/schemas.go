package bridge

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// schemaKeyPrefix is where the schema store's entries live in the KV
// bucket: no table's key starts with it (a table's keys start with its
// name, and no table is named so).
const schemaKeyPrefix = "_deltaflow_schemas."

// SchemaStore keeps the writer schemas fetched from a schema registry in
// the KV bucket, so that a restart while the registry is down still
// decodes every schema id seen before (schemareg.Store). Process-wide:
// every table reading the registry shares it.
type SchemaStore struct {
	b      *Bridge
	prefix string
}

// SchemaStore returns the bridge's store of the schemas of registry
// (a token naming it: two registries' ids are not each other's).
func (b *Bridge) SchemaStore(registry string) *SchemaStore {
	return &SchemaStore{b: b, prefix: schemaKeyPrefix + Token(registry) + "."}
}

// Load returns every entry stored, by key.
func (s *SchemaStore) Load(ctx context.Context) (map[string]string, error) {
	ctx, cancel := s.b.bound(ctx)
	defer cancel()
	out := map[string]string{}
	// One watcher delivers every current value, then nil.
	w, err := s.b.kvHandle().WatchFiltered(ctx, []string{s.prefix + ">"}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("watch %s>: %w", s.prefix, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("read %s>: %w", s.prefix, ctx.Err())
		case entry, ok := <-w.Updates():
			if !ok || entry == nil {
				return out, nil
			}
			out[strings.TrimPrefix(entry.Key(), s.prefix)] = string(entry.Value())
		}
	}
}

// Save stores an entry.
func (s *SchemaStore) Save(ctx context.Context, key, value string) error {
	ctx, cancel := s.b.bound(ctx)
	defer cancel()
	if _, err := s.b.kvHandle().Put(ctx, s.prefix+key, []byte(value)); err != nil {
		return fmt.Errorf("put %s%s: %w", s.prefix, key, err)
	}
	return nil
}
