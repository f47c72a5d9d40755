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
