package ledger

import (
	"maps"
	"slices"
	"testing"
)

// lr is the log range [start, end).
func lr(start, end int64) LogRange { return LogRange{Start: start, End: end} }

func TestPlanStarts(t *testing.T) {
	logs := func(id string, ranges map[int32]LogRange) TopicLogs {
		return TopicLogs{Topic: "sensor-events", ID: id, Ranges: ranges}
	}
	fail := Policy{StartOffset: StartEarliest, OnDataLoss: OnDataLossFail}
	skip := Policy{StartOffset: StartEarliest, OnDataLoss: OnDataLossSkip}
	latest := Policy{StartOffset: StartLatest, OnDataLoss: OnDataLossFail}
	held := Held
	for _, tc := range []struct {
		name     string
		assigned []int32
		table    map[int32]int64
		storedID string
		logs     TopicLogs
		pol      Policy
		next     map[int32]int64
		write    map[int32]int64
		topicID  string
		losses   int
		// what else the table says (Foreign, Recover)
		foreign   map[string]map[int32]int64
		recovered map[int32]int64
		forgotten bool
		refused   []int32
	}{
		{name: "new table, earliest: starts written, ID recorded", assigned: []int32{0, 1},
			logs: logs("A", map[int32]LogRange{0: lr(5, 10), 1: lr(0, 0)}), pol: fail,
			next: map[int32]int64{0: 5, 1: 0}, write: map[int32]int64{0: 5, 1: 0}, topicID: "A"},
		{name: "new partition, latest", assigned: []int32{0, 1}, table: map[int32]int64{0: 7}, storedID: "A",
			logs: logs("A", map[int32]LogRange{0: lr(5, 10), 1: lr(3, 9)}), pol: latest,
			next: map[int32]int64{0: 7, 1: 9}, write: map[int32]int64{1: 9}},
		{name: "offsets in the log: nothing written", assigned: []int32{0}, table: map[int32]int64{0: 10}, storedID: "A",
			logs: logs("A", map[int32]LogRange{0: lr(5, 10)}), pol: fail,
			next: map[int32]int64{0: 10}, write: map[int32]int64{}},
		{name: "no ID recorded yet: recorded", assigned: []int32{0}, table: map[int32]int64{0: 10},
			logs: logs("A", map[int32]LogRange{0: lr(5, 10)}), pol: fail,
			next: map[int32]int64{0: 10}, write: map[int32]int64{}, topicID: "A"},
		{name: "retention, fail: held", assigned: []int32{0, 1}, table: map[int32]int64{0: 2, 1: 6}, storedID: "A",
			logs: logs("A", map[int32]LogRange{0: lr(5, 10), 1: lr(5, 10)}), pol: fail,
			next: map[int32]int64{0: held, 1: 6}, write: map[int32]int64{}, losses: 1},
		{name: "retention, skip: resume at the log start", assigned: []int32{0}, table: map[int32]int64{0: 2}, storedID: "A",
			logs: logs("A", map[int32]LogRange{0: lr(5, 10)}), pol: skip,
			next: map[int32]int64{0: 5}, write: map[int32]int64{0: 5}, losses: 1},
		{name: "recreated, fail: every assigned partition held, ID kept", assigned: []int32{0}, table: map[int32]int64{0: 3, 1: 4}, storedID: "A",
			logs: logs("B", map[int32]LogRange{0: lr(0, 9), 1: lr(0, 2)}), pol: fail,
			next: map[int32]int64{0: held}, write: map[int32]int64{}, losses: 1},
		{name: "recreated, skip: every partition the table knows rewritten, new ID", assigned: []int32{0}, table: map[int32]int64{0: 3, 1: 4, 7: 1}, storedID: "A",
			logs: logs("B", map[int32]LogRange{0: lr(0, 9), 1: lr(0, 2)}), pol: skip,
			next: map[int32]int64{0: 0}, write: map[int32]int64{0: 0, 1: 0}, topicID: "B", losses: 2},
		{name: "log ends before the offset", assigned: []int32{0}, table: map[int32]int64{0: 30}, storedID: "A",
			logs: logs("A", map[int32]LogRange{0: lr(0, 12)}), pol: skip,
			next: map[int32]int64{0: 0}, write: map[int32]int64{0: 0}, losses: 1},
		{name: "another app's offsets: held, whatever the policy", assigned: []int32{0, 1}, storedID: "A",
			foreign: map[string]map[int32]int64{"old": {0: 41}}, logs: logs("A", map[int32]LogRange{0: lr(0, 50), 1: lr(0, 5)}),
			pol: skip, next: map[int32]int64{0: held, 1: 0}, write: map[int32]int64{1: 0}, refused: []int32{0}},
		{name: "another app's offsets of a partition the app holds: ignored", assigned: []int32{0}, table: map[int32]int64{0: 7}, storedID: "A",
			foreign: map[string]map[int32]int64{"old": {0: 41}}, logs: logs("A", map[int32]LogRange{0: lr(0, 50)}),
			pol: fail, next: map[int32]int64{0: 7}, write: map[int32]int64{}},
		{name: "expired offsets found in the history: resumed there, written again", assigned: []int32{0, 1}, table: map[int32]int64{1: 3}, storedID: "A",
			recovered: map[int32]int64{0: 19}, logs: logs("A", map[int32]LogRange{0: lr(0, 50), 1: lr(0, 5)}),
			pol: fail, next: map[int32]int64{0: 20, 1: 3}, write: map[int32]int64{0: 20}},
		{name: "expired offsets found, then deleted by retention: a loss", assigned: []int32{0}, storedID: "A",
			recovered: map[int32]int64{0: 19}, logs: logs("A", map[int32]LogRange{0: lr(30, 50)}),
			pol: fail, next: map[int32]int64{0: held}, write: map[int32]int64{}, losses: 1},
		{name: "offsets that may be forgotten: held", assigned: []int32{0, 1}, table: map[int32]int64{1: 3}, storedID: "A",
			forgotten: true, logs: logs("A", map[int32]LogRange{0: lr(0, 50), 1: lr(0, 5)}),
			pol: skip, next: map[int32]int64{0: held, 1: 3}, write: map[int32]int64{}, refused: []int32{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.table == nil {
				tc.table = map[int32]int64{}
			}
			ts := TableStarts{Next: tc.table, StoredID: tc.storedID, Foreign: tc.foreign, Recovered: tc.recovered, Forgotten: tc.forgotten}
			plan, err := PlanStarts(tc.assigned, ts, tc.logs, tc.pol, "deltaflow")
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(plan.Next, tc.next) || !maps.Equal(plan.Write, tc.write) || plan.TopicID != tc.topicID || len(plan.Losses) != tc.losses {
				t.Errorf("next %v write %v topicID %q losses %d; want %v %v %q %d",
					plan.Next, plan.Write, plan.TopicID, len(plan.Losses), tc.next, tc.write, tc.topicID, tc.losses)
			}
			if refused := slices.Sorted(maps.Keys(plan.Refused)); !slices.Equal(refused, tc.refused) {
				t.Errorf("refused %v; want %v", refused, tc.refused)
			}
			for _, p := range tc.refused {
				if plan.Reason(p) == "" {
					t.Errorf("partition %d refused without a reason", p)
				}
			}
		})
	}
	if _, err := PlanStarts([]int32{3}, TableStarts{}, logs("A", map[int32]LogRange{0: lr(0, 0)}), fail, "deltaflow"); err == nil {
		t.Error("a partition the topic does not have was planned")
	}
}
