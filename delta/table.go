package delta

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/deltaflow/deltaflow/storage"
)

// Table is a Delta table: its log and data files in one storage.Store rooted
// at the table directory. It holds no state of its own (snapshots do) but
// which corrupt checkpoints it has reported.
type Table struct {
	store   storage.Store
	root    tableRoot // the store's URI, which paths in the log resolve against
	now     func() time.Time
	corrupt *corruptReports // nil: fallbacks unreported
}

// TableOption configures a Table built by NewTable.
type TableOption func(*Table)

// OnCorruptCheckpoint makes the table call report the first time it finds a
// checkpoint file corrupt and reads the table from an older checkpoint or
// the JSON commits instead (as Spark does): once per file, with the file's
// key and what is wrong with it. Without it the fallback is silent.
func OnCorruptCheckpoint(report func(file string, err error)) TableOption {
	return func(t *Table) { t.corrupt = &corruptReports{report: report, seen: map[string]bool{}} }
}

// NewTable returns the table rooted at store.
func NewTable(store storage.Store, opts ...TableOption) *Table {
	t := &Table{store: store, root: newTableRoot(store.URI()), now: time.Now}
	for _, o := range opts {
		o(t)
	}
	return t
}

// corruptReports reports each corrupt checkpoint file once.
type corruptReports struct {
	report func(file string, err error)
	mu     sync.Mutex
	seen   map[string]bool // one entry per corrupt file met: a handful
}

// fellBack reports err, the *CorruptLogError of a checkpoint the table was
// read without, unless its file was reported before.
func (c *corruptReports) fellBack(err error) {
	if c == nil {
		return
	}
	var ce *CorruptLogError
	if !errors.As(err, &ce) {
		return
	}
	c.mu.Lock()
	first := !c.seen[ce.File]
	c.seen[ce.File] = true
	c.mu.Unlock()
	if first {
		c.report(ce.File, err)
	}
}

// Store is the table's object store.
func (t *Table) Store() storage.Store { return t.store }

// logListing is what one listing of _delta_log found.
type logListing struct {
	commits     map[int64]storage.ObjectInfo
	checkpoints map[int64]map[int][]string // version → parts count → keys (1: single file, 0: UUID-named)
	maxVersion  int64                      // highest commit or checkpoint version, -1 if none
}

func (t *Table) listLog(ctx context.Context, startAfter string) (*logListing, error) {
	objs, err := t.store.List(ctx, LogDir, startAfter)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", LogDir, err)
	}
	l := &logListing{commits: map[int64]storage.ObjectInfo{}, checkpoints: map[int64]map[int][]string{}, maxVersion: -1}
	for _, o := range objs {
		v, kind, _, parts, ok := ParseLogFileName(o.Key)
		if !ok {
			continue
		}
		switch kind {
		case LogFileCommit:
			l.commits[v] = o
		case LogFileCheckpoint, LogFileMultiPartCheckpoint, LogFileUUIDCheckpoint:
			// A UUID-named V2 checkpoint is complete in one file: parts 0.
			if l.checkpoints[v] == nil {
				l.checkpoints[v] = map[int][]string{}
			}
			l.checkpoints[v][parts] = append(l.checkpoints[v][parts], o.Key)
		default:
			continue
		}
		l.maxVersion = max(l.maxVersion, v)
	}
	return l, nil
}

// checkpoint returns the keys of the newest complete checkpoint at or below
// target and not in skip, or -1.
func (l *logListing) checkpoint(target int64, skip map[int64]bool) (int64, []string) {
	best, keys := int64(-1), []string(nil)
	for v, byParts := range l.checkpoints {
		if v > target || v <= best || skip[v] {
			continue
		}
		for parts, ks := range byParts {
			if len(ks) == parts { // every part present (names are unique)
				slices.Sort(ks)
				best, keys = v, ks
				break
			}
			if parts == 0 && len(ks) > 0 { // any UUID-named checkpoint will do
				slices.Sort(ks)
				best, keys = v, ks[:1]
			}
		}
	}
	return best, keys
}

// Snapshot loads the latest version of the table.
func (t *Table) Snapshot(ctx context.Context) (*Snapshot, error) {
	return t.snapshot(ctx, -1)
}

// SnapshotAt loads the table as of version (time travel). ErrVersionNotFound
// if the log cannot reconstruct it.
func (t *Table) SnapshotAt(ctx context.Context, version int64) (*Snapshot, error) {
	if version < 0 {
		return nil, fmt.Errorf("%w: negative version %d", ErrVersionNotFound, version)
	}
	return t.snapshot(ctx, version)
}

func (t *Table) snapshot(ctx context.Context, target int64) (*Snapshot, error) {
	// _last_checkpoint lets us list only its version onwards; missing,
	// corrupt or pointing past the target, we list the whole log.
	startAfter := ""
	if lc, err := ReadLastCheckpoint(ctx, t.store); err == nil && lc.Version >= 0 && (target < 0 || lc.Version <= target) {
		startAfter = fmt.Sprintf("%s%020d", LogDir, lc.Version)
	} else if err != nil && !errors.Is(err, storage.ErrNotExist) && !isCorrupt(err) {
		return nil, fmt.Errorf("read _last_checkpoint: %w", err)
	}
	l, err := t.listLog(ctx, startAfter)
	if err != nil {
		return nil, err
	}
	if startAfter != "" {
		if cp, _ := l.checkpoint(maxIfLatest(target, l.maxVersion), nil); cp < 0 {
			// The hint named a checkpoint that is missing or incomplete.
			if l, err = t.listLog(ctx, ""); err != nil {
				return nil, err
			}
		}
	}
	if l.maxVersion < 0 {
		return nil, ErrTableNotFound
	}
	if target < 0 {
		target = l.maxVersion
	} else if target > l.maxVersion {
		return nil, fmt.Errorf("%w: version %d is past the latest version %d", ErrVersionNotFound, target, l.maxVersion)
	}
	// Like Spark, a corrupt checkpoint falls back to an older one (or to the
	// JSON commits) when the log still allows it; once the table is read,
	// each checkpoint skipped is reported (OnCorruptCheckpoint).
	skip := map[int64]bool{}
	var corrupt []error // the checkpoints skipped, oldest last
	for {
		cp, cpKeys, err := l.plan(target, skip)
		if err != nil {
			if len(corrupt) > 0 {
				return nil, corrupt[len(corrupt)-1]
			}
			return nil, err
		}
		s, err := t.load(ctx, l, target, cp, cpKeys)
		if isCorrupt(err) && cp >= 0 && errors.Is(err, errCheckpoint) {
			skip[cp], corrupt = true, append(corrupt, err)
			// A listing that started at the hinted checkpoint holds no
			// older checkpoints or commits to fall back to: list it all.
			if startAfter != "" {
				startAfter = ""
				if l, err = t.listLog(ctx, ""); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err == nil {
			for _, c := range corrupt {
				t.corrupt.fellBack(c)
			}
		}
		return s, err
	}
}

func maxIfLatest(target, latest int64) int64 {
	if target < 0 {
		return latest
	}
	return target
}

func isCorrupt(err error) bool {
	var ce *CorruptLogError
	return errors.As(err, &ce)
}

// errCheckpoint marks errors from reading the checkpoint, as opposed to
// reading commits.
var errCheckpoint = errors.New("checkpoint")

// plan picks the newest usable checkpoint at or below target (not in skip)
// and checks that the commits from there to target are all present.
func (l *logListing) plan(target int64, skip map[int64]bool) (int64, []string, error) {
	cp, cpKeys := l.checkpoint(target, skip)
	for v := cp + 1; v <= target; v++ {
		if _, ok := l.commits[v]; !ok {
			if v == cp+1 && cp < 0 {
				return 0, nil, fmt.Errorf("%w: commit %d is gone and no checkpoint covers version %d", ErrVersionNotFound, v, target)
			}
			return 0, nil, fmt.Errorf("%w: %s is missing", ErrVersionGap, CommitKey(v))
		}
	}
	return cp, cpKeys, nil
}

// load builds the snapshot at target from checkpoint cp (if >= 0) and the
// commits after it.
func (t *Table) load(ctx context.Context, l *logListing, target, cp int64, cpKeys []string) (*Snapshot, error) {
	s := newSnapshot(t.root)
	if cp >= 0 {
		err := ReadCheckpoint(ctx, t.store, cpKeys, func(a *Action) error {
			s.apply(a)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read %w %d: %w", errCheckpoint, cp, err)
		}
		s.checkpointVersion = cp
	}
	files := make([]storage.ObjectInfo, 0, target-cp)
	for v := cp + 1; v <= target; v++ {
		files = append(files, l.commits[v])
	}
	commits, err := t.readCommits(ctx, files)
	if err != nil {
		return nil, err
	}
	for _, actions := range commits {
		for j := range actions {
			s.apply(&actions[j])
		}
	}
	s.version = target
	if o, ok := l.commits[target]; ok {
		s.timestamp = o.ModTime.UnixMilli()
		if len(commits) > 0 {
			s.timestamp = commitTime(o.ModTime, commits[len(commits)-1])
		} else if s.metadata != nil && s.inCommitTimestamps() {
			if ict, ok, err := t.readCommitICT(ctx, l, target); err == nil && ok {
				s.timestamp = ict
			}
		}
	} else if info, err := t.store.Stat(ctx, cpKeys[0]); err == nil {
		s.timestamp = info.ModTime.UnixMilli()
	}
	if s.protocol == nil || s.metadata == nil {
		return nil, &CorruptLogError{File: CommitKey(target), Err: errors.New("the log has no protocol or no metaData action")}
	}
	if err := s.CheckRead(); err != nil {
		return nil, err
	}
	return s, nil
}

// MaxCommitFileSize bounds a commit file the table reads: a larger one is
// refused (CommitTooLargeError) rather than read into memory, where on a
// 128 MiB container it would crash the process on every start. Streaming
// and maintenance commits are kilobytes; 32 MiB holds some 60,000 file
// actions. Commits read at once hold at most this much between them.
const MaxCommitFileSize = 32 << 20

// CommitTooLargeError is a commit file over MaxCommitFileSize.
type CommitTooLargeError struct {
	File string
	Size int64
}

func (e *CommitTooLargeError) Error() string {
	return fmt.Sprintf("delta: commit file %s is %d bytes, over the %d-byte cap (delta.MaxCommitFileSize); not read", e.File, e.Size, MaxCommitFileSize)
}

// readCommits fetches and parses commit files, a few at a time (object stores
// reward parallel GETs), keeping their order. A file's Size comes from the
// listing; -1 has it looked up first.
func (t *Table) readCommits(ctx context.Context, files []storage.ObjectInfo) ([][]Action, error) {
	out := make([][]Action, len(files))
	errs := make([]error, len(files))
	sem := make(chan struct{}, 8)
	mem := semaphore.NewWeighted(MaxCommitFileSize)
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i], errs[i] = t.readCommit(ctx, f, mem)
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// readCommit reads and parses one commit file of at most MaxCommitFileSize,
// holding its size of mem meanwhile.
func (t *Table) readCommit(ctx context.Context, f storage.ObjectInfo, mem *semaphore.Weighted) ([]Action, error) {
	if f.Size < 0 {
		info, err := t.store.Stat(ctx, f.Key)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f.Key, err)
		}
		f.Size = info.Size
	}
	if f.Size > MaxCommitFileSize {
		return nil, &CommitTooLargeError{File: f.Key, Size: f.Size}
	}
	if err := mem.Acquire(ctx, max(f.Size, 1)); err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Key, err)
	}
	defer mem.Release(max(f.Size, 1))
	data, err := t.store.Get(ctx, f.Key)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Key, err)
	}
	return ParseActions(f.Key, data)
}

// Update advances s in place to the latest version, replaying the commits
// that landed since s was read.
func (t *Table) Update(ctx context.Context, s *Snapshot) error {
	l, err := t.listLog(ctx, CommitKey(s.version))
	if err != nil {
		return err
	}
	var files []storage.ObjectInfo
	for v := s.version + 1; ; v++ {
		o, ok := l.commits[v]
		if !ok {
			if v > l.maxVersion {
				break
			}
			// The commit is gone (log cleanup ran past this snapshot) but a
			// newer checkpoint covers it: reload from that checkpoint rather
			// than stop here, stale, and let a writer reuse a version.
			if l.hasCheckpointFrom(v) {
				fresh, err := t.Snapshot(ctx)
				if err != nil {
					return err
				}
				*s = *fresh
				return nil
			}
			return fmt.Errorf("%w: %s is missing", ErrVersionGap, CommitKey(v))
		}
		files = append(files, o)
	}
	commits, err := t.readCommits(ctx, files)
	if err != nil {
		return err
	}
	for _, actions := range commits {
		if err := s.applyCommit(actions); err != nil {
			return err
		}
		s.version++
		s.timestamp = commitTime(l.commits[s.version].ModTime, actions)
	}
	for v := range l.checkpoints {
		if v <= s.version {
			s.checkpointVersion = max(s.checkpointVersion, v)
		}
	}
	return nil
}

// hasCheckpointFrom reports whether the listing has a checkpoint at version
// v or later.
func (l *logListing) hasCheckpointFrom(v int64) bool {
	for cv := range l.checkpoints {
		if cv >= v {
			return true
		}
	}
	return false
}

// applyCommit replays one commit and rechecks the protocol it may change.
func (s *Snapshot) applyCommit(actions []Action) error {
	for i := range actions {
		s.apply(&actions[i])
	}
	return s.CheckRead()
}

// SnapshotAtTime loads the latest version committed at or before ts, using
// in-commit timestamps where the table has them (see ict.go), else commit
// file modification times made strictly increasing as Spark does.
// ErrVersionNotFound if ts is before the oldest reconstructable version.
func (t *Table) SnapshotAtTime(ctx context.Context, ts time.Time) (*Snapshot, error) {
	l, versions, err := t.listCommits(ctx)
	if err != nil {
		return nil, err
	}
	found, versions, err := t.timeTravelICT(ctx, l, versions, ts)
	if err != nil {
		return nil, err
	}
	if found >= 0 {
		return t.SnapshotAt(ctx, found)
	}
	prev := int64(-1)
	for _, v := range versions {
		ms := l.commits[v].ModTime.UnixMilli()
		if ms <= prev {
			ms = prev + 1
		}
		prev = ms
		if ms > ts.UnixMilli() {
			break
		}
		found = v
	}
	if found < 0 {
		return nil, fmt.Errorf("%w: %w %s", ErrVersionNotFound, ErrNoCommitBefore, ts.UTC().Format(time.RFC3339))
	}
	return t.SnapshotAt(ctx, found)
}

// listCommits lists the log and returns the versions of its commit files,
// ascending; ErrTableNotFound when there are none.
func (t *Table) listCommits(ctx context.Context) (*logListing, []int64, error) {
	l, err := t.listLog(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	if len(l.commits) == 0 {
		return nil, nil, ErrTableNotFound
	}
	return l, slices.Sorted(maps.Keys(l.commits)), nil
}

// Checkpoint writes the checkpoint of version s.Version() and then
// _last_checkpoint: a V2 checkpoint (UUID-named, file actions in sidecars)
// when the table asks for one (delta.checkpointPolicy=v2), else a classic
// V1 one. The checkpoint is built from the log as stored (the
// newest checkpoint and the commits after it, read back), never from s
// itself: a checkpoint replaces the commits before it, which log cleanup then
// deletes, so a commit that s holds differently from the log (a write lost
// to a store whose put-if-absent overwrote it, a foreign commit absorbed
// wrongly) would otherwise be checkpointed away for good. When s differs
// from the log, s takes the log's state and the error wraps
// ErrSnapshotDiverged; the checkpoint is written all the same.
func (t *Table) Checkpoint(ctx context.Context, s *Snapshot) error {
	stored, err := t.SnapshotAt(ctx, s.version)
	if err != nil {
		return fmt.Errorf("checkpoint version %d: read the log: %w", s.version, err)
	}
	now := t.now()
	write := WriteCheckpoint
	if stored.writesV2Checkpoints() {
		write = func(ctx context.Context, store storage.Store, version int64, actions []Action) (*LastCheckpoint, error) {
			return writeV2Checkpoint(ctx, store, version, actions, sidecarActions)
		}
	}
	if _, err := write(ctx, t.store, s.version, stored.CheckpointActions(now)); err != nil {
		return fmt.Errorf("checkpoint version %d: %w", s.version, err)
	}
	stored.checkpointVersion = s.version
	diff := s.divergence(stored, now)
	s.checkpointVersion = s.version
	if diff != "" {
		*s = *stored
		return fmt.Errorf("checkpoint version %d: %w: %s; the checkpoint holds the log's state", stored.version, ErrSnapshotDiverged, diff)
	}
	return nil
}

// CheckpointVersion is the newest checkpoint at or below the snapshot's
// version that the snapshot knows of, or -1.
func (s *Snapshot) CheckpointVersion() int64 { return s.checkpointVersion }
