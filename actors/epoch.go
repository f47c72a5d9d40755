package actors

import (
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/messages"
	"github.com/deltaflow/deltaflow/upsert"
)

// epochState is the bookkeeping of one epoch, from Seal to commit: which readers
// and buffers must still answer, and what they answered. It is plain data,
// driven by the committer.
type epochState struct {
	epoch   uint64
	started time.Time       // sealed
	reason  messages.Reason // why it was sealed

	waitSeal  map[tp]bool
	sealed    map[tp]*messages.Sealed
	waitFlush map[string]bool
	files     []messages.DataFile
	idle      []string // buffers (by id) that had no rows for the epoch
	active    []string // buffers that had
	err       error    // first buffer failure
}

func newEpochState(epoch uint64, readers []tp, reason messages.Reason, now time.Time) *epochState {
	es := &epochState{epoch: epoch, started: now, reason: reason, waitSeal: map[tp]bool{}, sealed: map[tp]*messages.Sealed{}, waitFlush: map[string]bool{}}
	for _, p := range readers {
		es.waitSeal[p] = true
	}
	return es
}

// onSealed records a reader's answer; it reports whether every reader has
// sealed.
func (es *epochState) onSealed(m *messages.Sealed) bool {
	if key := (tp{Topic: m.Topic, Partition: m.Partition}); m.Epoch == es.epoch && es.waitSeal[key] {
		delete(es.waitSeal, key)
		es.sealed[key] = m
	}
	return es.allSealed()
}

func (es *epochState) allSealed() bool { return len(es.waitSeal) == 0 }

// expectFlushes names the buffers (by PID id) that must answer Flush.
func (es *epochState) expectFlushes(ids []string) {
	for _, id := range ids {
		es.waitFlush[id] = true
	}
}

// onFlushed records a buffer's answer; it reports whether every buffer has
// answered.
func (es *epochState) onFlushed(m *messages.Flushed) bool {
	if m.Epoch == es.epoch && es.waitFlush[m.Buffer] {
		delete(es.waitFlush, m.Buffer)
		switch {
		case m.Err != nil && es.err == nil:
			es.err = m.Err
		case m.Idle:
			es.idle = append(es.idle, m.Buffer)
		default:
			es.active = append(es.active, m.Buffer)
		}
		es.files = append(es.files, m.Files...)
	}
	return es.allFlushed()
}

func (es *epochState) allFlushed() bool { return len(es.waitFlush) == 0 }

// deadLetters are the epoch's records bound for the DLQ.
func (es *epochState) deadLetters() []messages.DeadLetter {
	var out []messages.DeadLetter
	for _, s := range es.sealed {
		out = append(out, s.DeadLetters...)
	}
	return out
}

// letterMemory is what the epoch's dead letters and deletes hold, counted
// in the memory budget by the readers until the epoch ends.
func (es *epochState) letterMemory() int64 {
	var n int64
	for _, s := range es.sealed {
		for _, d := range s.DeadLetters {
			n += letterMemory(d.Key, d.Value, d.Reason)
		}
		n += s.Deletes.KeyBytes() + deleteMemory*int64(s.Deletes.Len())
	}
	return n
}

// changes are an upsert table's changes of the epoch: its files' rows and
// its readers' deletes.
func (es *epochState) changes() upsert.Changes {
	var ch upsert.Changes
	for i := range es.files {
		f := &es.files[i]
		ch.Files = append(ch.Files, upsert.NewFile{Add: addOf(f), Rows: f.Keys})
	}
	for _, s := range es.sealed {
		for i := range s.Deletes.Len() {
			ch.Deletes.Append(s.Deletes.At(i))
		}
	}
	return ch
}

// offsets are the last offsets consumed in the epoch, for the partitions
// that advanced.
func (es *epochState) offsets() map[tp]int64 {
	out := map[tp]int64{}
	for p, s := range es.sealed {
		if s.LastOffset >= 0 {
			out[p] = s.LastOffset
		}
	}
	return out
}

// empty reports an epoch with nothing to commit: no rows and no offsets.
func (es *epochState) empty() bool { return len(es.files) == 0 && len(es.offsets()) == 0 }

// records is the number of Kafka records the epoch consumed.
func (es *epochState) records() int64 {
	var n int64
	for _, s := range es.sealed {
		n += s.Records
	}
	return n
}

// addOf is the add action of a data file.
func addOf(f *messages.DataFile) *delta.Add {
	return &delta.Add{Path: f.Path, PartitionValues: f.PartitionValues, Size: f.Size,
		ModificationTime: f.ModificationTime, DataChange: true, Stats: f.Stats}
}

// commitActions are the epoch's commit: an add per data file (none for an
// upsert table, whose changes are resolved when it is written) and a txn
// per partition that advanced (version = last offset consumed).
func (es *epochState) commitActions(app string, upserts bool, now time.Time) (actions []delta.Action, rows, bytes int64) {
	for i := range es.files {
		if !upserts {
			actions = append(actions, delta.Action{Add: addOf(&es.files[i])})
		}
		rows += es.files[i].Rows
		bytes += es.files[i].Size
	}
	ms := now.UnixMilli()
	last := es.offsets()
	for _, p := range sortedTPs(last) {
		actions = append(actions, delta.Action{Txn: &delta.Txn{AppID: ledger.AppID(app, p.Topic, p.Partition), Version: last[p], LastUpdated: &ms}})
	}
	return actions, rows, bytes
}

// newestValue returns the largest maximum of the timestamp column col over
// the files' stats that is not after notAfter (zero when none is), and how
// many files' maximum is after it.
func newestValue(files []messages.DataFile, col string, notAfter time.Time) (newest time.Time, after int) {
	if col == "" {
		return newest, 0
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
		switch {
		case err != nil:
		case t.After(notAfter):
			after++
		case t.After(newest):
			newest = t
		}
	}
	return newest, after
}
