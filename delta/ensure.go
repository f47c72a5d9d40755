package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/deltaflow/deltaflow/delta/schema"
)

// Ensured says what Table.EnsureSchema changed.
type Ensured struct {
	// Created is set when the table was missing and this call created it
	// (not when a concurrent writer did).
	Created bool
	// Evolved is set when the schema was evolved, by the commit at
	// Version; Added are the columns that commit appended, Widened those
	// whose type it widened.
	Evolved bool
	Version int64
	Added   []string
	Widened []string
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

// FeatureNotEnabledError is EnsureSchema's refusal of an existing table
// whose protocol does not support the table feature a column's type
// needs: a timestamp_ntz column needs timestampNtz (reader 3 / writer 7).
// A new table gets the feature with its schema; an existing one only when
// its owner enables it, as Delta Spark requires
// (DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT): the upgrade locks out every
// reader and writer that does not know the feature.
type FeatureNotEnabledError struct {
	Table   string // the table's URI
	Column  string // the top-level column of that type
	Type    DataType
	Feature string
}

func (e *FeatureNotEnabledError) Error() string {
	return fmt.Sprintf("delta: column %q is %s, which needs table feature %s, and table %s does not support it: "+
		"enable it on the table first (Spark: ALTER TABLE delta.`%[4]s` SET TBLPROPERTIES ('delta.feature.%[3]s' = 'supported'); "+
		"delta-rs: DeltaTable(...).alter.add_feature(TableFeatures.TimestampWithoutTimezone, allow_protocol_versions_increase=True)); "+
		"readers and writers that do not know the feature can no longer use the table",
		e.Column, e.Type.String(), e.Feature, e.Table)
}

// checkTypeFeatures refuses a schema with a timestamp_ntz column for a
// table whose protocol does not support timestampNtz (a
// *FeatureNotEnabledError naming the first such column). Commits that
// change the metadata of a table add the feature themselves
// (requiredProtocol); EnsureSchema, which adds a streaming writer's
// columns to a table others own, asks first, as Spark does.
func checkTypeFeatures(uri string, p *Protocol, schema *StructType) error {
	isNTZ := func(t DataType) bool { return t == TimestampNTZ }
	for i := range tableFeatures {
		f := &tableFeatures[i]
		if f.name != "timestampNtz" || p.supports(f) {
			continue
		}
		for _, c := range schema.Fields {
			if anyType(c.Type, isNTZ) {
				return &FeatureNotEnabledError{Table: uri, Column: c.Name, Type: c.Type, Feature: f.name}
			}
		}
	}
	return nil
}

// EnsureSchema readies the table for appends of rows of schema next
// partitioned by partitionColumns, as a streaming writer does before it
// starts: a missing table is created with createConf as its configuration,
// and a schema that adds nullable columns (or relaxes nullability) to the
// table's, adds nullable fields to its struct columns (at any depth:
// schema.MergeSchema), or widens a data column's type where the table
// allows it (TypeWideningAllowed, schema.CanWiden), is committed as a
// schema evolution. An incompatible change is refused with a
// *SchemaChangeError (a column's type, a widening the table does not
// allow, a partition column's type) or a *PartitioningError, and nothing
// is committed; so is a timestamp_ntz column, new or not, of a table
// whose protocol lacks the timestampNtz feature (a *FeatureNotEnabledError:
// a table created here gets it). It returns the snapshot to append to.
func (t *Table) EnsureSchema(ctx context.Context, next *StructType, partitionColumns []string, createConf map[string]string) (*Snapshot, Ensured, error) {
	var done Ensured
	uri := t.store.URI()
	snap, err := t.Snapshot(ctx)
	if errors.Is(err, ErrTableNotFound) {
		if _, err = t.Create(ctx, next, partitionColumns, createConf); err != nil && !errors.Is(err, ErrTableExists) {
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
	for _, c := range partitionColumns {
		if cf, nf := current.Field(c), next.Field(c); cf != nil && nf != nil && schema.CanWiden(cf.Type, nf.Type) {
			return nil, done, &SchemaChangeError{Column: c, OldType: schema.TypeName(cf.Type), NewType: schema.TypeName(nf.Type),
				Reason: "deltaflow does not widen a partition column's type"}
		}
	}
	merged, changed, err := schema.MergeSchema(current, next, snap.TypeWideningAllowed())
	if err != nil {
		return nil, done, err // a *SchemaChangeError: names the column
	}
	if err := checkTypeFeatures(uri, snap.protocol, merged); err != nil {
		return nil, done, err
	}
	if !changed {
		return snap, done, nil
	}
	for _, f := range merged.Fields {
		switch cf := current.Field(f.Name); {
		case cf == nil:
			done.Added = append(done.Added, f.Name)
		case schema.CanWiden(cf.Type, f.Type): // not a struct's new fields
			done.Widened = append(done.Widened, f.Name)
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

// TypeWideningAllowed reports whether writers may widen a column's type:
// the table sets delta.enableTypeWidening and its protocol supports
// typeWidening (or its preview), as PROTOCOL.md "Type Widening" requires.
func (s *Snapshot) TypeWideningAllowed() bool {
	if !strings.EqualFold(s.metadata.Configuration[schema.EnableTypeWidening], "true") {
		return false
	}
	i := slices.IndexFunc(tableFeatures, func(f tableFeature) bool { return f.name == "typeWidening" })
	return s.protocol.supports(&tableFeatures[i])
}
