package delta

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
// files, tombstones unexpired at now and txn versions. "" when they agree.
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
	if d := diffKeys("live file", s.files, o.files, fileKey.label, func(a, b *Add) bool { return a.Size == b.Size }); d != "" {
		return d
	}
	if d := diffKeys("tombstone", s.liveTombstones(now), o.liveTombstones(now), fileKey.label, func(_, _ *Remove) bool { return true }); d != "" {
		return d
	}
	return diffKeys("txn", s.Txns(), o.Txns(), func(id string) string { return id },
		func(a, b int64) bool { return a == b })
}

// liveTombstones are the removes a checkpoint written at now keeps.
func (s *Snapshot) liveTombstones(now time.Time) map[fileKey]*Remove {
	cutoff := now.Add(-s.DeletedFileRetention()).UnixMilli()
	out := make(map[fileKey]*Remove, len(s.removes))
	for k, r := range s.removes {
		if r.DeletionTime() > cutoff {
			out[k] = r
		}
	}
	return out
}

// diffKeys describes the first key (in label order) that is in one map and
// not the other, or whose values same rejects; "" if none.
func diffKeys[K comparable, V any](what string, mem, log map[K]V, label func(K) string, same func(a, b V) bool) string {
	keys := slices.Collect(maps.Keys(mem))
	for k := range log {
		if _, ok := mem[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b K) int { return strings.Compare(label(a), label(b)) })
	for _, k := range keys {
		m, inMem := mem[k]
		l, inLog := log[k]
		switch {
		case !inLog:
			return fmt.Sprintf("%s %q is in memory but not in the log", what, label(k))
		case !inMem:
			return fmt.Sprintf("%s %q is in the log but not in memory", what, label(k))
		case !same(m, l):
			return fmt.Sprintf("%s %q differs between memory and the log", what, label(k))
		}
	}
	return ""
}

// label names a file key in messages: its canonical path, and the deletion
// vector's id if any.
func (k fileKey) label() string {
	if k.dv == "" {
		return k.path.path
	}
	return k.path.path + " (deletion vector " + k.dv + ")"
}
