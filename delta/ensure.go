package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Ensured says what Table.EnsureSchema changed.
type Ensured struct {
	// Created is set when the table was missing and this call created it
	// (not when a concurrent writer did).
	Created bool
	// Evolved is set when the schema was evolved, by the commit at
	// Version; Added are the columns that commit appended.
	Evolved bool
	Version int64
	Added   []string
}

// PartitioningError is EnsureSchema's refusal of partition columns other
// than the table's: existing files and readers depend on them.
type PartitioningError struct {
	Table, Want []string
}

func (e *PartitioningError) Error() string {
	return fmt.Sprintf("delta: partition columns %v wanted but the table is partitioned by %v (partitioning cannot change)",
		e.Want, e.Table)
}

// EnsureSchema readies the table for appends of rows of schema partitioned by
// partitionColumns, as a streaming writer does before it starts: a missing
// table is created with createConf as its configuration, and a schema that
// adds nullable columns (or relaxes nullability) to the table's is
// committed as a schema evolution. An incompatible change is refused with a
// *SchemaChangeError (a column's type) or a *PartitioningError, and nothing
// is committed. It returns the snapshot to append to.
func (t *Table) EnsureSchema(ctx context.Context, schema *StructType, partitionColumns []string, createConf map[string]string) (*Snapshot, Ensured, error) {
	var done Ensured
	uri := t.store.URI()
	snap, err := t.Snapshot(ctx)
	if errors.Is(err, ErrTableNotFound) {
		if _, err = t.Create(ctx, schema, partitionColumns, createConf); err != nil && !errors.Is(err, ErrTableExists) {
			return nil, done, fmt.Errorf("create table %s: %w", uri, err)
		}
		done.Created = err == nil
		snap, err = t.Snapshot(ctx) // ErrTableExists: another writer won the race
	}
	if err != nil {
		return nil, done, fmt.Errorf("load table %s: %w", uri, err)
	}
	if err := snap.CheckWrite(); err != nil {
		return nil, done, fmt.Errorf("table %s: %w", uri, err)
	}
	if have := snap.PartitionColumns(); !slices.Equal(have, partitionColumns) {
		return nil, done, &PartitioningError{Table: have, Want: partitionColumns}
	}
	current, err := snap.Schema()
	if err != nil {
		return nil, done, fmt.Errorf("table %s: %w", uri, err)
	}
	merged, changed, err := MergeSchema(current, schema)
	if err != nil {
		return nil, done, err // a *SchemaChangeError: names the column
	}
	if !changed {
		return snap, done, nil
	}
	for _, f := range merged.Fields {
		if current.Field(f.Name) == nil {
			done.Added = append(done.Added, f.Name)
		}
	}
	meta := snap.Metadata()
	// Under column mapping new columns need a physical name and an id.
	if merged, meta.Configuration, err = AssignColumnMapping(merged, meta.Configuration); err != nil {
		return nil, done, fmt.Errorf("evolve table schema: %w", err)
	}
	meta.SchemaString = merged.SchemaString()
	op := Operation{Name: "CHANGE COLUMN"}
	if len(done.Added) > 0 {
		op = Operation{Name: "ADD COLUMNS", Parameters: map[string]any{"columns": strings.Join(done.Added, ",")}}
	}
	if done.Version, err = t.Commit(ctx, snap, []Action{{MetaData: &meta}}, op); err != nil {
		return nil, done, fmt.Errorf("evolve table schema: %w", err)
	}
	done.Evolved = true
	return snap, done, nil
}
