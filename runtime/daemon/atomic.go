package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/deltaflow/deltaflow/storage"
)

// SingleWriterEnv overrides storage.single_writer (and is the default of the
// table commands' --single-writer).
const SingleWriterEnv = "DELTAFLOW_SINGLE_WRITER"

// CheckAtomicCommits probes the table's store before anything writes it
// (run, optimize, vacuum). Delta's optimistic concurrency rests on
// put-if-absent: on a store that overwrites instead, two writers committing
// the same version both succeed and one commit silently replaces the other.
// Such a store is refused with an error naming it, unless singleWriter
// promises that nothing else writes the table; then it is only logged.
func CheckAtomicCommits(ctx context.Context, store storage.Store, singleWriter bool, logger *slog.Logger) error {
	err := storage.ProbePutIfAbsent(ctx, store)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, storage.ErrNotAtomic):
		return fmt.Errorf("check table storage: %w", err)
	case singleWriter:
		logger.Warn("the table's store does not honour put-if-absent; writing anyway in single-writer mode "+
			"(a second writer would silently overwrite commits)", "err", err)
		return nil
	}
	return fmt.Errorf("%w; refusing to write the table: two writers could commit the same Delta version and one "+
		"would silently replace the other. If this process is the table's only writer, opt in to single-writer mode "+
		"(storage.single_writer: true, %s=true, or --single-writer)", err, SingleWriterEnv)
}
