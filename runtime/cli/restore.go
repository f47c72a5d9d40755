package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
)

// restoreFlags are restore's flags.
type restoreFlags struct {
	tableFlags
	to             int64
	timestamp      string
	dryRun, asJSON bool
}

func restoreCommand(out IO) *cobra.Command {
	var f restoreFlags
	cmd := maintenanceCommand("restore", "put the table back to an older version (Delta RESTORE)",
		`  deltaflow restore --table ./data/sensor_events --version 1 --dry-run
  deltaflow restore --table ./data/sensor_events --version 1`,
		&f.tableFlags, &f.dryRun, &f.asJSON,
		"show what would change, and refuse what the restore would refuse; write nothing",
		func(ctx context.Context) error { return runRestore(ctx, out, &f) })
	cmd.Long = "restore commits, as Spark's RESTORE TABLE does, the files live at the older version that are gone\n" +
		"since and removes those added since, with the version's schema and properties; the table's txn\n" +
		"actions (deltaflow's offsets) stay as they are. Give exactly one of --version and --timestamp."
	fs := cmd.Flags()
	atLeast(fs, &f.to, "version", -1, 0, "restore the table as it was at version `N`")
	fs.Lookup("version").DefValue = ""
	fs.StringVar(&f.timestamp, "timestamp", "", "restore the table as it was at this `time` (RFC 3339, 'YYYY-MM-DD HH:MM:SS' UTC, or a date): the last version committed at or before it")
	cmd.MarkFlagsOneRequired("version", "timestamp")
	cmd.MarkFlagsMutuallyExclusive("version", "timestamp")
	return cmd
}

// restoreJSON is `restore --json`: the plan, and the metrics under Spark's
// names for RESTORE's operationMetrics.
type restoreJSON struct {
	// Version is the latest version restored from; RestoredVersion the
	// version restored to; CommittedVersion the RESTORE commit, null on a
	// dry run.
	Version                int64               `json:"version"`
	RestoredVersion        int64               `json:"restoredVersion"`
	CommittedVersion       *int64              `json:"committedVersion"`
	DryRun                 bool                `json:"dryRun"`
	Restored               []restoreFileJSON   `json:"restored"`
	Removed                []restoreFileJSON   `json:"removed"`
	NumRestoredFiles       int                 `json:"numRestoredFiles"`
	RestoredFilesSize      int64               `json:"restoredFilesSize"`
	NumRemovedFiles        int                 `json:"numRemovedFiles"`
	RemovedFilesSize       int64               `json:"removedFilesSize"`
	NumOfFilesAfterRestore int                 `json:"numOfFilesAfterRestore"`
	TableSizeAfterRestore  int64               `json:"tableSizeAfterRestore"`
	Offsets                []restoreOffsetJSON `json:"offsets"`
}

// restoreFileJSON is a file restore re-adds or removes; DeletedRows is
// the cardinality of its deletion vector (the same path may be re-added
// with one vector and removed with another).
type restoreFileJSON struct {
	Path        string `json:"path"`
	Size        int64  `json:"size"`
	DeletedRows int64  `json:"deletedRows,omitempty"`
}

// restoreOffsetJSON is a Kafka partition whose offset in the table moved
// since the restored version: Restored is the next offset to read as that
// version recorded it (null when it held none), Kept the one the table keeps.
type restoreOffsetJSON struct {
	Partition int32  `json:"partition"`
	Restored  *int64 `json:"restored"`
	Kept      int64  `json:"kept"`
}

func runRestore(ctx context.Context, out IO, f *restoreFlags) error {
	var ts time.Time
	if f.timestamp != "" {
		var err error
		if ts, err = parseTimeFlag(f.timestamp); err != nil {
			return usagef("--timestamp: %v", err)
		}
	}
	// Probed on a dry run too: the real run refuses a store without
	// atomic put-if-absent, so the dry run must say so.
	tbl, latest, err := f.writable(ctx, out.Stderr, false)
	if err != nil {
		return err
	}
	nothing := func(err error) error { return fmt.Errorf("%w: restore goes back to an older version", err) }
	if f.timestamp == "" && f.to >= latest.Version() {
		// Refused as Restore refuses it, not as a version the log lacks.
		return nothing(fmt.Errorf("%w: version %d is not older than the latest version %d", delta.ErrNothingToRestore, f.to, latest.Version()))
	}
	var to *delta.Snapshot
	opts := delta.RestoreOptions{KeepProperty: ledger.IsOffsetsProperty, DryRun: f.dryRun}
	if f.timestamp != "" {
		to, err = tbl.SnapshotAtTime(ctx, ts)
		opts.Timestamp = sparkTimestamp(ts)
	} else {
		to, err = tbl.SnapshotAt(ctx, f.to)
	}
	if errors.Is(err, delta.ErrNoCommitBefore) {
		return fmt.Errorf("%w; deltaflow inspect history lists the versions there are and when they were committed", err)
	}
	if errors.Is(err, delta.ErrVersionNotFound) {
		return fmt.Errorf("%w: the log no longer holds it (its commits were cleaned up, delta.logRetentionDuration, and no checkpoint covers it); "+
			"deltaflow inspect history lists the versions there are", err)
	}
	if err != nil {
		return fmt.Errorf("read table %s: %w", f.uri, err)
	}
	from := latest.Version() // Restore advances latest to its commit
	res, err := tbl.Restore(ctx, latest, to, opts)
	switch {
	case errors.Is(err, delta.ErrNothingToRestore):
		return nothing(err)
	case errors.Is(err, delta.ErrRestoreFilesMissing):
		return fmt.Errorf("%w; restore a later version (deltaflow inspect history), or put the files back", err)
	case delta.IsConflict(err):
		return fmt.Errorf("%w; another writer committed while restore ran, and nothing was committed: stop it (deltaflow run) and run restore again", err)
	case err != nil:
		return err
	}
	cfg, err := f.load()
	if err != nil {
		return err
	}
	js := restoreJSON{Version: from, RestoredVersion: to.Version(), DryRun: f.dryRun,
		Restored: restoreFiles(res.Restored), Removed: restoreFiles(res.Removed),
		NumRestoredFiles: len(res.Restored), RestoredFilesSize: res.RestoredBytes,
		NumRemovedFiles: len(res.Removed), RemovedFilesSize: res.RemovedBytes,
		NumOfFilesAfterRestore: res.FilesAfter, TableSizeAfterRestore: res.BytesAfter,
		Offsets: movedOffsets(to, latest, cfg.Table.AppID, cfg.Kafka.Topic)}
	if !f.dryRun {
		js.CommittedVersion = &res.Version
	}
	if f.asJSON {
		return writeJSON(out.Stdout, js)
	}
	printRestore(out.Stdout, f, &js)
	return nil
}

// sparkTimestamp renders ts as Spark's RESTORE records its timestamp
// parameter (java.sql.Timestamp.toString in UTC): "2026-06-22 10:00:00.0".
func sparkTimestamp(ts time.Time) string {
	s := ts.UTC().Format("2006-01-02 15:04:05.999999999")
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

func restoreFiles(files []*delta.Add) []restoreFileJSON {
	out := make([]restoreFileJSON, 0, len(files))
	for _, a := range files {
		f := restoreFileJSON{Path: a.Path, Size: a.Size}
		if a.DeletionVector != nil {
			f.DeletedRows = a.DeletionVector.Cardinality
		}
		out = append(out, f)
	}
	return out
}

// movedOffsets lists the partitions whose deltaflow offset (of app and
// topic) differs between the restored version and the latest.
func movedOffsets(to, latest *delta.Snapshot, app, topic string) []restoreOffsetJSON {
	then, now := ledger.Last(to, app, topic), ledger.Last(latest, app, topic)
	out := []restoreOffsetJSON{}
	for _, p := range slices.Sorted(maps.Keys(now)) {
		o := restoreOffsetJSON{Partition: p, Kept: now[p] + 1}
		if v, ok := then[p]; ok {
			if v == now[p] {
				continue
			}
			next := v + 1
			o.Restored = &next
		}
		out = append(out, o)
	}
	return out
}

func (f restoreFileJSON) describe() string {
	if f.DeletedRows > 0 {
		return fmt.Sprintf("%s, deletion vector of %d rows", humanBytes(f.Size), f.DeletedRows)
	}
	return humanBytes(f.Size)
}

func printRestore(w io.Writer, f *restoreFlags, js *restoreJSON) {
	if js.DryRun {
		for _, r := range js.Restored {
			fmt.Fprintf(w, "would re-add %s (%s)\n", r.Path, r.describe())
		}
		for _, r := range js.Removed {
			fmt.Fprintf(w, "would remove %s (%s)\n", r.Path, r.describe())
		}
		fmt.Fprintf(w, "dry run: restoring version %d over version %d would re-add %d files (%s) and remove %d files (%s), "+
			"leaving %d files (%s); nothing written\n", js.RestoredVersion, js.Version, js.NumRestoredFiles, humanBytes(js.RestoredFilesSize),
			js.NumRemovedFiles, humanBytes(js.RemovedFilesSize), js.NumOfFilesAfterRestore, humanBytes(js.TableSizeAfterRestore))
	} else {
		fmt.Fprintf(w, "restored version %d as version %d: re-added %d files (%s), removed %d files (%s); %d files (%s) now\n",
			js.RestoredVersion, *js.CommittedVersion, js.NumRestoredFiles, humanBytes(js.RestoredFilesSize),
			js.NumRemovedFiles, humanBytes(js.RemovedFilesSize), js.NumOfFilesAfterRestore, humanBytes(js.TableSizeAfterRestore))
	}
	if len(js.Offsets) == 0 {
		return
	}
	// The records the removed files held are behind the offsets the table
	// keeps: run will not read them again unless told to.
	fmt.Fprintf(w, "deltaflow's offsets stay as they are (RESTORE keeps txn actions, as Spark's does), so run resumes after the records the removed files held:\n")
	var seek []string
	for _, o := range js.Offsets {
		from := "none"
		next := int64(0) // no offset then: from the log start (seek --force)
		if o.Restored != nil {
			from, next = fmt.Sprint(*o.Restored), *o.Restored
		}
		fmt.Fprintf(w, "  partition %d: next offset %s at version %d, %d kept\n", o.Partition, from, js.RestoredVersion, o.Kept)
		seek = append(seek, fmt.Sprintf("%d:%d", o.Partition, next))
	}
	table := "--table " + f.uri
	if f.config != "" {
		table = "--config " + f.config
	}
	fmt.Fprintf(w, "to ingest those records again, then run: deltaflow seek %s --offsets %s --force (with the brokers as for run)\n", table, strings.Join(seek, ","))
}
