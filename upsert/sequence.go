package upsert

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta"
)

// ErrNullSequence is the error of a change whose sequence_by column is
// null: it cannot be ordered against the key's other changes, and goes to
// the DLQ.
var ErrNullSequence = errors.New("the sequence_by column is null")

// sequenceTypes are the column types that order changes: numbers, and
// dates and timestamps by their integer encoding.
var sequenceTypes = []delta.PrimitiveType{delta.Integer, delta.Long, delta.Date, delta.Timestamp, delta.TimestampNTZ}

// Sequence is the column of an upsert table that orders the changes of a
// key (`sequence_by`): the change with the highest value wins, whenever
// it arrives; at equal values the later record does. The table keeps the
// column, so a late change older than the key's row there is ignored.
type Sequence struct {
	name string
	leaf int
}

// NewSequence returns the sequence column name of a table whose data
// columns are data.
func NewSequence(data *delta.StructType, name string) (*Sequence, error) {
	leaf, typ := dataLeaf(data, name)
	switch {
	case leaf < 0:
		return nil, fmt.Errorf("column %q is not a data column", name)
	case !slices.Contains(sequenceTypes, typ):
		return nil, fmt.Errorf("column %q is %v: a sequence is an integer, long, date or timestamp", name, data.Field(name).Type)
	}
	return &Sequence{name: name, leaf: leaf}, nil
}

// Name is the column's.
func (s *Sequence) Name() string { return s.name }

// Row is the sequence of a mapped row (data columns).
func (s *Sequence) Row(row parquet.Row) (int64, error) {
	n, ok := sequenceValue(row[s.leaf])
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrNullSequence, s.name)
	}
	return n, nil
}

// sequenceValue is v as a sequence; false when null.
func sequenceValue(v parquet.Value) (int64, bool) {
	switch v.Kind() {
	case parquet.Int32:
		return int64(v.Int32()), true
	case parquet.Int64:
		return v.Int64(), true
	}
	return 0, false
}

// DeletedKeys remembers the sequences of deleted keys for a table with a
// sequence column, so that a change older than a key's delete that
// arrives after it does not bring the key back. Keys are encoded keys
// (Keys); an implementation that stores them by name renders them with
// AppendToken.
type DeletedKeys interface {
	// Sequences returns the remembered delete sequence of each of keys
	// that has one.
	Sequences(ctx context.Context, keys []string) (map[string]int64, error)
	// Remember stores each key's delete sequence.
	Remember(ctx context.Context, deletes map[string]int64) error
}
