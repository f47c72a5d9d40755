package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/runtime/daemon"
	"github.com/deltaflow/deltaflow/storage"
)

// seekFlags are seek's flags.
type seekFlags struct {
	targetFlags
	offsets, timestamp, group, fromApp string
	dryRun, force                      bool
}

func seekCommand(out IO) *cobra.Command {
	var f seekFlags
	cmd := &cobra.Command{
		Use:   "seek",
		Short: "set where deltaflow starts reading (offsets, a time, a consumer group's offsets)",
		Long: "seek writes deltaflow's start offsets into the table (creating it from the configuration when\n" +
			"missing): give exactly one of --offsets, --timestamp, --group and --from-app.",
		Example: `  deltaflow seek --table ./data/sensor_events --brokers 127.0.0.1:9092 --timestamp 2026-06-22 --force --dry-run
  deltaflow seek --table ./data/sensor_events --brokers 127.0.0.1:9092 --offsets 0:0,1:0,2:0 --force
  deltaflow seek --table ./data/sensor_events --brokers 127.0.0.1:9092 --app renamed --from-app deltaflow`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSeek(cmd.Context(), out, &f) },
	}
	fs := cmd.Flags()
	f.targetFlags.register(fs)
	fs.StringVar(&f.offsets, "offsets", "", "start partitions at these offsets: `P:OFFSET,...` (the first offset to read)")
	fs.StringVar(&f.timestamp, "timestamp", "", "start every partition at its first record at or after this `time` (RFC 3339 or a date)")
	fs.StringVar(&f.group, "group", "", "start where this Kafka consumer `group` committed (adopt its offsets)")
	fs.StringVar(&f.fromApp, "from-app", "", "start where another deltaflow `app` (an old table.app_id) stopped in this table (adopt its offsets)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "show the plan; write nothing")
	fs.BoolVar(&f.force, "force", false, "replace offsets deltaflow already holds, and allow offsets below the log start")
	cmd.MarkFlagsOneRequired("offsets", "timestamp", "group", "from-app")
	cmd.MarkFlagsMutuallyExclusive("offsets", "timestamp", "group", "from-app")
	return cmd
}

// runSeek writes deltaflow's txn actions for the chosen start positions
// into the table (creating it from the configuration when missing), as
// kafka-delta-ingest's --seek_offsets does: the Delta log stays the only
// record of where `run` resumes.
func runSeek(ctx context.Context, out IO, f *seekFlags) error {
	cfg, _, err := f.load()
	if err != nil {
		return err
	}
	next, by, err := seekTargets(ctx, cfg, f)
	if err != nil {
		return err
	}
	logs, err := topicLogs(ctx, cfg.Kafka)
	if err != nil {
		return err
	}
	plan := &startTable{source: strings.ToUpper(by), topicID: logs.ID}
	for _, p := range slices.Sorted(maps.Keys(next)) {
		lr, ok := logs.Ranges[p]
		if !ok {
			return fmt.Errorf("partition %d: topic %s has no such partition (it has %d)", p, cfg.Kafka.Topic, len(logs.Ranges))
		}
		if next[p] > lr.End {
			return fmt.Errorf("partition %d: offset %d is beyond the end offset %d of %s", p, next[p], lr.End, cfg.Kafka.Topic)
		}
		from := next[p]
		plan.rows = append(plan.rows, startRow{partition: p, from: &from, start: from, logStart: lr.Start, end: lr.End})
	}
	text := f.textOut(out)
	if err := plan.print(text); err != nil {
		return err
	}
	if lost := plan.lost(); lost > 0 {
		if !f.force {
			return fmt.Errorf("refusing: %d records from the requested offsets on were already deleted by retention (%s); "+
				"pass --force to start at the log start instead", lost, plan.lostDetail())
		}
		for i := range plan.rows {
			plan.rows[i].start = max(plan.rows[i].start, plan.rows[i].logStart)
		}
	}
	tbl, snap, err := seekTable(ctx, cfg, f.dryRun, out.Stderr)
	if err != nil {
		return err
	}
	app, topic := cfg.Table.AppID, cfg.Kafka.Topic
	var held []int32
	if snap != nil {
		held = heldOffsets(snap, app, topic)
	}
	if len(held) > 0 && !f.force {
		return fmt.Errorf("refusing: table %s already holds deltaflow offsets for topic %s (partitions %v, app %s); "+
			"pass --force to replace them", cfg.Table.URI, topic, held, app)
	}
	if snap != nil {
		if err := ledger.CheckSeek(snap, app, topic, logs, next); err != nil {
			return err
		}
	}
	if f.dryRun {
		if snap == nil {
			fmt.Fprintf(text, "dry run: nothing written; table %s does not exist yet: seek would create it from the configuration\n", cfg.Table.URI)
		} else {
			fmt.Fprintf(text, "dry run: nothing written; table %s stays at version %d\n", cfg.Table.URI, snap.Version())
		}
		return f.writeJSON(out, plan, cfg, nil)
	}
	params := map[string]any{"by": by}
	if f.fromApp != "" {
		params["app"] = f.fromApp
	}
	v, err := ledger.Write(ctx, tbl, snap, app, topic, plan.starts(), plan.topicID, delta.Operation{Name: "SEEK", Parameters: params})
	if err != nil {
		return fmt.Errorf("write deltaflow's offsets: %w", err)
	}
	fmt.Fprintf(text, "table %s version %d: deltaflow starts these partitions at these offsets\n", cfg.Table.URI, v)
	return f.writeJSON(out, plan, cfg, &v)
}

// seekTable opens the table seek writes. For real it is opened as run opens
// it (created from the configuration when missing, the store probed for
// atomic commits); a dry run creates nothing, so a missing table is a nil
// snapshot, and an existing one is checked for writing and its store probed
// as the real run would.
func seekTable(ctx context.Context, cfg *daemon.Config, dryRun bool, stderr io.Writer) (*delta.Table, *delta.Snapshot, error) {
	if !dryRun {
		tbl, snap, _, err := daemon.OpenTable(ctx, cfg, nil)
		return tbl, snap, err
	}
	tbl, snap, err := readTable(ctx, cfg)
	if errors.Is(err, delta.ErrTableNotFound) {
		return tbl, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if err := snap.CheckWrite(); err != nil {
		return nil, nil, fmt.Errorf("table %s: %w", cfg.Table.URI, err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	if err := daemon.CheckAtomicCommits(ctx, tbl.Store(), cfg.Storage.SingleWriter, logger); err != nil {
		return nil, nil, err
	}
	return tbl, snap, nil
}

// readTable opens cfg's table and reads its latest snapshot, changing
// nothing; a missing table's error wraps delta.ErrTableNotFound.
func readTable(ctx context.Context, cfg *daemon.Config) (*delta.Table, *delta.Snapshot, error) {
	store, err := storage.Open(ctx, cfg.Table.URI, cfg.StorageOptions())
	if err != nil {
		return nil, nil, fmt.Errorf("open table storage: %w", err)
	}
	tbl := delta.NewTable(store)
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return tbl, nil, fmt.Errorf("read table %s: %w", cfg.Table.URI, err)
	}
	return tbl, snap, nil
}

// seekTargets returns the next offset to read per partition and what it
// came from ("offsets", "timestamp", "group", "app").
func seekTargets(ctx context.Context, cfg *daemon.Config, f *seekFlags) (map[int32]int64, string, error) {
	kcfg := cfg.Kafka
	if f.offsets != "" {
		next, err := parseOffsets(f.offsets)
		if err != nil {
			return nil, "", usagef("--offsets: %v", err)
		}
		return next, "offsets", nil
	}
	if f.fromApp != "" {
		next, err := adoptedOffsets(ctx, cfg, f.fromApp)
		return next, "app", err
	}
	adm, err := kafka.NewAdmin(kcfg, nil)
	if err != nil {
		return nil, "", err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if f.timestamp != "" {
		t, err := kafka.ParseTime(f.timestamp)
		if err != nil {
			return nil, "", usagef("--timestamp: %v", err)
		}
		next, err := adm.OffsetsAt(ctx, t)
		return next, "timestamp", err
	}
	next, err := adm.GroupOffsets(ctx, f.group)
	if err == nil && len(next) == 0 {
		err = fmt.Errorf("consumer group %s has committed no offsets for topic %s", f.group, kcfg.Topic)
	}
	return next, "group", err
}

// adoptedOffsets are the next offsets where app stopped on the topic in
// cfg's table (ledger.Adopt), naming the apps that hold some when app
// holds none.
func adoptedOffsets(ctx context.Context, cfg *daemon.Config, app string) (map[int32]int64, error) {
	_, snap, err := readTable(ctx, cfg)
	if err != nil {
		return nil, err
	}
	topic := cfg.Kafka.Topic
	if next := ledger.Adopt(snap, app, topic); len(next) > 0 {
		return next, nil
	}
	others := slices.Sorted(maps.Keys(ledger.Foreign(snap, "", topic)))
	if len(others) == 0 {
		return nil, fmt.Errorf("--from-app %s: table %s holds no deltaflow offsets of topic %s", app, cfg.Table.URI, topic)
	}
	return nil, fmt.Errorf("--from-app %s: table %s holds no offsets of app %q for topic %s; apps with offsets of it: %s",
		app, cfg.Table.URI, app, topic, strings.Join(others, ", "))
}

// parseOffsets parses "0:123,1:456".
func parseOffsets(s string) (map[int32]int64, error) {
	out := map[int32]int64{}
	for _, item := range strings.Split(s, ",") {
		ps, offs, ok := strings.Cut(strings.TrimSpace(item), ":")
		p, perr := strconv.ParseInt(ps, 10, 32)
		o, oerr := strconv.ParseInt(offs, 10, 64)
		if !ok || perr != nil || oerr != nil || p < 0 || o < 0 {
			return nil, fmt.Errorf("%q: want PARTITION:OFFSET, e.g. 0:123", item)
		}
		if _, dup := out[int32(p)]; dup {
			return nil, fmt.Errorf("partition %d given twice", p)
		}
		out[int32(p)] = o
	}
	return out, nil
}
