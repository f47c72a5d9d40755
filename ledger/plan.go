package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/deltaflow/deltaflow/delta"
)

// Policy is what the configuration says of starts: kafka.start_offset
// for partitions the table holds no offset for, kafka.on_data_loss for
// offsets the log no longer continues from.
type Policy struct {
	StartOffset string // StartEarliest or StartLatest
	OnDataLoss  string // OnDataLossFail or OnDataLossSkip
}

// TableStarts is what the table says of a topic's partitions, for
// PlanStarts.
type TableStarts struct {
	// next is the next offset of each partition the app holds a txn for.
	Next map[int32]int64
	// storedID is the topic ID recorded with them ("" none).
	StoredID string
	// foreign are other apps' last offsets of the topic (Foreign).
	Foreign map[string]map[int32]int64
	// recovered are the last offsets found in the log's history for
	// partitions next lacks (Recover): txns another engine's
	// checkpoint dropped as expired.
	Recovered map[int32]int64
	// forgotten is set when partitions next and recovered lack may still
	// have had offsets: the table expires txns (retention, its value) and
	// the history was not read back to its start.
	Forgotten bool
	Retention string
}

// Plan is what PlanStarts decides for assigned partitions.
type Plan struct {
	// next is where each assigned partition starts: an offset, or
	// Held for one refused (for data loss or in refused).
	Next map[int32]int64
	// write are the next offsets to commit as txns before reading: the
	// resolved start_offset of new partitions (durable, as Spark writes
	// offsets/0 before batch 0), the resume points of skipped losses, and
	// the recovered offsets (live again for other engines).
	Write map[int32]int64
	// topicID is the topic ID to record in the table; "" leaves it.
	TopicID string
	// losses are the partitions whose offset the log no longer continues
	// from, held or skipped as the policy says.
	Losses []*DataLossError
	Skip   bool // the losses are skipped (written), not held
	// refused are the partitions held because every start deltaflow could
	// choose might write records again (another app's offsets, forgotten
	// ones), with the reason; no policy skips them.
	Refused map[int32]error
	// recovered are the partitions started from the log's history.
	Recovered map[int32]int64
}

// PlanStarts decides where the assigned partitions start. ts says what the
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
func PlanStarts(assigned []int32, ts TableStarts, logs TopicLogs, pol Policy, app string) (Plan, error) {
	plan := Plan{Next: map[int32]int64{}, Write: map[int32]int64{}, Skip: pol.OnDataLoss == OnDataLossSkip,
		Refused: map[int32]error{}, Recovered: map[int32]int64{}}
	table := maps.Clone(ts.Next)
	for p, last := range ts.Recovered {
		table[p] = last + 1
	}
	storedID := ts.StoredID
	recreated := storedID != "" && logs.ID != "" && storedID != logs.ID
	// check returns p's log, the table's next offset for it (-1: none) and
	// the loss reading from there would cause.
	check := func(p int32) (LogRange, int64, *DataLossError, error) {
		r, ok := logs.Ranges[p]
		if !ok {
			return r, 0, nil, fmt.Errorf("topic %s has no partition %d (it has %d)", logs.Topic, p, len(logs.Ranges))
		}
		next, ok := table[p]
		if !ok {
			next = -1
		}
		return r, next, CheckNext(logs.Topic, p, next, storedID, logs.ID, r), nil
	}
	for _, p := range assigned {
		r, next, loss, err := check(p)
		switch {
		case err != nil:
			return Plan{}, err
		case loss != nil:
			plan.Losses = append(plan.Losses, loss)
			plan.Next[p] = Held
			if plan.Skip {
				plan.Next[p], plan.Write[p] = loss.Resume, loss.Resume
			}
		case next >= 0:
			plan.Next[p] = next
			if last, ok := ts.Recovered[p]; ok {
				plan.Recovered[p], plan.Write[p] = last, next
			}
		default:
			if refusal := ts.refusal(logs.Topic, p, app); refusal != nil {
				plan.Next[p], plan.Refused[p] = Held, refusal
				continue
			}
			start := r.Start
			if pol.StartOffset == StartLatest {
				start = r.End
			}
			plan.Next[p], plan.Write[p] = start, start
		}
	}
	if recreated && plan.Skip {
		for _, p := range slices.Sorted(maps.Keys(table)) {
			if _, done := plan.Next[p]; done {
				continue
			}
			if _, _, loss, err := check(p); err == nil && loss != nil {
				plan.Losses = append(plan.Losses, loss)
				plan.Write[p] = loss.Resume
			}
		}
	}
	if logs.ID != "" && (storedID == "" || (recreated && plan.Skip)) {
		plan.TopicID = logs.ID
	}
	return plan, nil
}

// refusal is why partition p, which the app holds no offset of, must not
// start at start_offset, or nil: another app's offsets of it, or offsets
// of its own that may have expired out of the table.
func (ts *TableStarts) refusal(topic string, p int32, app string) error {
	others := map[string]int64{}
	for other, last := range ts.Foreign {
		if v, ok := last[p]; ok {
			others[other] = v + 1
		}
	}
	if len(others) > 0 {
		return &ForeignOffsetsError{Topic: topic, Partition: p, App: app, Others: others}
	}
	if ts.Forgotten {
		return &ForgottenOffsetsError{Topic: topic, Partition: p, App: app, Retention: ts.Retention}
	}
	return nil
}

// reason says why partition p is held ("" if it is not).
func (p *Plan) Reason(part int32) string {
	if err, ok := p.Refused[part]; ok {
		return err.Error()
	}
	for _, l := range p.Losses {
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
func (p *Plan) Operation(pol Policy, idProperty string) delta.Operation {
	if p.Skip && len(p.Losses) > 0 {
		lost := make([]LossParameter, len(p.Losses))
		for i, l := range p.Losses {
			lost[i] = LossParameter{Partition: l.Partition, Cause: l.Cause, NextOffset: l.Next, LogStart: l.Log.Start,
				LogEnd: l.Log.End, Records: l.Lost(), ResumeAt: l.Resume}
		}
		// Parameter values are JSON text, as Spark writes them (its
		// DESCRIBE HISTORY reads a map of strings).
		js, _ := json.Marshal(lost)
		params := map[string]any{"topic": p.Losses[0].Topic, "partitions": string(js)}
		if p.TopicID != "" {
			params["topicId"] = p.TopicID
		}
		return delta.Operation{Name: "DATA_LOSS", Parameters: params}
	}
	if len(p.Write) > 0 {
		params := map[string]any{}
		if len(p.Write) > len(p.Recovered) {
			params["by"], params["startOffset"] = "kafka.start_offset", pol.StartOffset
		}
		if len(p.Recovered) > 0 {
			// The last offsets the log's history held, committed again.
			js, _ := json.Marshal(p.Recovered)
			params["recovered"] = string(js)
			if params["by"] == nil {
				params["by"] = "table history"
			}
		}
		return delta.Operation{Name: "SEEK", Parameters: params}
	}
	props, _ := json.Marshal(map[string]string{idProperty: p.TopicID})
	return delta.Operation{Name: "SET TBLPROPERTIES", Parameters: map[string]any{"properties": string(props)}}
}

// LossParameter is one partition of a DATA_LOSS commit's "partitions"
// parameter.
type LossParameter struct {
	Partition  int32  `json:"partition"`
	Cause      string `json:"cause"`
	NextOffset int64  `json:"nextOffset"`
	LogStart   int64  `json:"logStart"`
	LogEnd     int64  `json:"logEnd"`
	Records    int64  `json:"records"` // -1: unknown (a recreated topic)
	ResumeAt   int64  `json:"resumeAt"`
}

// empty reports whether the plan writes nothing.
func (p *Plan) Empty() bool { return len(p.Write) == 0 && p.TopicID == "" }

// ReadStarts reads what the table says of topic's partitions ps, for
// PlanStarts: app's next offsets and the topic ID recorded with them, other
// apps' offsets of the topic and, on a table whose txns expire
// (delta.setTransactionRetentionDuration), the offsets of its own that only
// the log's history still holds (Recover): another engine's checkpoint
// drops expired txns.
func ReadStarts(ctx context.Context, tbl *delta.Table, s *delta.Snapshot, app, topic string, ps []int32) (TableStarts, error) {
	ts := TableStarts{Next: map[int32]int64{}, Foreign: Foreign(s, app, topic),
		StoredID: s.Metadata().Configuration[TopicIDProperty(app, topic)]}
	for p, v := range Last(s, app, topic) {
		ts.Next[p] = v + 1
	}
	// The app had offsets of the topic if the table recorded its topic ID
	// or holds some.
	if _, expires := s.TxnRetention(); !expires || (ts.StoredID == "" && len(ts.Next) == 0) {
		return ts, nil
	}
	missing := slices.DeleteFunc(slices.Clone(ps), func(p int32) bool { _, ok := ts.Next[p]; return ok })
	if len(missing) == 0 {
		return ts, nil
	}
	recovered, certain, err := Recover(ctx, tbl, s, app, topic, missing)
	if err != nil {
		return TableStarts{}, err
	}
	ts.Recovered, ts.Forgotten = recovered, !certain
	ts.Retention = s.Metadata().Configuration["delta.setTransactionRetentionDuration"]
	return ts, nil
}

// Change is a write of offsets: the next offset of each partition, a topic
// ID to record ("" none), and the operation naming the commit.
type Change struct {
	Next    map[int32]int64
	TopicID string
	Op      delta.Operation
}

// empty reports whether the change writes nothing.
func (c Change) empty() bool { return len(c.Next) == 0 && c.TopicID == "" }

// Settle commits, after s, the change decide returns (nothing when it is
// empty; version -1), deciding again when another writer's commit
// conflicts with it (s has then advanced to that commit), up to three
// times: how processes that start partitions, or write configured start
// positions, at the same moment agree. decide must read the table through
// s.
func Settle(ctx context.Context, tbl *delta.Table, s *delta.Snapshot, app, topic string, decide func() (Change, error)) (int64, error) {
	var conflict error
	for range 3 {
		c, err := decide()
		if err != nil || c.empty() {
			return -1, err
		}
		v, err := Write(ctx, tbl, s, app, topic, c.Next, c.TopicID, c.Op)
		if delta.IsConflict(err) {
			conflict = err
			continue
		}
		return v, err
	}
	return -1, conflict
}
