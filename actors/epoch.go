package actors

import (
	"maps"
	"slices"
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/messages"
)

// epochState is the bookkeeping of one epoch, from Seal to commit: which readers
// and buffers must still answer, and what they answered. It is plain data,
// driven by the committer.
type epochState struct {
	epoch   uint64
	started time.Time
	topic   string

	waitSeal  map[int32]bool
	sealed    map[int32]*messages.Sealed
	waitFlush map[string]bool
	files     []messages.DataFile
	idle      []string // buffers (by id) that had no rows for the epoch
	active    []string // buffers that had
	err       error    // first buffer failure
}

func newEpochState(epoch uint64, topic string, readers []int32, now time.Time) *epochState {
	r := &epochState{epoch: epoch, started: now, topic: topic, waitSeal: map[int32]bool{}, sealed: map[int32]*messages.Sealed{}, waitFlush: map[string]bool{}}
	for _, p := range readers {
		r.waitSeal[p] = true
	}
	return r
}

// onSealed records a reader's answer; it reports whether every reader has
// sealed.
func (r *epochState) onSealed(m *messages.Sealed) bool {
	if m.Epoch == r.epoch && r.waitSeal[m.Partition] {
		delete(r.waitSeal, m.Partition)
		r.sealed[m.Partition] = m
	}
	return r.allSealed()
}

func (r *epochState) allSealed() bool { return len(r.waitSeal) == 0 }

// expectFlushes names the buffers that must answer Flush.
func (r *epochState) expectFlushes(keys []string) {
	for _, k := range keys {
		r.waitFlush[k] = true
	}
}

// onFlushed records a buffer's answer; it reports whether every buffer has
// answered.
func (r *epochState) onFlushed(m *messages.Flushed) bool {
	if m.Epoch == r.epoch && r.waitFlush[m.Buffer] {
		delete(r.waitFlush, m.Buffer)
		switch {
		case m.Err != nil && r.err == nil:
			r.err = m.Err
		case m.Idle:
			r.idle = append(r.idle, m.Buffer)
		default:
			r.active = append(r.active, m.Buffer)
		}
		r.files = append(r.files, m.Files...)
	}
	return r.allFlushed()
}

func (r *epochState) allFlushed() bool { return len(r.waitFlush) == 0 }

// deadLetters are the epoch's records bound for the DLQ.
func (r *epochState) deadLetters() []messages.DeadLetter {
	var out []messages.DeadLetter
	for _, s := range r.sealed {
		out = append(out, s.DeadLetters...)
	}
	return out
}

// offsets are the last offsets consumed in the epoch, for the partitions
// that advanced.
func (r *epochState) offsets() map[int32]int64 {
	out := map[int32]int64{}
	for p, s := range r.sealed {
		if s.LastOffset >= 0 {
			out[p] = s.LastOffset
		}
	}
	return out
}

// empty reports an epoch with nothing to commit: no rows and no offsets.
func (r *epochState) empty() bool { return len(r.files) == 0 && len(r.offsets()) == 0 }

// records is the number of Kafka records the epoch consumed.
func (r *epochState) records() int64 {
	var n int64
	for _, s := range r.sealed {
		n += s.Records
	}
	return n
}

// commitActions are the epoch's commit: an add per data file and a txn per
// partition that advanced (version = last offset consumed).
func (r *epochState) commitActions(app string, now time.Time) (actions []delta.Action, rows, bytes int64) {
	for _, f := range r.files {
		actions = append(actions, delta.Action{Add: &delta.Add{
			Path: f.Path, PartitionValues: f.PartitionValues, Size: f.Size,
			ModificationTime: f.ModificationTime, DataChange: true, Stats: f.Stats,
		}})
		rows += f.Rows
		bytes += f.Size
	}
	ms := now.UnixMilli()
	offsets := r.offsets()
	for _, p := range slices.Sorted(maps.Keys(offsets)) {
		actions = append(actions, delta.Action{Txn: &delta.Txn{AppID: TxnAppID(app, r.topic, p), Version: offsets[p], LastUpdated: &ms}})
	}
	return actions, rows, bytes
}

// newestValue returns the largest maximum of the timestamp column col over
// the files' stats; false when no file's stats carry one.
func newestValue(files []messages.DataFile, col string) (time.Time, bool) {
	var newest time.Time
	if col == "" {
		return newest, false
	}
	for _, f := range files {
		st, err := delta.ParseStats(f.Stats)
		if err != nil {
			continue
		}
		s, ok := st.MaxValues[col].(string)
		if !ok {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err == nil && t.After(newest) {
			newest = t
		}
	}
	return newest, !newest.IsZero()
}
