package ledger

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/storage"
)

func TestParseAppID(t *testing.T) {
	for _, tc := range []struct {
		appID string
		want  int32
		ok    bool
	}{
		{AppID("deltaflow", "sensor-events", 0), 0, true},
		{AppID("deltaflow", "sensor-events", 17), 17, true},
		{"deltaflow-sensor-events-2147483647", 2147483647, true},
		{"deltaflow-sensor-events-2147483648", 0, false}, // past int32
		{"deltaflow-sensor-events--1", 0, false},
		{"deltaflow-sensor-events-01", 0, false}, // AppID never writes it
		{"deltaflow-sensor-events-", 0, false},
		{"deltaflow-sensor-events-x", 0, false},
		{"deltaflow-other-topic-3", 0, false},
		{"other-sensor-events-3", 0, false},
		{"9f2c1d3e-5b7a-4c1e-8e2f-0a1b2c3d4e5f", 0, false}, // a Spark query id
	} {
		p, ok := ParseAppID(tc.appID, "deltaflow", "sensor-events")
		if p != tc.want || ok != tc.ok {
			t.Errorf("ParseAppID(%q) = %d, %v; want %d, %v", tc.appID, p, ok, tc.want, tc.ok)
		}
	}
	// A topic that itself ends in "-<digits>" stays apart from its prefix.
	if p, ok := ParseAppID(AppID("app", "events-2", 5), "app", "events"); ok {
		t.Errorf("topic events-2's appId parsed as partition %d of topic events", p)
	}
}

// table returns a snapshot of a new in-memory table whose txns hold the
// last offsets of app "a", topic "t", and whose txns expire after retention
// ("" for never).
func table(t *testing.T, retention string, last map[int32]int64) (*delta.Table, *delta.Snapshot) {
	t.Helper()
	schema := &delta.StructType{Fields: []delta.StructField{{Name: "id", Type: delta.Long, Nullable: true}}}
	conf := map[string]string{}
	if retention != "" {
		conf["delta.setTransactionRetentionDuration"] = retention
	}
	tbl := delta.NewTable(storage.NewMem())
	snap, err := tbl.Create(t.Context(), schema, nil, conf)
	if err != nil {
		t.Fatal(err)
	}
	if len(last) > 0 {
		next := map[int32]int64{}
		for p, o := range last {
			next[p] = o + 1
		}
		if _, err := Write(t.Context(), tbl, snap, "a", "t", next, "", delta.Operation{Name: "SEEK"}); err != nil {
			t.Fatal(err)
		}
	}
	return tbl, snap
}

// TestWriteLastNext: Write records next offsets as txns of version next-1,
// Last and Next read them back, the topic ID goes into the table property
// once, and nothing to write is refused.
func TestWriteLastNext(t *testing.T) {
	tbl, snap := table(t, "", map[int32]int64{0: 9, 2: 41})
	if got := Last(snap, "a", "t"); !maps.Equal(got, map[int32]int64{0: 9, 2: 41}) {
		t.Errorf("Last = %v", got)
	}
	if got := Next(snap, "a", "t", []int32{0, 1, 2}); !maps.Equal(got, map[int32]int64{0: 10, 1: -1, 2: 42}) {
		t.Errorf("Next = %v", got)
	}
	if got := Last(snap, "a", "other"); len(got) != 0 {
		t.Errorf("another topic's offsets: %v", got)
	}
	v, err := Write(t.Context(), tbl, snap, "a", "t", nil, "TOPIC-ID", delta.Operation{Name: "SET TBLPROPERTIES"})
	if err != nil || snap.Metadata().Configuration[TopicIDProperty("a", "t")] != "TOPIC-ID" || v != snap.Version() {
		t.Errorf("topic id: version %d, %v, configuration %v", v, err, snap.Metadata().Configuration)
	}
	if _, err := Write(t.Context(), tbl, snap, "a", "t", nil, "TOPIC-ID", delta.Operation{Name: "SEEK"}); !errors.Is(err, ErrNoPartitions) {
		t.Errorf("nothing to write: %v", err)
	}
	if _, err := Write(t.Context(), tbl, snap, "a", "t", map[int32]int64{0: -1}, "", delta.Operation{Name: "SEEK"}); err == nil {
		t.Error("a negative offset was written")
	}
}

// TestMoved: a partition whose table offset differs from where reading
// began is moved; one unchanged is not.
func TestMoved(t *testing.T) {
	_, snap := table(t, "", map[int32]int64{0: 9, 1: 19})
	for _, tc := range []struct {
		read map[int32]int64
		want []int32
	}{
		{map[int32]int64{0: 10, 1: 20}, nil},
		{map[int32]int64{0: 5, 1: 20}, []int32{0}},
		{map[int32]int64{0: 10, 1: 20, 2: -1}, nil},
		{map[int32]int64{2: 0}, []int32{2}},
	} {
		if got := Moved(snap, "a", "t", tc.read); !slices.Equal(got, tc.want) {
			t.Errorf("Moved(%v) = %v, want %v", tc.read, got, tc.want)
		}
	}
}

// TestStale: with a retention, owned partitions the epoch does not advance
// and no one moved are refreshed once half the retention has passed; none
// without a retention.
func TestStale(t *testing.T) {
	_, snap := table(t, "interval 1 hours", map[int32]int64{0: 9, 1: 19, 2: 29})
	base := map[int32]int64{0: 10, 1: 20, 2: 5} // partition 2 was moved by another writer
	later := time.Now().Add(40 * time.Minute)
	got := Stale(snap, "a", "t", []int32{0, 1, 2}, map[int32]int64{1: 25}, base, later)
	if len(got) != 1 || got[0].AppID != AppID("a", "t", 0) || got[0].Version != 9 || *got[0].LastUpdated != later.UnixMilli() {
		t.Errorf("Stale = %+v, want partition 0's txn refreshed", got)
	}
	if got := Stale(snap, "a", "t", []int32{0}, nil, base, time.Now()); len(got) != 0 {
		t.Errorf("refreshed before half the retention: %+v", got)
	}
	_, forever := table(t, "", map[int32]int64{0: 9})
	if got := Stale(forever, "a", "t", []int32{0}, nil, base, later.Add(1000*time.Hour)); len(got) != 0 {
		t.Errorf("refreshed without a retention: %+v", got)
	}
}

// TestReconcile: the table wins: a mirror value that differs or is missing
// is corrected, one the table does not know is dropped.
func TestReconcile(t *testing.T) {
	correct, drop := Reconcile(map[int32]int64{0: 9, 1: 19, 2: 29}, map[int32]int64{0: 9, 1: 18, 3: 7})
	if !slices.Equal(correct, []int32{1, 2}) || !slices.Equal(drop, []int32{3}) {
		t.Errorf("Reconcile = %v, %v", correct, drop)
	}
}
