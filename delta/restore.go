package delta

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/deltaflow/deltaflow/storage"
)

// ErrRestoreFilesMissing is wrapped by the *MissingFilesError Restore
// returns when a file the restored version needs is gone from the store.
var ErrRestoreFilesMissing = errors.New("delta: files the restored version needs are missing")

// ErrNothingToRestore is returned by Restore for a version at or after the
// latest: as Spark, RESTORE only goes back.
var ErrNothingToRestore = errors.New("delta: nothing to restore")

// MissingFilesError lists the data and deletion vector files of the version
// being restored that no longer exist (VACUUM deleted them, or someone did
// by hand): restoring would leave the table naming files nobody can read.
type MissingFilesError struct {
	Version int64
	Paths   []string // as in the log (data files) or the storage key (deletion vectors), sorted
}

func (e *MissingFilesError) Error() string {
	const show = 10
	names := e.Paths[:min(len(e.Paths), show)]
	more := ""
	if len(e.Paths) > show {
		more = fmt.Sprintf(" and %d more", len(e.Paths)-show)
	}
	return fmt.Sprintf("delta: %d files of version %d are gone (vacuumed or deleted): %s%s",
		len(e.Paths), e.Version, strings.Join(names, ", "), more)
}

func (e *MissingFilesError) Unwrap() error { return ErrRestoreFilesMissing }

// clusteringDomain is the domain metadata of liquid clustering's columns.
const clusteringDomain = "delta.clustering"

// RestoreOptions configures Restore.
type RestoreOptions struct {
	// Timestamp is the time the version was chosen by, as the user gave
	// it; it goes into the commit's operationParameters instead of the
	// version, as Spark's RESTORE ... TO TIMESTAMP AS OF records it.
	Timestamp string
	// KeepProperty reports the table properties that stay as they are in
	// the latest metadata, not as they were at the restored version:
	// properties describing the txn state, which RESTORE keeps.
	KeepProperty func(key string) bool
	// DryRun plans and checks everything without committing.
	DryRun bool
}

// RestoreResult reports what Restore committed (or would commit), with the
// metrics Spark's RESTORE records.
type RestoreResult struct {
	// Version is the committed version, -1 on a dry run.
	Version int64
	// Restored are the files of the restored version the latest lacks,
	// re-added; Removed the latest's files the restored version lacks.
	Restored, Removed           []*Add
	RestoredBytes, RemovedBytes int64
	// FilesAfter and BytesAfter describe the table after the restore.
	FilesAfter int
	BytesAfter int64
}

// Restore puts the table back to the state of snapshot to, an older version
// of the table whose latest snapshot is latest, as Spark's RESTORE does: one
// commit (operation RESTORE) re-adds, with dataChange=true and their stats,
// partition values, tags, deletion vectors and row IDs as they were, the
// files live at to.Version() that are not live now, and removes the live
// files to.Version() lacks; files are matched by path and deletion vector.
// The commit carries to's metadata (with the latest's properties
// KeepProperty names) and the protocol merged from both versions (never a
// downgrade). Txn actions are not touched, as Spark leaves them: the
// latest version per application stays.
//
// Restore refuses, before committing (also on a dry run): a version that
// is not older than latest (ErrNothingToRestore); a restored file or
// deletion vector that is gone from the store (*MissingFilesError naming
// them); a change of the clustering columns in between; a table whose
// features refuse OpRestore; an append-only table. Like Spark's
// commitLarge, the commit is not retried: a concurrent commit aborts it
// with a *ConflictError, and nothing is written.
func (t *Table) Restore(ctx context.Context, latest, to *Snapshot, opts RestoreOptions) (*RestoreResult, error) {
	if to.version >= latest.version {
		return nil, fmt.Errorf("%w: version %d is not older than the latest version %d", ErrNothingToRestore, to.version, latest.version)
	}
	fail := func(err error) (*RestoreResult, error) {
		return nil, fmt.Errorf("restore to version %d: %w", to.version, err)
	}
	if err := latest.Check(OpRestore); err != nil {
		return fail(err)
	}
	if err := to.Check(OpRestore); err != nil {
		return fail(err)
	}
	if a, b := latest.domains[clusteringDomain], to.domains[clusteringDomain]; a != b {
		return fail(fmt.Errorf("the clustering columns changed since (domain %s: %q then, %q now); restoring them is not implemented",
			clusteringDomain, b.Configuration, a.Configuration))
	}
	res := &RestoreResult{Version: -1, FilesAfter: len(to.files)}
	for k, a := range to.files {
		res.BytesAfter += a.Size
		if latest.files[k] == nil {
			res.Restored = append(res.Restored, a)
			res.RestoredBytes += a.Size
		}
	}
	for k, a := range latest.files {
		if to.files[k] == nil {
			res.Removed = append(res.Removed, a)
			res.RemovedBytes += a.Size
		}
	}
	byPath := func(a, b *Add) int { return strings.Compare(a.Path, b.Path) }
	slices.SortFunc(res.Restored, byPath)
	slices.SortFunc(res.Removed, byPath)
	if err := t.checkRestorable(ctx, to, res.Restored); err != nil {
		return fail(err)
	}
	actions := restoreActions(latest, to, res, t.now().UnixMilli(), opts.KeepProperty)
	// The commit's own checks (append-only, the protocol the metadata
	// needs), made here so that a dry run refuses what the commit would.
	checked, err := withRequiredProtocol(latest, actions)
	if err != nil {
		return fail(err)
	}
	if _, _, err := checkActions(latest, checked); err != nil {
		return fail(err)
	}
	if opts.DryRun {
		return res, nil
	}
	params := map[string]any{"version": to.version, "timestamp": nil}
	if opts.Timestamp != "" {
		params = map[string]any{"version": nil, "timestamp": opts.Timestamp}
	}
	v, err := t.commit(ctx, latest, actions, Operation{Name: "RESTORE", Parameters: params, Metrics: map[string]any{
		"numRestoredFiles": itoa(int64(len(res.Restored))), "restoredFilesSize": itoa(res.RestoredBytes),
		"numRemovedFiles": itoa(int64(len(res.Removed))), "removedFilesSize": itoa(res.RemovedBytes),
		"numOfFilesAfterRestore": itoa(int64(res.FilesAfter)), "tableSizeAfterRestore": itoa(res.BytesAfter),
	}}, 1)
	if err != nil {
		return fail(err)
	}
	res.Version = v
	return res, nil
}

// restoreActions are the RESTORE commit's actions: the merged protocol,
// to's metadata, the re-added files and the removes, stamped at nowMs.
func restoreActions(latest, to *Snapshot, res *RestoreResult, nowMs int64, keep func(string) bool) []Action {
	meta := to.Metadata()
	meta.Configuration = maps.Clone(meta.Configuration)
	if keep != nil {
		maps.DeleteFunc(meta.Configuration, func(k, _ string) bool { return keep(k) })
		for k, v := range latest.metadata.Configuration {
			if keep(k) {
				if meta.Configuration == nil {
					meta.Configuration = map[string]string{}
				}
				meta.Configuration[k] = v
			}
		}
	}
	actions := make([]Action, 0, 2+len(res.Restored)+len(res.Removed))
	actions = append(actions, Action{Protocol: mergeProtocols(to.protocol, latest.protocol)}, Action{MetaData: &meta})
	for _, a := range res.Restored {
		add := *a
		add.DataChange = true
		actions = append(actions, Action{Add: &add})
	}
	for _, a := range res.Removed {
		actions = append(actions, Action{Remove: a.removeAt(nowMs, true)})
	}
	return actions
}

// removeAt is the remove action of a live file, deleted at ms, carrying the
// add's metadata as Spark's removeWithTimestamp does.
func (a *Add) removeAt(ms int64, dataChange bool) *Remove {
	size, ext := a.Size, true
	return &Remove{
		Path: a.Path, DeletionTimestamp: &ms, DataChange: dataChange, ExtendedFileMetadata: &ext,
		PartitionValues: a.PartitionValues, Size: &size, Stats: a.Stats, Tags: a.Tags, DeletionVector: a.DeletionVector,
		BaseRowID: a.BaseRowID, DefaultRowCommitVersion: a.DefaultRowCommitVersion,
	}
}

// mergeProtocols is the protocol supporting everything a and b support, as
// Spark's Protocol.merge: the higher versions, and at reader 3 / writer 7
// the union of both features lists with the features legacy versions imply.
func mergeProtocols(a, b *Protocol) *Protocol {
	m := &Protocol{MinReaderVersion: max(a.MinReaderVersion, b.MinReaderVersion), MinWriterVersion: max(a.MinWriterVersion, b.MinWriterVersion)}
	union := func(lists ...[]string) []string {
		out := slices.Sorted(slices.Values(slices.Concat(lists...)))
		return slices.Compact(out)
	}
	if m.MinReaderVersion >= 3 {
		m.ReaderFeatures = union(a.readerFeatureSet(), b.readerFeatureSet())
	}
	if m.MinWriterVersion >= 7 {
		m.WriterFeatures = union(a.writerFeatureSet(), b.writerFeatureSet())
	}
	same := func(x, y []string) bool { return slices.Equal(union(x), union(y)) }
	if m.MinReaderVersion == b.MinReaderVersion && m.MinWriterVersion == b.MinWriterVersion &&
		same(m.ReaderFeatures, b.ReaderFeatures) && same(m.WriterFeatures, b.WriterFeatures) {
		return b // b already supports everything: keep it as written
	}
	return m
}

// checkRestorable checks that every file to re-add, and its deletion vector
// file, still exists in the store; a *MissingFilesError lists those that do
// not. A file outside the table root cannot be checked through the table's
// store and is refused as missing, naming it.
func (t *Table) checkRestorable(ctx context.Context, to *Snapshot, files []*Add) error {
	var (
		mu      sync.Mutex
		missing []string
	)
	miss := func(name string) {
		mu.Lock()
		missing = append(missing, name)
		mu.Unlock()
	}
	exists := func(ctx context.Context, key string) (bool, error) {
		_, err := t.store.Stat(ctx, key)
		if errors.Is(err, storage.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, a := range files {
		g.Go(func() error {
			key, err := to.root.key(a.Path)
			if errors.Is(err, ErrOutsideTable) {
				miss(a.Path + " (outside the table root)")
				return nil
			}
			if err != nil {
				return err
			}
			if ok, err := exists(gctx, key); err != nil {
				return fmt.Errorf("check %s: %w", a.Path, err)
			} else if !ok {
				miss(a.Path)
			}
			if a.DeletionVector == nil {
				return nil
			}
			loc, ok, err := to.root.dvFile(a.DeletionVector)
			switch {
			case err != nil:
				return fmt.Errorf("deletion vector of %s: %w", a.Path, err)
			case !ok:
				return nil // inline
			case loc.kind != pathInside:
				miss(loc.path + " (deletion vector of " + a.Path + ", outside the table root)")
				return nil
			}
			if ok, err := exists(gctx, loc.path); err != nil {
				return fmt.Errorf("check deletion vector %s: %w", loc.path, err)
			} else if !ok {
				miss(loc.path + " (deletion vector of " + a.Path + ")")
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return &MissingFilesError{Version: to.version, Paths: missing}
	}
	return nil
}
