package delta

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// ErrSnapshotDiverged is wrapped by Table.Checkpoint when the in-memory
// snapshot it was given differs from the log as stored: a commit this
// writer believed it made was replaced (a store whose put-if-absent is not
// atomic), or another writer's commit was absorbed wrongly. The checkpoint
// is written from the log all the same, and the snapshot replaced by the
// log's state; the caller must re-read what it derived from the old one.
var ErrSnapshotDiverged = errors.New("delta: in-memory snapshot differs from the log")

// divergence describes the first difference between s and the log's state
// o in what commits and checkpoints depend on: protocol, metadata, live
// files, tombstones and txn versions unexpired at now. "" when they agree.
// Representation details that a checkpoint round trip may change (empty
// versus absent lists, dataChange, lastUpdated) are not compared.
func (s *Snapshot) divergence(o *Snapshot, now time.Time) string {
	sp, op := s.protocol, o.protocol
	if sp.MinReaderVersion != op.MinReaderVersion || sp.MinWriterVersion != op.MinWriterVersion ||
		!slices.Equal(sp.ReaderFeatures, op.ReaderFeatures) || !slices.Equal(sp.WriterFeatures, op.WriterFeatures) {
		return fmt.Sprintf("protocol is %+v in memory, %+v in the log", *sp, *op)
	}
	sm, om := s.metadata, o.metadata
	if sm.ID != om.ID || sm.SchemaString != om.SchemaString || !slices.Equal(sm.PartitionColumns, om.PartitionColumns) ||
		!maps.Equal(sm.Configuration, om.Configuration) {
		return "metaData differs between memory and the log"
	}
	if d := diffKeys("live file", s.files, o.files, func(a, b *Add) bool { return a.Size == b.Size }); d != "" {
		return d
	}
	if d := diffKeys("tombstone", s.liveTombstones(now), o.liveTombstones(now), func(_, _ *Remove) bool { return true }); d != "" {
		return d
	}
	return diffKeys("txn", s.txnVersions(now), o.txnVersions(now), func(a, b int64) bool { return a == b })
}

// liveTombstones are the removes a checkpoint written at now keeps.
func (s *Snapshot) liveTombstones(now time.Time) map[string]*Remove {
	cutoff := now.Add(-s.DeletedFileRetention()).UnixMilli()
	out := make(map[string]*Remove, len(s.removes))
	for k, r := range s.removes {
		if r.DeletionTime() > cutoff {
			out[k] = r
		}
	}
	return out
}

// diffKeys describes the first key (in order) that is in one map and not
// the other, or whose values same rejects; "" if none.
func diffKeys[V any](what string, mem, log map[string]V, same func(a, b V) bool) string {
	keys := slices.Sorted(maps.Keys(mem))
	for k := range log {
		if _, ok := mem[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		m, inMem := mem[k]
		l, inLog := log[k]
		switch {
		case !inLog:
			return fmt.Sprintf("%s %q is in memory but not in the log", what, k)
		case !inMem:
			return fmt.Sprintf("%s %q is in the log but not in memory", what, k)
		case !same(m, l):
			return fmt.Sprintf("%s %q differs between memory and the log", what, k)
		}
	}
	return ""
}
