package actors

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/storage"
)

// TestMaintenanceWhileAppending runs OPTIMIZE and VACUUM on short intervals
// while the engine commits: files get compacted and deleted, every row stays
// exactly once, and the events are published.
func TestMaintenanceWhileAppending(t *testing.T) {
	dir := t.TempDir()
	store, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, store)
	// A one-second deleted-file retention lets VACUUM run for real without
	// forcing (the daemon never forces).
	s, err := h.table.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	meta := s.Metadata()
	meta.Configuration = map[string]string{"delta.deletedFileRetentionDuration": "interval 1 second"}
	if _, err := h.table.Commit(t.Context(), s, []delta.Action{{MetaData: &meta}}, delta.Operation{Name: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}

	nc, err := nats.Connect(h.bridge.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var mu sync.Mutex
	var optimized []bridge.OptimizeEvent
	var vacuumed []bridge.VacuumEvent
	sub, err := nc.Subscribe("deltaflow.sensor_events.events.*", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.HasSuffix(m.Subject, ".optimize"):
			var ev bridge.OptimizeEvent
			if json.Unmarshal(m.Data, &ev) == nil {
				optimized = append(optimized, ev)
			}
		case strings.HasSuffix(m.Subject, ".vacuum"):
			var ev bridge.VacuumEvent
			if json.Unmarshal(m.Data, &ev) == nil {
				vacuumed = append(vacuumed, ev)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	r := h.start(Config{FlushInterval: 50 * time.Millisecond, Maintenance: Maintenance{
		OptimizeEvery: 150 * time.Millisecond, VacuumEvery: 700 * time.Millisecond, VacuumRetain: time.Second,
	}}, nil)
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		h.produce(100, 0, int64(500+i))
		h.waitCommitted(r, 30*time.Second)
		mu.Lock()
		done := len(optimized) > 0 && len(vacuumed) > 0 && vacuumed[len(vacuumed)-1].FilesDeleted > 0
		mu.Unlock()
		if done && i >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no optimize and vacuum within 30s: %d optimize, %d vacuum events", len(optimized), len(vacuumed))
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.stop(t)
	h.checkExactlyOnce()

	mu.Lock()
	ev := optimized[0]
	mu.Unlock()
	if ev.Version <= 0 || ev.FilesRemoved < 2 || ev.FilesAdded < 1 || ev.BytesRemoved <= 0 || ev.Type != "io.deltaflow.v1.optimize" {
		t.Errorf("optimize event %+v", ev)
	}
	hist, err := h.table.History(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]int{}
	for _, e := range hist {
		ops[e.Operation]++
	}
	if ops["OPTIMIZE"] == 0 || ops["VACUUM END"] == 0 || ops["STREAMING UPDATE"] == 0 {
		t.Errorf("history operations %v", ops)
	}
	// Everything on disk is live or not yet past the retention: vacuum
	// deleted what compaction replaced.
	s, err = h.table.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	onDisk := 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") && !strings.Contains(p, "_delta_log") {
			onDisk++
		}
		return err
	})
	removed := 0
	for _, e := range optimized {
		removed += e.FilesRemoved
	}
	if onDisk >= s.NumFiles()+removed {
		t.Errorf("%d data files on disk, %d live, %d compacted away: vacuum deleted nothing", onDisk, s.NumFiles(), removed)
	}
}

// TestMaintenanceDisabled spawns no maintenance actor with zero intervals.
func TestMaintenanceDisabled(t *testing.T) {
	h := newHarness(t, nil)
	r := h.start(Config{}, nil)
	defer r.stop(t)
	if r.engine.tables[0].maintenance != nil {
		t.Fatal("maintenance actor spawned with both intervals 0")
	}
}

// OPTIMIZE's plan: a partition still being written is compacted once it
// has OptimizeMinFiles small files, leaving its earlier compacted file
// alone; a partition nothing was added to since the previous round is
// compacted whole.
func TestOptimizePlan(t *testing.T) {
	tbl := delta.NewTable(storage.NewMem())
	schema := &delta.StructType{Fields: []delta.StructField{
		{Name: "v", Type: delta.Long, Nullable: true}, {Name: "day", Type: delta.String, Nullable: true}}}
	snap, err := tbl.Create(t.Context(), schema, []string{"day"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	add := func(day string, size int64) {
		n++
		a := &delta.Add{Path: fmt.Sprintf("day=%s/f%d.parquet", day, n), PartitionValues: map[string]*string{"day": &day},
			Size: size, ModificationTime: int64(n), DataChange: true}
		if _, err := tbl.Commit(t.Context(), snap, []delta.Action{{Add: a}}, delta.Operation{Name: "WRITE"}); err != nil {
			t.Fatal(err)
		}
	}
	m := &maintainer{cfg: Maintenance{OptimizeMinFiles: 3, OptimizeOpenTargetSize: 1 << 20}, table: tbl}
	plan := func() map[string]int64 {
		out := map[string]int64{}
		for _, c := range m.plan(snap) {
			for dir := range c.dirs {
				out[dir] = c.target
			}
		}
		return out
	}
	add("d1", 4<<20) // compacted earlier: over the open target
	add("d1", 1000)
	add("d1", 1000)
	add("d2", 1000)
	if got := plan(); len(got) != 0 {
		t.Fatalf("first round: %v; want nothing (2 small files in d1, 1 in d2)", got)
	}
	add("d1", 1000)
	if got := plan(); len(got) != 1 || got["day=d1"] != 1<<20 {
		t.Fatalf("second round: %v; want d1 with the open target (3 small files)", got)
	}
	// Nothing added to d1 since: closed, compacted whole (its 4 MiB file
	// too). d2 gets a file: open, one small file.
	add("d2", 1000)
	if got := plan(); len(got) != 1 || got["day=d1"] != delta.DefaultTargetFileSize {
		t.Fatalf("third round: %v; want d1 closed, with the full target", got)
	}
}
