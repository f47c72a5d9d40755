package delta

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Snapshot is the state of a table at one version: protocol, metadata, the
// live files, unexpired tombstones, the latest txn version per application,
// and domain metadata. It is built by Table.Snapshot and advanced in place by
// Table.Update and Table.Commit, so it is not safe for concurrent use; it
// must not be changed otherwise.
type Snapshot struct {
	root      tableRoot // where file paths resolve, for their canonical form
	version   int64
	timestamp int64 // ms; in-commit timestamp or commit file modification time of version
	protocol  *Protocol
	metadata  *Metadata
	schema    *StructType
	statCols  map[string]*statColumn // by physical path; nil until FileStats needs it
	files     map[fileKey]*Add
	removes   map[fileKey]*Remove
	txns      map[string]Txn
	domains   map[string]DomainMetadata
	// checkpointVersion is the newest checkpoint the snapshot knows of, -1 if none.
	checkpointVersion int64
}

func newSnapshot(root tableRoot) *Snapshot {
	return &Snapshot{
		root:              root,
		version:           -1,
		files:             map[fileKey]*Add{},
		removes:           map[fileKey]*Remove{},
		txns:              map[string]Txn{},
		domains:           map[string]DomainMetadata{},
		checkpointVersion: -1,
	}
}

// fileKey is the replay key of a file action: its path in canonical form
// (pathID), so that a remove matches its add however either spells the
// path, plus the deletion vector's unique id.
type fileKey struct {
	path pathID
	dv   string
}

func (s *Snapshot) keyOf(path string, dv *DeletionVector) fileKey {
	return fileKey{path: s.root.id(path), dv: dv.UniqueID()}
}

// apply replays one action onto the state. Later actions win.
func (s *Snapshot) apply(a *Action) {
	switch {
	case a.Add != nil:
		k := s.keyOf(a.Add.Path, a.Add.DeletionVector)
		s.files[k] = a.Add
		delete(s.removes, k)
	case a.Remove != nil:
		k := s.keyOf(a.Remove.Path, a.Remove.DeletionVector)
		delete(s.files, k)
		s.removes[k] = a.Remove
	case a.Txn != nil:
		s.txns[a.Txn.AppID] = *a.Txn
	case a.MetaData != nil:
		s.metadata = a.MetaData
		s.schema, s.statCols = nil, nil
	case a.Protocol != nil:
		s.protocol = a.Protocol
	case a.DomainMetadata != nil:
		if a.DomainMetadata.Removed {
			delete(s.domains, a.DomainMetadata.Domain)
		} else {
			s.domains[a.DomainMetadata.Domain] = *a.DomainMetadata
		}
	}
}

// Version is the snapshot's table version.
func (s *Snapshot) Version() int64 { return s.version }

// Timestamp is when the snapshot's version was committed: its in-commit
// timestamp, or the commit file's modification time, as Spark and delta-rs
// use for time travel.
func (s *Snapshot) Timestamp() time.Time { return time.UnixMilli(s.timestamp).UTC() }

// Protocol is the table's protocol action.
func (s *Snapshot) Protocol() Protocol { return *s.protocol }

// Metadata is the table's metaData action.
func (s *Snapshot) Metadata() Metadata { return *s.metadata }

// Schema is the parsed table schema.
func (s *Snapshot) Schema() (*StructType, error) {
	if s.schema == nil {
		st, err := s.metadata.Schema()
		if err != nil {
			return nil, err
		}
		s.schema = st
	}
	return s.schema, nil
}

// PartitionColumns are the table's partition columns, in order.
func (s *Snapshot) PartitionColumns() []string { return s.metadata.PartitionColumns }

// NumFiles is the number of live data files.
func (s *Snapshot) NumFiles() int { return len(s.files) }

// Files returns the live files sorted by path.
func (s *Snapshot) Files() []*Add {
	out := make([]*Add, 0, len(s.files))
	for _, a := range s.files {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *Add) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// File returns the live file with the path (and no deletion vector), or nil;
// any spelling of the path finds it.
func (s *Snapshot) File(path string) *Add { return s.files[s.keyOf(path, nil)] }

// Tombstones returns the remove actions the snapshot still remembers, sorted
// by path. Expired ones are dropped when a checkpoint is written.
func (s *Snapshot) Tombstones() []*Remove {
	out := make([]*Remove, 0, len(s.removes))
	for _, r := range s.removes {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *Remove) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// TxnVersion returns the latest version committed by the application, and
// whether it committed any. A txn past delta.setTransactionRetentionDuration
// counts: other engines treat it as expired (LiveTxns), but for the writer
// that committed it, it is still the truth of what the table holds, and
// forgetting it would redo what is done (a stream's records written twice).
// Expiry also reads the wall clock, which may step.
func (s *Snapshot) TxnVersion(appID string) (int64, bool) {
	t, ok := s.txns[appID]
	return t.Version, ok
}

// Txn returns the latest txn action of the application (with its
// lastUpdated, when the writer set it), and whether one exists, expired or
// not (see TxnVersion).
func (s *Snapshot) Txn(appID string) (Txn, bool) {
	t, ok := s.txns[appID]
	return t, ok
}

// Txns returns appId → latest version for every txn, expired or not (see
// TxnVersion).
func (s *Snapshot) Txns() map[string]int64 {
	out := make(map[string]int64, len(s.txns))
	for id, t := range s.txns {
		out[id] = t.Version
	}
	return out
}

// LiveTxns returns appId → latest version for the txns that Spark and
// delta-kernel still see at now: those not past
// delta.setTransactionRetentionDuration.
func (s *Snapshot) LiveTxns(now time.Time) map[string]int64 {
	out := make(map[string]int64, len(s.txns))
	for id, t := range s.txns {
		if !s.txnExpired(t, now) {
			out[id] = t.Version
		}
	}
	return out
}

func (s *Snapshot) txnExpired(t Txn, now time.Time) bool {
	ret, ok := s.TxnRetention()
	return ok && t.LastUpdated != nil && *t.LastUpdated < now.Add(-ret).UnixMilli()
}

// txnRetentionKey is the table property after which a txn not updated is
// forgotten (Spark and delta-kernel drop it from snapshots and checkpoints).
const txnRetentionKey = "delta.setTransactionRetentionDuration"

// TxnRetention is delta.setTransactionRetentionDuration; ok is false when
// the table does not set it (txns never expire).
func (s *Snapshot) TxnRetention() (d time.Duration, ok bool) {
	return s.duration(txnRetentionKey, 0)
}

// StaleTxns returns, for each of appIDs whose txn is older than half of
// delta.setTransactionRetentionDuration at now (expired ones included), the
// same txn with LastUpdated set to now. Other engines forget a txn past the
// retention (and drop it from their checkpoints); committing these keeps
// the version visible to them and in every checkpoint. Nil when the table
// sets no retention.
func (s *Snapshot) StaleTxns(appIDs []string, now time.Time) []Txn {
	ret, ok := s.TxnRetention()
	if !ok {
		return nil
	}
	refreshBefore := now.Add(-ret / 2).UnixMilli()
	ms := now.UnixMilli()
	var out []Txn
	for _, id := range appIDs {
		t, ok := s.txns[id]
		if !ok || t.LastUpdated == nil || *t.LastUpdated >= refreshBefore {
			continue
		}
		t.LastUpdated = &ms
		out = append(out, t)
	}
	return out
}

// DomainMetadata returns the live domain metadata, sorted by domain.
func (s *Snapshot) DomainMetadata() []DomainMetadata {
	out := make([]DomainMetadata, 0, len(s.domains))
	for _, d := range s.domains {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b DomainMetadata) int { return strings.Compare(a.Domain, b.Domain) })
	return out
}

// CheckpointInterval is delta.checkpointInterval (default 10).
func (s *Snapshot) CheckpointInterval() int64 {
	if v, err := strconv.ParseInt(s.metadata.Configuration["delta.checkpointInterval"], 10, 64); err == nil && v > 0 {
		return v
	}
	return 10
}

// CheckpointDue reports whether a checkpoint should be written at this
// version, as Spark decides: every CheckpointInterval versions.
func (s *Snapshot) CheckpointDue() bool {
	return s.version > 0 && s.version%s.CheckpointInterval() == 0
}

// DeletedFileRetention is delta.deletedFileRetentionDuration (default 1 week).
func (s *Snapshot) DeletedFileRetention() time.Duration {
	d, _ := s.duration("delta.deletedFileRetentionDuration", 7*24*time.Hour)
	return d
}

// LogRetention is delta.logRetentionDuration (default 30 days).
func (s *Snapshot) LogRetention() time.Duration {
	d, _ := s.duration("delta.logRetentionDuration", 30*24*time.Hour)
	return d
}

// duration reads a table property in Spark's "interval N unit" form (or a Go
// duration); ok is false when it is absent or unparsable.
func (s *Snapshot) duration(key string, def time.Duration) (time.Duration, bool) {
	v, present := s.metadata.Configuration[key]
	if !present {
		return def, false
	}
	d, err := ParseInterval(v)
	if err != nil {
		return def, false
	}
	return d, true
}

// ParseInterval parses a Delta duration property such as "interval 7 days",
// "30 days" or "168h".
func ParseInterval(v string) (time.Duration, error) {
	v = strings.TrimSpace(strings.ToLower(v))
	v = strings.TrimSpace(strings.TrimPrefix(v, "interval"))
	if d, err := time.ParseDuration(v); err == nil {
		return d, nil
	}
	num, unit, ok := strings.Cut(v, " ")
	n, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil {
		return 0, &strconv.NumError{Func: "ParseInterval", Num: v, Err: strconv.ErrSyntax}
	}
	units := map[string]time.Duration{
		"nanosecond": time.Nanosecond, "microsecond": time.Microsecond, "millisecond": time.Millisecond,
		"second": time.Second, "minute": time.Minute, "hour": time.Hour,
		"day": 24 * time.Hour, "week": 7 * 24 * time.Hour,
	}
	d, ok := units[strings.TrimSuffix(strings.TrimSpace(unit), "s")]
	if !ok {
		return 0, &strconv.NumError{Func: "ParseInterval", Num: v, Err: strconv.ErrSyntax}
	}
	return time.Duration(n) * d, nil
}

// CheckpointActions returns what a checkpoint at this version holds: protocol,
// metaData, every txn, live domain metadata, every live add (with
// dataChange=false, as Spark writes them) and the removes not yet expired at
// now. Txns past delta.setTransactionRetentionDuration are kept (the
// protocol allows dropping them, not requiring it; readers skip them): a
// dropped txn is an offset its writer may need again, and dropping by the
// wall clock would let a clock step forget offsets.
func (s *Snapshot) CheckpointActions(now time.Time) []Action {
	out := make([]Action, 0, 2+len(s.txns)+len(s.domains)+len(s.files)+len(s.removes))
	p, m := *s.protocol, *s.metadata
	out = append(out, Action{Protocol: &p}, Action{MetaData: &m})
	for _, id := range slices.Sorted(maps.Keys(s.txns)) {
		t := s.txns[id]
		out = append(out, Action{Txn: &t})
	}
	for _, d := range s.DomainMetadata() {
		out = append(out, Action{DomainMetadata: &d})
	}
	for _, a := range s.Files() {
		c := *a
		c.DataChange = false
		out = append(out, Action{Add: &c})
	}
	cutoff := now.Add(-s.DeletedFileRetention()).UnixMilli()
	for _, r := range s.Tombstones() {
		if r.DeletionTime() > cutoff {
			c := *r
			c.DataChange = false
			out = append(out, Action{Remove: &c})
		}
	}
	return out
}

// CheckRead refuses a table whose reader protocol or reader features this
// library does not implement (Check(OpRead)).
func (s *Snapshot) CheckRead() error { return s.Check(OpRead) }

// CheckWrite refuses appending to a table with a feature this library does
// not honour while it is active: constraints, generated columns, row
// tracking, ... (Check(OpAppend)).
func (s *Snapshot) CheckWrite() error { return s.Check(OpAppend) }

// AppendOnly reports delta.appendOnly: data may be added, never changed.
func (s *Snapshot) AppendOnly() bool {
	return strings.EqualFold(s.metadata.Configuration["delta.appendOnly"], "true")
}

// ApplyWriterOptions sets the options of data files the table asks for: its
// configuration's (ApplyTableConfig) and, on tables with the writer feature
// materializePartitionColumns, the partition columns to write into every
// file (RFC "Materialize Partition Columns": physical names, behind the
// data columns). Every writer of new data files starts from it.
func (s *Snapshot) ApplyWriterOptions(o *WriterOptions) error {
	if err := o.ApplyTableConfig(s.metadata.Configuration); err != nil {
		return err
	}
	o.Partitions = nil
	if !slices.Contains(s.protocol.writerFeatureSet(), "materializePartitionColumns") || len(s.PartitionColumns()) == 0 {
		return nil
	}
	schema, err := s.Schema()
	if err != nil {
		return err
	}
	parts := &StructType{}
	for _, c := range s.PartitionColumns() {
		f := schema.Field(c)
		if f == nil {
			return fmt.Errorf("partition column %q is not in the schema", c)
		}
		parts.Fields = append(parts.Fields, *f)
	}
	o.Partitions = PhysicalSchema(parts)
	return nil
}
