package messages

import (
	"github.com/deltaflow/deltaflow/messages/keylog"
	"github.com/deltaflow/deltaflow/messages/letter"
)

// Seal is sent by the committer to every reader to close epoch Epoch: the
// reader answers Sealed and tags the rows it routes from then on with
// Epoch+1. Retire lists buffer keys the reader must forget before answering
// (the buffers are being stopped; later rows go to fresh buffers).
type Seal struct {
	Gen    uint64
	Epoch  uint64
	Retire []string
}

// Sealed is sent by a reader to the committer once it tags new rows with
// Epoch+1. LastOffset is the offset of the last record the reader consumed
// in epochs up to Epoch (routed or dead-lettered), or -1 if it consumed none
// in this epoch; DeadLetters are the records of the epoch that could not be
// mapped; Deletes, for a table in upsert mode, the keys its records deleted.
type Sealed struct {
	Gen         uint64
	Epoch       uint64
	Topic       string
	Partition   int32
	LastOffset  int64
	Records     int64
	DeadLetters []DeadLetter
	Deletes     *keylog.Log
}

// Flush is sent by the committer to every live buffer once all readers
// sealed Epoch: the buffer writes its rows of epochs up to Epoch as data
// files, uploads them and answers Flushed, keeping rows of later epochs.
type Flush struct {
	Gen   uint64
	Epoch uint64
}

// Flushed is sent by a buffer to the committer when the files of Epoch are
// uploaded (or failed to upload: Err). Idle reports that the buffer held no
// rows for the epoch.
type Flushed struct {
	Gen    uint64
	Epoch  uint64
	Buffer string // the buffer actor's id (its PID Id), not a partition key
	Files  []DataFile
	Idle   bool
	Err    error
}

// DataFile describes an uploaded (not yet committed) data file, as its Delta
// add action will.
type DataFile struct {
	Path             string // relative URI, as add.path
	Size             int64
	PartitionValues  map[string]*string
	ModificationTime int64 // ms
	Stats            string
	Rows             int64
	// Keys, for a table in upsert mode, are the keys of its rows in row
	// order, each with its change's sequence.
	Keys *keylog.Log
}

// DeadLetter is a record that did not become a row (letter.DeadLetter):
// one type from the reader that captures it to the DLQ stream that stores
// it.
type DeadLetter = letter.DeadLetter
