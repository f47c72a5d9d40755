package actors

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/deltaflow/deltaflow/actors/offsets"
	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
)

// startPolicy is what the configuration says of starts: kafka.start_offset
// for partitions the table holds no offset for, kafka.on_data_loss for
// offsets the log no longer continues from.
type startPolicy struct {
	startOffset string // kafka.StartEarliest or kafka.StartLatest
	onDataLoss  string // kafka.OnDataLossFail or kafka.OnDataLossSkip
}

// tableStarts is what the table says of a topic's partitions, for
// planStarts.
type tableStarts struct {
	// next is the next offset of each partition the app holds a txn for.
	next map[int32]int64
	// storedID is the topic ID recorded with them ("" none).
	storedID string
	// foreign are other apps' last offsets of the topic (offsets.Foreign).
	foreign map[string]map[int32]int64
	// recovered are the last offsets found in the log's history for
	// partitions next lacks (offsets.Recover): txns another engine's
	// checkpoint dropped as expired.
	recovered map[int32]int64
	// forgotten is set when partitions next and recovered lack may still
	// have had offsets: the table expires txns (retention, its value) and
	// the history was not read back to its start.
	forgotten bool
	retention string
}

// startPlan is what planStarts decides for assigned partitions.
type startPlan struct {
	// next is where each assigned partition starts: an offset, or
	// kafka.Held for one refused (for data loss or in refused).
	next map[int32]int64
	// write are the next offsets to commit as txns before reading: the
	// resolved start_offset of new partitions (durable, as Spark writes
	// offsets/0 before batch 0), the resume points of skipped losses, and
	// the recovered offsets (live again for other engines).
	write map[int32]int64
	// topicID is the topic ID to record in the table; "" leaves it.
	topicID string
	// losses are the partitions whose offset the log no longer continues
	// from, held or skipped as the policy says.
	losses []*kafka.DataLossError
	skip   bool // the losses are skipped (written), not held
	// refused are the partitions held because every start deltaflow could
	// choose might write records again (another app's offsets, forgotten
	// ones), with the reason; no policy skips them.
	refused map[int32]error
	// recovered are the partitions started from the log's history.
	recovered map[int32]int64
}

// planStarts decides where the assigned partitions start. ts says what the
// table holds, logs what the brokers say now. It never reads past a loss
// silently: a partition whose next offset is below its log start, beyond
// its log end, or of a topic with another ID is held, or with on_data_loss
// skip written as resuming at the log start. On a recreated topic every
// partition the table knows is a loss (its offsets count in the old topic),
// assigned here or not: skipping rewrites them all, so no other process
// resumes one of them at an old offset under the new ID. Nor does it read a
// topic again: a partition without an offset of its own starts at
// start_offset only when no other app holds offsets of it and none of its
// own may have been forgotten.
func planStarts(assigned []int32, ts tableStarts, logs kafka.TopicLogs, pol startPolicy, app string) (startPlan, error) {
	plan := startPlan{next: map[int32]int64{}, write: map[int32]int64{}, skip: pol.onDataLoss == kafka.OnDataLossSkip,
		refused: map[int32]error{}, recovered: map[int32]int64{}}
	table := maps.Clone(ts.next)
	for p, last := range ts.recovered {
		table[p] = last + 1
	}
	storedID := ts.storedID
	recreated := storedID != "" && logs.ID != "" && storedID != logs.ID
	// check returns p's log, the table's next offset for it (-1: none) and
	// the loss reading from there would cause.
	check := func(p int32) (kafka.LogRange, int64, *kafka.DataLossError, error) {
		r, ok := logs.Ranges[p]
		if !ok {
			return r, 0, nil, fmt.Errorf("topic %s has no partition %d (it has %d)", logs.Topic, p, len(logs.Ranges))
		}
		next, ok := table[p]
		if !ok {
			next = -1
		}
		return r, next, kafka.CheckNext(logs.Topic, p, next, storedID, logs.ID, r), nil
	}
	for _, p := range assigned {
		r, next, loss, err := check(p)
		switch {
		case err != nil:
			return startPlan{}, err
		case loss != nil:
			plan.losses = append(plan.losses, loss)
			plan.next[p] = kafka.Held
			if plan.skip {
				plan.next[p], plan.write[p] = loss.Resume, loss.Resume
			}
		case next >= 0:
			plan.next[p] = next
			if last, ok := ts.recovered[p]; ok {
				plan.recovered[p], plan.write[p] = last, next
			}
		default:
			if refusal := ts.refusal(logs.Topic, p, app); refusal != nil {
				plan.next[p], plan.refused[p] = kafka.Held, refusal
				continue
			}
			start := r.Start
			if pol.startOffset == kafka.StartLatest {
				start = r.End
			}
			plan.next[p], plan.write[p] = start, start
		}
	}
	if recreated && plan.skip {
		for _, p := range slices.Sorted(maps.Keys(table)) {
			if _, done := plan.next[p]; done {
				continue
			}
			if _, _, loss, err := check(p); err == nil && loss != nil {
				plan.losses = append(plan.losses, loss)
				plan.write[p] = loss.Resume
			}
		}
	}
	if logs.ID != "" && (storedID == "" || (recreated && plan.skip)) {
		plan.topicID = logs.ID
	}
	return plan, nil
}

// refusal is why partition p, which the app holds no offset of, must not
// start at start_offset, or nil: another app's offsets of it, or offsets
// of its own that may have expired out of the table.
func (ts *tableStarts) refusal(topic string, p int32, app string) error {
	others := map[string]int64{}
	for other, last := range ts.foreign {
		if v, ok := last[p]; ok {
			others[other] = v + 1
		}
	}
	if len(others) > 0 {
		return &offsets.ForeignOffsetsError{Topic: topic, Partition: p, App: app, Others: others}
	}
	if ts.forgotten {
		return &offsets.ForgottenOffsetsError{Topic: topic, Partition: p, App: app, Retention: ts.retention}
	}
	return nil
}

// reason says why partition p is held ("" if it is not).
func (p *startPlan) reason(part int32) string {
	if err, ok := p.refused[part]; ok {
		return err.Error()
	}
	for _, l := range p.losses {
		if l.Partition == part {
			return l.Error()
		}
	}
	return ""
}

// operation names the commit that carries the plan's writes in the table's
// history: DATA_LOSS when losses are skipped (what was lost, where reading
// resumes), SEEK for start_offset resolutions, SET TBLPROPERTIES for the
// topic ID alone (as Spark names a property change).
func (p *startPlan) operation(pol startPolicy, idProperty string) delta.Operation {
	if p.skip && len(p.losses) > 0 {
		lost := make([]lossParameter, len(p.losses))
		for i, l := range p.losses {
			lost[i] = lossParameter{Partition: l.Partition, Cause: l.Cause, NextOffset: l.Next, LogStart: l.Log.Start,
				LogEnd: l.Log.End, Records: l.Lost(), ResumeAt: l.Resume}
		}
		// Parameter values are JSON text, as Spark writes them (its
		// DESCRIBE HISTORY reads a map of strings).
		js, _ := json.Marshal(lost)
		params := map[string]any{"topic": p.losses[0].Topic, "partitions": string(js)}
		if p.topicID != "" {
			params["topicId"] = p.topicID
		}
		return delta.Operation{Name: "DATA_LOSS", Parameters: params}
	}
	if len(p.write) > 0 {
		params := map[string]any{}
		if len(p.write) > len(p.recovered) {
			params["by"], params["startOffset"] = "kafka.start_offset", pol.startOffset
		}
		if len(p.recovered) > 0 {
			// The last offsets the log's history held, committed again.
			js, _ := json.Marshal(p.recovered)
			params["recovered"] = string(js)
			if params["by"] == nil {
				params["by"] = "table history"
			}
		}
		return delta.Operation{Name: "SEEK", Parameters: params}
	}
	props, _ := json.Marshal(map[string]string{idProperty: p.topicID})
	return delta.Operation{Name: "SET TBLPROPERTIES", Parameters: map[string]any{"properties": string(props)}}
}

// lossParameter is one partition of a DATA_LOSS commit's "partitions"
// parameter.
type lossParameter struct {
	Partition  int32  `json:"partition"`
	Cause      string `json:"cause"`
	NextOffset int64  `json:"nextOffset"`
	LogStart   int64  `json:"logStart"`
	LogEnd     int64  `json:"logEnd"`
	Records    int64  `json:"records"` // -1: unknown (a recreated topic)
	ResumeAt   int64  `json:"resumeAt"`
}

// empty reports whether the plan writes nothing.
func (p *startPlan) empty() bool { return len(p.write) == 0 && p.topicID == "" }
