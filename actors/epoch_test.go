package actors

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/messages"
)

func TestEpochStateSeal(t *testing.T) {
	letter := func(off int64) messages.DeadLetter { return messages.DeadLetter{Topic: topic, Offset: off} }
	for _, tc := range []struct {
		name     string
		readers  []int32
		sealed   []*messages.Sealed
		all      bool            // what the last onSealed reports (allSealed when none)
		offsets  map[int32]int64 // want
		records  int64
		dlq      int
		waitSeal []int32
	}{
		{name: "no readers", all: true, offsets: map[int32]int64{}},
		{name: "every reader sealed", readers: []int32{0, 1},
			sealed:  []*messages.Sealed{{Epoch: 5, Partition: 1, LastOffset: 20, Records: 3}, {Epoch: 5, Partition: 0, LastOffset: 9, Records: 4}},
			all:     true,
			offsets: map[int32]int64{0: 9, 1: 20}, records: 7},
		{name: "one still to seal", readers: []int32{0, 1},
			sealed: []*messages.Sealed{{Epoch: 5, Partition: 0, LastOffset: 9}},
			all:    false, offsets: map[int32]int64{0: 9}, waitSeal: []int32{1}},
		{name: "another epoch's seal ignored", readers: []int32{0},
			sealed: []*messages.Sealed{{Epoch: 4, Partition: 0, LastOffset: 9, Records: 1}},
			all:    false, offsets: map[int32]int64{}, waitSeal: []int32{0}},
		{name: "an unknown partition ignored", readers: []int32{0},
			sealed: []*messages.Sealed{{Epoch: 5, Partition: 7, LastOffset: 9, Records: 1}},
			all:    false, offsets: map[int32]int64{}, waitSeal: []int32{0}},
		{name: "a second seal of a partition ignored", readers: []int32{0, 1},
			sealed: []*messages.Sealed{{Epoch: 5, Partition: 0, LastOffset: 9, Records: 1}, {Epoch: 5, Partition: 0, LastOffset: 12, Records: 1}},
			all:    false, offsets: map[int32]int64{0: 9}, records: 1, waitSeal: []int32{1}},
		{name: "a partition that read nothing has no offset", readers: []int32{0, 1},
			sealed: []*messages.Sealed{{Epoch: 5, Partition: 0, LastOffset: -1}, {Epoch: 5, Partition: 1, LastOffset: 0, Records: 1}},
			all:    true, offsets: map[int32]int64{1: 0}, records: 1},
		{name: "dead letters of every partition", readers: []int32{0, 1},
			sealed: []*messages.Sealed{
				{Epoch: 5, Partition: 0, LastOffset: 3, Records: 4, DeadLetters: []messages.DeadLetter{letter(1), letter(2)}},
				{Epoch: 5, Partition: 1, LastOffset: 8, Records: 1, DeadLetters: []messages.DeadLetter{letter(8)}},
			},
			all: true, offsets: map[int32]int64{0: 3, 1: 8}, records: 5, dlq: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := newEpochState(5, tps(tc.readers...), messages.ReasonTimer, time.Now())
			all := es.allSealed()
			for _, m := range tc.sealed {
				m.Topic = topic
				all = es.onSealed(m)
			}
			if all != tc.all {
				t.Errorf("all sealed = %v, want %v", all, tc.all)
			}
			if got := es.offsets(); !maps.Equal(got, ledger.Of(topic, tc.offsets)) {
				t.Errorf("offsets = %v, want %v", got, tc.offsets)
			}
			if got := es.records(); got != tc.records {
				t.Errorf("records = %d, want %d", got, tc.records)
			}
			if got := len(es.deadLetters()); got != tc.dlq {
				t.Errorf("%d dead letters, want %d", got, tc.dlq)
			}
			if got := sortedTPs(es.waitSeal); !slices.Equal(got, tps(tc.waitSeal...)) {
				t.Errorf("waiting for readers %v, want %v", got, tc.waitSeal)
			}
		})
	}
}

func TestEpochStateFlush(t *testing.T) {
	boom, again := errors.New("upload failed"), errors.New("upload failed too")
	file := func(name string) []messages.DataFile { return []messages.DataFile{{Path: name, Rows: 1, Size: 10}} }
	for _, tc := range []struct {
		name      string
		expect    []string
		flushed   []*messages.Flushed
		all       bool // what the last onFlushed reports (allFlushed when none)
		files     int
		idle      []string
		active    []string
		err       error
		waitFlush []string
		// aborted: the epoch fails, so which buffers were idle no longer
		// matters (the abort forgets them).
		aborted bool
	}{
		{name: "no buffers", all: true},
		{name: "every buffer flushed", expect: []string{"buffer-1", "buffer-2"},
			flushed: []*messages.Flushed{{Epoch: 5, Buffer: "buffer-2", Files: file("b")}, {Epoch: 5, Buffer: "buffer-1", Files: file("a")}},
			all:     true, files: 2, active: []string{"buffer-2", "buffer-1"}},
		{name: "one still to flush", expect: []string{"buffer-1", "buffer-2"},
			flushed: []*messages.Flushed{{Epoch: 5, Buffer: "buffer-1", Files: file("a")}},
			files:   1, active: []string{"buffer-1"}, waitFlush: []string{"buffer-2"}},
		{name: "idle buffer", expect: []string{"buffer-1"},
			flushed: []*messages.Flushed{{Epoch: 5, Buffer: "buffer-1", Idle: true}},
			all:     true, idle: []string{"buffer-1"}},
		{name: "another epoch's flush ignored", expect: []string{"buffer-1"},
			flushed:   []*messages.Flushed{{Epoch: 6, Buffer: "buffer-1", Files: file("a")}},
			waitFlush: []string{"buffer-1"}},
		{name: "an unknown buffer ignored", expect: []string{"buffer-1"},
			flushed:   []*messages.Flushed{{Epoch: 5, Buffer: "buffer-9", Files: file("a")}},
			waitFlush: []string{"buffer-1"}},
		{name: "a second flush of a buffer ignored", expect: []string{"buffer-1", "buffer-2"},
			flushed: []*messages.Flushed{{Epoch: 5, Buffer: "buffer-1", Files: file("a")}, {Epoch: 5, Buffer: "buffer-1", Files: file("a")}},
			files:   1, active: []string{"buffer-1"}, waitFlush: []string{"buffer-2"}},
		{name: "the first error is kept", expect: []string{"buffer-1", "buffer-2", "buffer-3"},
			flushed: []*messages.Flushed{
				{Epoch: 5, Buffer: "buffer-1", Err: boom},
				{Epoch: 5, Buffer: "buffer-2", Err: again},
				{Epoch: 5, Buffer: "buffer-3", Files: file("c")},
			},
			all: true, files: 1, err: boom, aborted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := newEpochState(5, nil, messages.ReasonTimer, time.Now())
			es.expectFlushes(tc.expect)
			all := es.allFlushed()
			for _, m := range tc.flushed {
				all = es.onFlushed(m)
			}
			if all != tc.all {
				t.Errorf("all flushed = %v, want %v", all, tc.all)
			}
			if len(es.files) != tc.files {
				t.Errorf("%d files, want %d", len(es.files), tc.files)
			}
			if !tc.aborted && (!slices.Equal(es.idle, tc.idle) || !slices.Equal(es.active, tc.active)) {
				t.Errorf("idle %v, active %v; want %v, %v", es.idle, es.active, tc.idle, tc.active)
			}
			if es.err != tc.err {
				t.Errorf("err = %v, want %v", es.err, tc.err)
			}
			if got := slices.Sorted(maps.Keys(es.waitFlush)); !slices.Equal(got, tc.waitFlush) {
				t.Errorf("waiting for buffers %v, want %v", got, tc.waitFlush)
			}
		})
	}
}

func TestEpochStateEmpty(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset int64 // partition 0's last offset; -1: read nothing
		files  []messages.DataFile
		empty  bool
	}{
		{"nothing read", -1, nil, true},
		{"records read, every one a dead letter", 9, nil, false}, // the offset must advance
		{"files", -1, []messages.DataFile{{Path: "a"}}, false},
		{"files and offsets", 9, []messages.DataFile{{Path: "a"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := newEpochState(1, tps(0), messages.ReasonTimer, time.Now())
			es.onSealed(&messages.Sealed{Topic: topic, Epoch: 1, Partition: 0, LastOffset: tc.offset})
			es.expectFlushes([]string{"buffer-1"})
			es.onFlushed(&messages.Flushed{Epoch: 1, Buffer: "buffer-1", Files: tc.files, Idle: len(tc.files) == 0})
			if got := es.empty(); got != tc.empty {
				t.Errorf("empty = %v, want %v", got, tc.empty)
			}
		})
	}
}

// commitActions: adds in the order the buffers answered, then one txn per
// partition that advanced, by partition, each stamped with the commit time.
func TestEpochStateCommitActions(t *testing.T) {
	now := time.UnixMilli(1_750_000_000_123)
	es := newEpochState(3, tps(2, 0, 1, 10), messages.ReasonTimer, now.Add(-time.Minute))
	for _, s := range []*messages.Sealed{
		{Epoch: 3, Partition: 10, LastOffset: 100},
		{Epoch: 3, Partition: 2, LastOffset: 7},
		{Epoch: 3, Partition: 1, LastOffset: -1}, // read nothing: no txn
		{Epoch: 3, Partition: 0, LastOffset: 0},
	} {
		s.Topic = topic
		es.onSealed(s)
	}
	es.expectFlushes([]string{"buffer-1", "buffer-2"})
	es.onFlushed(&messages.Flushed{Epoch: 3, Buffer: "buffer-2", Files: []messages.DataFile{{Path: "b", Size: 30, Rows: 3, Stats: `{"numRecords":3}`}}})
	es.onFlushed(&messages.Flushed{Epoch: 3, Buffer: "buffer-1", Files: []messages.DataFile{{Path: "a", Size: 20, Rows: 2}}})

	actions, rows, bytes := es.commitActions("app", false, now)

	var got []string
	for _, a := range actions {
		switch {
		case a.Add != nil:
			if !a.Add.DataChange {
				t.Errorf("add %s without dataChange", a.Add.Path)
			}
			got = append(got, fmt.Sprintf("add %s %d %s", a.Add.Path, a.Add.Size, a.Add.Stats))
		case a.Txn != nil:
			if a.Txn.LastUpdated == nil || *a.Txn.LastUpdated != now.UnixMilli() {
				t.Errorf("txn %s lastUpdated = %v, want %d", a.Txn.AppID, a.Txn.LastUpdated, now.UnixMilli())
			}
			got = append(got, fmt.Sprintf("txn %s %d", a.Txn.AppID, a.Txn.Version))
		default:
			t.Errorf("unexpected action %+v", a)
		}
	}
	want := []string{`add b 30 {"numRecords":3}`, "add a 20 ",
		"txn " + ledger.AppID("app", topic, 0) + " 0",
		"txn " + ledger.AppID("app", topic, 2) + " 7",
		"txn " + ledger.AppID("app", topic, 10) + " 100"}
	if !slices.Equal(got, want) {
		t.Errorf("actions = %q, want %q", got, want)
	}
	if rows != 5 || bytes != 50 {
		t.Errorf("rows, bytes = %d, %d; want 5, 50", rows, bytes)
	}
}
