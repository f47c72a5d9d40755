package delta

import (
	"errors"
	"fmt"
	"strings"
)

// ErrTableNotFound is returned when the location holds no Delta log.
var ErrTableNotFound = errors.New("delta: table not found")

// ErrTableExists is returned by Create when version 0 already exists.
var ErrTableExists = errors.New("delta: table already exists")

// ErrVersionNotFound is returned when time travel asks for a version or time
// the log can no longer (or cannot yet) reconstruct.
var ErrVersionNotFound = errors.New("delta: version not found")

// ErrNoCommitBefore is wrapped with ErrVersionNotFound by SnapshotAtTime for
// a time before every commit the log holds (before the table existed, or
// before its oldest commit kept).
var ErrNoCommitBefore = errors.New("no commit at or before")

// ErrVersionGap is wrapped when the log's commit files are not contiguous.
var ErrVersionGap = errors.New("delta: log has a version gap")

// UnsupportedError reports a table this library must not read or write: a
// reader/writer version or a table feature it does not implement, or one
// that is active and that Op does not honour.
type UnsupportedError struct {
	Op       Op   // the refused operation; "" means read or (Write) append
	Write    bool // false: reading is refused; true: only writing is
	Version  int32
	Features []string
	// Detail says, per feature, why the operation is refused and where the
	// feature is in use: "checkConstraints: CHECK constraints are not
	// evaluated (positive)".
	Detail string
}

func (e *UnsupportedError) Error() string {
	op := e.Op
	if op == "" {
		op = OpRead
		if e.Write {
			op = OpAppend
		}
	}
	if len(e.Features) > 0 {
		msg := fmt.Sprintf("delta: cannot %s table: table features %s not supported for %s", op, strings.Join(e.Features, ", "), op)
		if e.Detail != "" {
			msg += " (" + e.Detail + ")"
		}
		return msg
	}
	return fmt.Sprintf("delta: cannot %s table: protocol version %d is not supported", op, e.Version)
}

// ConflictError reports a commit that lost a race against a concurrent
// commit it cannot be reconciled with; the caller must re-read the table and
// decide again. Kind says what conflicted.
type ConflictError struct {
	Kind    ConflictKind
	Version int64  // the winning commit's version
	AppID   string // for ConflictTxn: the application id both committed
	Path    string // for ConflictDelete: the file both removed
}

// ConflictKind classifies a ConflictError.
type ConflictKind int

// The conflict kinds.
const (
	// ConflictMetadata: a concurrent commit changed metaData or protocol.
	ConflictMetadata ConflictKind = iota + 1
	// ConflictTxn: a concurrent commit wrote a txn for one of our appIds.
	ConflictTxn
	// ConflictDelete: a concurrent commit removed a file this commit removes.
	ConflictDelete
	// ConflictRetries: too many concurrent commits; retries ran out.
	ConflictRetries
)

func (e *ConflictError) Error() string {
	switch e.Kind {
	case ConflictMetadata:
		return fmt.Sprintf("delta: concurrent commit %d changed the table metadata or protocol", e.Version)
	case ConflictTxn:
		return fmt.Sprintf("delta: concurrent commit %d wrote a transaction for app id %q", e.Version, e.AppID)
	case ConflictDelete:
		return fmt.Sprintf("delta: concurrent commit %d removed file %q", e.Version, e.Path)
	default:
		return fmt.Sprintf("delta: gave up after concurrent commits up to version %d", e.Version)
	}
}

// IsConflict reports whether err is a commit conflict of one of the kinds
// (any kind when none are given).
func IsConflict(err error, kinds ...ConflictKind) bool {
	var ce *ConflictError
	if !errors.As(err, &ce) {
		return false
	}
	if len(kinds) == 0 {
		return true
	}
	for _, k := range kinds {
		if ce.Kind == k {
			return true
		}
	}
	return false
}
