package upsert

import (
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/messages/keylog"
)

// NewFile is a data file written for an epoch and not yet committed, with
// the keys of its rows in row order.
type NewFile struct {
	Add  *delta.Add
	Rows *keylog.Log
}

// Changes are what one epoch changes in a table in upsert mode: rows
// written to new data files, and keys deleted. A key's latest change (the
// highest sequence; at equal ones the later file row, then a delete) wins
// over its other changes in the epoch and over its rows in the table.
type Changes struct {
	Files   []NewFile
	Deletes keylog.Log
}

// resolveEntryMemory is what Resolve holds per change besides its key's
// bytes: a map entry (key header and winner, with the map's slack).
const resolveEntryMemory = 64

// ResolveMemory is what resolving the changes holds at most, for memory
// budgets: Resolve keeps one entry per change's key.
func (ch *Changes) ResolveMemory() int64 {
	n := int64(ch.Deletes.Len())*resolveEntryMemory + ch.Deletes.KeyBytes()
	for _, f := range ch.Files {
		n += int64(f.Rows.Len())*resolveEntryMemory + f.Rows.KeyBytes()
	}
	return n
}
