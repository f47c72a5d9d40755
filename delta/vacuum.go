package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/deltaflow/deltaflow/storage"
)

// ErrRetentionTooShort is returned by Vacuum when the retention is shorter
// than the table's delta.deletedFileRetentionDuration and Force is not set:
// a concurrent reader or writer may still need those files.
var ErrRetentionTooShort = errors.New("delta: vacuum retention is shorter than the table's deleted file retention")

// VacuumOptions configures Vacuum.
type VacuumOptions struct {
	// Retention keeps files removed (or written) less than this long ago;
	// 0 means the table's delta.deletedFileRetentionDuration (default 7 days).
	Retention time.Duration
	// Force allows a retention shorter than the table's (Spark's
	// retentionDurationCheck.enabled=false).
	Force bool
	// DryRun lists the files without deleting them or committing.
	DryRun bool
}

// VacuumResult lists what Vacuum deleted (or would delete).
type VacuumResult struct {
	Files  []string // storage keys, sorted
	Bytes  int64
	DryRun bool
}

// Vacuum deletes data files that no version within the retention period
// references: files that are neither live in s nor tombstoned after the
// cutoff, including orphans no commit ever referenced, when they are older
// than the cutoff, and change data files older than it. _delta_log and
// hidden files are never touched; empty
// directories go with their last file. Like Spark it records VACUUM START and
// VACUUM END commits. Paths are resolved against the table root (absolute
// URIs too, and deletion vector files count as referenced); when one of a
// live or unexpired file cannot be placed, Vacuum deletes nothing and
// returns an error wrapping ErrBadPath that names it.
func (t *Table) Vacuum(ctx context.Context, s *Snapshot, opts VacuumOptions) (*VacuumResult, error) {
	if err := s.Check(OpVacuum); err != nil {
		return nil, fmt.Errorf("vacuum: %w", err)
	}
	retention := opts.Retention
	if retention == 0 {
		retention = s.DeletedFileRetention()
	}
	if retention < s.DeletedFileRetention() && !opts.Force {
		return nil, fmt.Errorf("%w: %s < %s (force to override)", ErrRetentionTooShort, retention, s.DeletedFileRetention())
	}
	now := t.now()
	cutoff := now.Add(-retention)
	keep, err := s.vacuumKeep(cutoff)
	if err != nil {
		return nil, fmt.Errorf("vacuum: %w", err)
	}
	objs, err := t.store.List(ctx, "", "")
	if err != nil {
		return nil, fmt.Errorf("vacuum: list table: %w", err)
	}
	res := &VacuumResult{DryRun: opts.DryRun}
	for _, o := range objs {
		if keep[o.Key] || hiddenKey(o.Key, s.PartitionColumns()) || !o.ModTime.Before(cutoff) {
			continue
		}
		res.Files = append(res.Files, o.Key)
		res.Bytes += o.Size
	}
	if opts.DryRun {
		return res, nil
	}
	params := map[string]any{"retentionCheckEnabled": !opts.Force, "defaultRetentionMillis": s.DeletedFileRetention().Milliseconds(),
		"specifiedRetentionMillis": retention.Milliseconds()}
	if _, err := t.Commit(ctx, s, nil, Operation{Name: "VACUUM START", Parameters: params,
		Metrics: map[string]any{"numFilesToDelete": fmt.Sprint(len(res.Files)), "sizeOfDataToDelete": fmt.Sprint(res.Bytes)}}); err != nil {
		return nil, fmt.Errorf("vacuum: %w", err)
	}
	const batch = 1000
	for i := 0; i < len(res.Files); i += batch {
		if err := t.store.Delete(ctx, res.Files[i:min(i+batch, len(res.Files))]...); err != nil {
			return nil, fmt.Errorf("vacuum: delete: %w", err)
		}
	}
	if _, err := t.Commit(ctx, s, nil, Operation{Name: "VACUUM END", Parameters: map[string]any{"status": "COMPLETED"},
		Metrics: map[string]any{"numDeletedFiles": fmt.Sprint(len(res.Files)), "numVacuumedDirectories": "0"}}); err != nil {
		return nil, fmt.Errorf("vacuum: %w", err)
	}
	return res, nil
}

// vacuumKeep is the set of storage keys VACUUM must not delete: the files of
// live adds and of tombstones removed after the cutoff, and their deletion
// vector files, whatever form their paths take. A path it cannot place is an
// error naming it (wrapping ErrBadPath): leaving it out would delete a file
// the table still references. Files outside the root are in no listing of
// it, so they need no keeping.
func (s *Snapshot) vacuumKeep(cutoff time.Time) (map[string]bool, error) {
	keep := map[string]bool{}
	place := func(kind, path string, dv *DeletionVector) error {
		loc, err := s.root.locate(path)
		if err != nil {
			return fmt.Errorf("%s at version %d: %w", kind, s.version, err)
		}
		if loc.kind == pathInside {
			keep[loc.path] = true
		}
		if dv == nil {
			return nil
		}
		loc, ok, err := s.root.dvFile(dv)
		if err != nil {
			return fmt.Errorf("deletion vector of %s %q at version %d: %w", kind, path, s.version, err)
		}
		if ok && loc.kind == pathInside {
			keep[loc.path] = true
		}
		return nil
	}
	for _, a := range s.files {
		if err := place("live add", a.Path, a.DeletionVector); err != nil {
			return nil, err
		}
	}
	for _, r := range s.removes {
		if r.DeletionTime() > cutoff.UnixMilli() {
			if err := place("unexpired tombstone", r.Path, r.DeletionVector); err != nil {
				return nil, err
			}
		}
	}
	return keep, nil
}

// hiddenKey reports whether VACUUM must leave the key alone: the log, and
// anything under a name starting with '_' or '.', except partition
// directories ("_col=value" for a partition column _col) and the change
// data directory. Its files are in no snapshot, so, as Spark's VACUUM
// does, they go once older than the retention: the change data feed of
// versions that old is gone with their removed data files.
func hiddenKey(key string, partitionColumns []string) bool {
	if strings.HasPrefix(key, LogDir) {
		return true
	}
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		if !strings.HasPrefix(seg, "_") && !strings.HasPrefix(seg, ".") {
			continue
		}
		if i < len(segs)-1 && (isPartitionDir(seg, partitionColumns) || i == 0 && seg == ChangeDataDir) {
			continue
		}
		return true
	}
	return false
}

func isPartitionDir(seg string, partitionColumns []string) bool {
	name, _, ok := strings.Cut(seg, "=")
	if !ok {
		return false
	}
	for _, c := range partitionColumns {
		if EscapePartitionName(c) == name {
			return true
		}
	}
	return false
}

// CleanupLog deletes expired log files, as Spark's metadata cleanup does:
// the cutoff is now minus delta.logRetentionDuration, truncated to midnight
// UTC; the newest checkpoint at or before the last commit older than the
// cutoff is kept with everything after it, and older commits, checkpoints
// (classic, multi-part and V2's UUID-named), log compactions and .crc files
// go, with the V2 sidecars no kept checkpoint names (see expiredSidecars).
// It returns the deleted keys. Tables with
// delta.enableExpiredLogCleanup=false are left alone.
func (t *Table) CleanupLog(ctx context.Context, s *Snapshot) ([]string, error) {
	if strings.EqualFold(s.metadata.Configuration["delta.enableExpiredLogCleanup"], "false") {
		return nil, nil
	}
	cutoff := t.now().Add(-s.LogRetention()).UTC().Truncate(24 * time.Hour)
	l, err := t.listLog(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("cleanup log: %w", err)
	}
	lastExpired := int64(-1)
	for v, o := range l.commits {
		if o.ModTime.Before(cutoff) && v > lastExpired && v <= s.version {
			lastExpired = v
		}
	}
	keepFrom, _ := l.checkpoint(lastExpired, nil)
	if keepFrom <= 0 {
		return nil, nil
	}
	objs, err := t.store.List(ctx, LogDir, "")
	if err != nil {
		return nil, fmt.Errorf("cleanup log: %w", err)
	}
	var doomed []string
	for _, o := range objs {
		v, kind, _, _, ok := ParseLogFileName(o.Key)
		if !ok || v >= keepFrom {
			continue
		}
		switch kind {
		case LogFileCommit, LogFileCheckpoint, LogFileMultiPartCheckpoint, LogFileUUIDCheckpoint, LogFileCRC:
			doomed = append(doomed, o.Key)
		case LogFileCompacted:
			if end, _ := parseDigits(strings.TrimPrefix(o.Key, LogDir)[21:], 20); end < keepFrom {
				doomed = append(doomed, o.Key)
			}
		}
	}
	sidecars, err := t.expiredSidecars(ctx, objs, keepFrom, cutoff)
	if err != nil {
		return nil, fmt.Errorf("cleanup log: %w", err)
	}
	doomed = append(doomed, sidecars...)
	if err := t.store.Delete(ctx, doomed...); err != nil {
		return nil, fmt.Errorf("cleanup log: %w", err)
	}
	return doomed, nil
}

// expiredSidecars are the V2 checkpoint sidecar files (objs is the listing
// of the log) that no checkpoint from keepFrom on names and that were
// written before cutoff: a checkpoint being written uploads its sidecars
// before the file naming them, so a young unnamed sidecar may be in use.
// Kept checkpoints are read only when such candidates exist, which on a
// table with classic checkpoints is never.
func (t *Table) expiredSidecars(ctx context.Context, objs []storage.ObjectInfo, keepFrom int64, cutoff time.Time) ([]string, error) {
	var candidates []string
	for _, o := range objs {
		if name, ok := strings.CutPrefix(o.Key, SidecarDir); ok && name != "" && !strings.Contains(name, "/") && o.ModTime.Before(cutoff) {
			candidates = append(candidates, o.Key)
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	named := map[string]bool{}
	for _, o := range objs {
		v, kind, _, _, ok := ParseLogFileName(o.Key)
		if !ok || v < keepFrom || (kind != LogFileCheckpoint && kind != LogFileUUIDCheckpoint) {
			continue
		}
		err := readCheckpointTop(ctx, t.store, o.Key, func(a *Action) error {
			if a.Sidecar == nil {
				return nil
			}
			name, err := sidecarName(o.Key, a.Sidecar)
			named[SidecarDir+name] = true
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("sidecars of kept checkpoint %s: %w", o.Key, err)
		}
	}
	return slices.DeleteFunc(candidates, func(k string) bool { return named[k] }), nil
}
