package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/storage"
)

// StartupReport is startup mode's result.
type StartupReport struct {
	Commits            int     `json:"commits"`
	CheckpointInterval int     `json:"checkpoint_interval"`
	Files              int     `json:"files"`
	Table              string  `json:"table"`
	FirstFetchSeconds  float64 `json:"first_fetch_seconds"` // process start → first Fetch request at the broker
	AssignedSeconds    float64 `json:"assigned_seconds"`    // process start → "partitions assigned" log line
	SnapshotSeconds    float64 `json:"snapshot_seconds"`    // delta.Table.Snapshot alone, in the bench process
	PeakRSSBytes       int64   `json:"peak_rss_bytes"`
	CPUSeconds         float64 `json:"cpu_seconds"`
}

// fetchWatch records when kfake receives the first Fetch after arm.
type fetchWatch struct {
	mu    sync.Mutex
	armed bool
	first time.Time
}

func (f *fetchWatch) install(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		now := time.Now()
		f.mu.Lock()
		if f.armed && f.first.IsZero() {
			f.first = now
		}
		f.mu.Unlock()
		return nil, nil, false // observe only: kfake handles the request
	})
}

func (f *fetchWatch) arm() {
	f.mu.Lock()
	f.armed, f.first = true, time.Time{}
	f.mu.Unlock()
}

func (f *fetchWatch) get() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = false
	return f.first
}

const startupCheckpointInterval = 10

// startup restarts the daemon on a table with a long history and an empty
// topic: the measure is process start → first fetch.
func startup(ctx context.Context, o Options, k *kafkaEnv) (*StartupReport, error) {
	dir, err := startupTable(ctx, o)
	if err != nil {
		return nil, err
	}
	rep := &StartupReport{Commits: o.StartupCommits, CheckpointInterval: startupCheckpointInterval, Table: dir}
	store, err := storage.NewLocal(dir)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	snap, err := delta.NewTable(store).Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	rep.SnapshotSeconds = round3(time.Since(t0).Seconds())
	rep.Files = snap.NumFiles()

	topic := k.prefix + "startup-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := k.createTopic(ctx, topic, o.Partitions); err != nil {
		return nil, err
	}
	a := stageArgs{stage: StageE2E, brokers: strings.Join(k.brokers, ","), topic: topic, group: topic, table: dir,
		natsDir: natsDirFor(o.Dir, "startup"), untilLatest: true, config: o.Config}
	if k.fetch != nil {
		k.fetch.arm()
	}
	fmt.Fprintf(o.Log, "bench: startup on %s ...\n", dir)
	run, err := runChild(ctx, o, a, nil)
	if err != nil {
		return nil, err
	}
	rep.AssignedSeconds = round3(run.assigned.Sub(run.started).Seconds())
	rep.FirstFetchSeconds = rep.AssignedSeconds // real brokers: the closest we see
	if k.fetch != nil {
		if first := k.fetch.get(); !first.IsZero() {
			rep.FirstFetchSeconds = round3(first.Sub(run.started).Seconds())
		}
	}
	rep.PeakRSSBytes, rep.CPUSeconds = run.maxRSS, round3(run.cpu.Seconds())
	return rep, nil
}

// startupTable returns a local table of o.StartupCommits streaming commits
// (one data file and three txns each, checkpoints every 10), built once and
// cached under the temp directory. The data files do not exist: a restart
// reads only the log.
func startupTable(ctx context.Context, o Options) (string, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("deltaflow-bench-startup-%d-v1", o.StartupCommits))
	done := filepath.Join(dir, ".complete")
	if _, err := os.Stat(done); err == nil {
		return filepath.Join(dir, "table"), nil
	}
	os.RemoveAll(dir)
	table := filepath.Join(dir, "table")
	store, err := storage.NewLocal(table)
	if err != nil {
		return "", err
	}
	m, err := mapping.New(mapping.DefaultConfig(), mapping.DefaultPartitionColumns)
	if err != nil {
		return "", err
	}
	tbl := delta.NewTable(store)
	s, err := tbl.Create(ctx, m.Schema(), mapping.DefaultPartitionColumns,
		map[string]string{"delta.checkpointInterval": strconv.Itoa(startupCheckpointInterval)})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(o.Log, "bench: building a %d-commit table in %s (once) ...\n", o.StartupCommits, table)
	start := time.Now()
	types := []string{"smart_plug", "door_window"}
	for i := 1; i <= o.StartupCommits; i++ {
		typ := types[i%2]
		date := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute).Format(time.DateOnly)
		pv := map[string]*string{"device_type": &typ, "event_date": &date}
		actions := []delta.Action{{Add: &delta.Add{
			Path:             delta.NewDataFileKey(mapping.DefaultPartitionColumns, pv, delta.Snappy),
			PartitionValues:  pv,
			Size:             40_000,
			ModificationTime: time.Now().UnixMilli(),
			DataChange:       true,
			Stats:            fakeStats,
		}}}
		for p := range 3 {
			actions = append(actions, delta.Action{Txn: &delta.Txn{AppID: fmt.Sprintf("history-sensor-events-%d", p), Version: int64(i * 1000)}})
		}
		if _, err := tbl.Commit(ctx, s, actions, delta.Operation{Name: "STREAMING UPDATE"}); err != nil {
			return "", err
		}
		if s.CheckpointDue() {
			if err := tbl.Checkpoint(ctx, s); err != nil {
				return "", err
			}
		}
	}
	fmt.Fprintf(o.Log, "bench: built in %s\n", time.Since(start).Round(time.Millisecond))
	return table, os.WriteFile(done, nil, 0o644)
}

// fakeStats looks like the stats of a data file the engine writes.
const fakeStats = `{"numRecords":1667,"minValues":{"device_id":"door-sensor-01","event_time":"2026-06-22T00:00:01.123Z","linkquality":60,"contact":false,"battery":40,"power":2.1,"voltage":220.0,"current":0.01,"energy":0.5,"plug_state":"OFF","raw_payload":"{\"contact\": false, \"ba","processed_at":"2026-06-22T10:00:00.000Z"},"maxValues":{"device_id":"smart-plug-25","event_time":"2026-06-22T23:59:59.999Z","linkquality":255,"contact":true,"battery":100,"power":2000.0,"voltage":240.0,"current":9.0,"energy":999.9,"plug_state":"ON","raw_payload":"{\"power\": 99.1, \"vol","processed_at":"2026-06-22T10:00:01.000Z"},"nullCount":{"device_id":0,"event_time":0,"linkquality":0,"contact":833,"battery":833,"power":834,"voltage":834,"current":834,"energy":834,"plug_state":834,"raw_payload":0,"processed_at":0}}`
