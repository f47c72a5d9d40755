package ledger

import (
	"strings"
	"testing"
)

func TestCheckNext(t *testing.T) {
	log := LogRange{Start: 45, End: 60}
	for _, tc := range []struct {
		name         string
		next         int64
		storedID, id string
		r            LogRange
		cause        string // "": no loss
		lost, resume int64
		msg          []string
	}{
		{name: "nothing stored", next: -1, r: log},
		{name: "at the log start", next: 45, r: log},
		{name: "inside", next: 50, r: log},
		{name: "at the end: caught up", next: 60, r: log},
		{name: "same topic ID", next: 50, storedID: "A", id: "A", r: log},
		{name: "no ID recorded yet", next: 50, id: "B", r: log},
		{name: "brokers without IDs", next: 50, storedID: "A", r: log},
		{name: "below the log start", next: 30, r: log, cause: LossRetention, lost: 15, resume: 45,
			msg: []string{"sensor-events[0]", "offsets 30-44 (15 records)", "log now starts at 45", "kafka.on_data_loss: skip",
				"deltaflow seek --offsets 0:45 --force"}},
		{name: "beyond the log end", next: 70, r: log, cause: LossRecreated, lost: -1, resume: 45,
			msg: []string{"the log ends at 60, before the table's next offset 70", "offsets 45-59"}},
		{name: "another topic ID", next: 50, storedID: "A", id: "B", r: LogRange{Start: 0, End: 60}, cause: LossRecreated, lost: -1,
			msg: []string{"deleted and created again (topic ID B, the table's offsets are of A)"}},
		{name: "recreated and empty", next: 50, storedID: "A", id: "B", r: LogRange{}, cause: LossRecreated, lost: -1,
			msg: []string{"the new log is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := CheckNext("sensor-events", 0, tc.next, tc.storedID, tc.id, tc.r)
			if tc.cause == "" {
				if e != nil {
					t.Fatalf("loss %v, want none", e)
				}
				return
			}
			if e == nil {
				t.Fatalf("no loss, want %s", tc.cause)
			}
			if e.Cause != tc.cause || e.Lost() != tc.lost || e.Resume != tc.resume {
				t.Errorf("cause %s, lost %d, resume %d; want %s, %d, %d", e.Cause, e.Lost(), e.Resume, tc.cause, tc.lost, tc.resume)
			}
			for _, m := range tc.msg {
				if !strings.Contains(e.Error(), m) {
					t.Errorf("message %q lacks %q", e.Error(), m)
				}
			}
		})
	}
}
