package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/runtime/daemon"
	"github.com/deltaflow/deltaflow/runtime/sparkcheckpoint"
	"github.com/deltaflow/deltaflow/storage"
)

// defaultQuietFor is twice the Spark job's 60 s trigger: a running query
// writes its checkpoint at least that often while records arrive.
const defaultQuietFor = 2 * time.Minute

// takeoverFlags are takeover's flags.
type takeoverFlags struct {
	targetFlags
	checkpoint    string
	dryRun, force bool
	quietFor      time.Duration
}

func takeoverCommand(out IO) *cobra.Command {
	var f takeoverFlags
	cmd := &cobra.Command{
		Use:   "takeover",
		Short: "continue where the Spark job's checkpoint ends, without duplicate or gap",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runTakeover(cmd.Context(), out, &f) },
	}
	fs := cmd.Flags()
	f.targetFlags.register(fs)
	fs.StringVar(&f.checkpoint, "from-spark-checkpoint", "", "the Spark query's checkpoint `URI`: s3a://bucket/path, s3://, file:// or a path (required)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "show the plan; write nothing")
	fs.BoolVar(&f.force, "force", false, "replace offsets deltaflow already holds in the table; take over even if the table has no txn of the Spark query")
	atLeast(fs, &f.quietFor, "quiet-for", defaultQuietFor, 0, "refuse while Spark wrote its checkpoint or the table less than this `duration` ago")
	return cmd
}

func runTakeover(ctx context.Context, out IO, f *takeoverFlags) error {
	if f.checkpoint == "" {
		return usagef("--from-spark-checkpoint is required")
	}
	cfg, opts, err := f.load()
	if err != nil {
		return err
	}
	ck, err := readSparkCheckpoint(ctx, f.checkpoint, opts)
	if err != nil {
		return err
	}
	topic, app := cfg.Kafka.Topic, cfg.Table.AppID
	if ck.Latest.Topic != topic {
		return fmt.Errorf("refusing: the Spark query in %s reads topic %q, but kafka.topic is %q; "+
			"point --from-spark-checkpoint at the checkpoint of the job that fills this table, or set --topic", f.checkpoint, ck.Latest.Topic, topic)
	}
	tbl, snap, err := openExisting(ctx, cfg.Table.URI, opts)
	if err != nil {
		return err
	}
	if held := heldOffsets(snap, app, topic); len(held) > 0 && !f.force {
		return fmt.Errorf("refusing: table %s already holds deltaflow offsets for topic %s (partitions %v, app %s): deltaflow has run on it, "+
			"and those offsets are where it resumes; pass --force to replace them with where Spark's checkpoint ends", cfg.Table.URI, topic, held, app)
	}
	sparkTxn, hasTxn := snap.Txn(ck.QueryID)
	if !hasTxn && !f.force {
		return fmt.Errorf("refusing: table %s holds no txn of Spark query %s, so the query of %s never wrote to it: "+
			"check that --table and --from-spark-checkpoint belong to the same Spark job (--force trusts the checkpoint alone)",
			cfg.Table.URI, ck.QueryID, f.checkpoint)
	}
	last, lastWhat := ck.LastActivity(), "its checkpoint"
	if hasTxn && sparkTxn.LastUpdated != nil && time.UnixMilli(*sparkTxn.LastUpdated).After(last) {
		last, lastWhat = time.UnixMilli(*sparkTxn.LastUpdated), "the table"
	}
	if ago := time.Since(last); ago < f.quietFor {
		return fmt.Errorf("refusing: the Spark query %s looks alive: it wrote %s %s ago, less than --quiet-for %s; "+
			"stop the Spark job first (docker compose stop spark-streaming), then run takeover again "+
			"(lower --quiet-for only if you are sure it is stopped)", ck.QueryID, lastWhat, ago.Round(time.Second), f.quietFor)
	}
	end, err := ck.Resolve(ctx, sparkTxn.Version, hasTxn)
	if errors.Is(err, sparkcheckpoint.ErrNothingCommitted) {
		return fmt.Errorf("refusing: %w; nothing to take over: start deltaflow with kafka.start_offset: earliest", err)
	}
	if err != nil {
		return fmt.Errorf("read Spark checkpoint %s: %w", f.checkpoint, err)
	}
	plan, err := planTakeover(ctx, cfg.Kafka, end.Batch.End)
	if err != nil {
		return err
	}
	text := f.textOut(out)
	fmt.Fprintf(text, "Spark query %s, checkpoint %s\nlast batch in the table: %d (%s)\n", ck.QueryID, f.checkpoint, end.Batch.ID, end.Why)
	if err := plan.print(text); err != nil {
		return err
	}
	if lost := plan.lost(); lost > 0 {
		return fmt.Errorf("refusing: %d records between Spark's checkpoint and the topic's log start were deleted by retention (%s) "+
			"and can no longer be ingested; to accept the loss, start at the log start with `deltaflow seek --offsets %s`",
			lost, plan.lostDetail(), plan.startsSpec())
	}
	// A dry run predicts every refusal: the store is probed too.
	if err := snap.CheckWrite(); err != nil {
		return fmt.Errorf("table %s: %w", cfg.Table.URI, err)
	}
	if err := daemon.CheckAtomicCommits(ctx, tbl.Store(), cfg.Storage.SingleWriter, slog.New(slog.NewTextHandler(out.Stderr, nil))); err != nil {
		return err
	}
	if f.dryRun {
		fmt.Fprintf(text, "dry run: nothing written; table %s stays at version %d\n", cfg.Table.URI, snap.Version())
		return f.writeJSON(out, plan, cfg, nil)
	}
	v, err := ledger.Write(ctx, tbl, snap, app, topic, plan.starts(), plan.topicID, delta.Operation{Name: "TAKEOVER", Parameters: map[string]any{
		"from": "spark", "queryId": ck.QueryID, "batchId": strconv.FormatInt(end.Batch.ID, 10),
	}})
	if err != nil {
		return fmt.Errorf("write deltaflow's offsets: %w", err)
	}
	fmt.Fprintf(text, "took over: table %s version %d holds deltaflow's offsets; start deltaflow (`deltaflow run`), not Spark\n", cfg.Table.URI, v)
	return f.writeJSON(out, plan, cfg, &v)
}

// readSparkCheckpoint reads the checkpoint at uri; a local path must exist
// (opening a local store would create it).
func readSparkCheckpoint(ctx context.Context, uri string, opts storage.Options) (*sparkcheckpoint.Checkpoint, error) {
	if p, ok := localDir(uri); ok {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("Spark checkpoint %s: %w; pass the checkpointLocation of the Spark job", uri, err)
		}
	}
	store, err := storage.Open(ctx, uri, opts)
	if err != nil {
		return nil, fmt.Errorf("Spark checkpoint: %w", err)
	}
	ck, err := sparkcheckpoint.Read(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("Spark checkpoint %s: %w; pass the job's checkpointLocation (it holds metadata, offsets/ and commits/)", uri, err)
	}
	return ck, nil
}

// localDir returns the directory of a local URI (a path or file://).
func localDir(uri string) (string, bool) {
	if p, ok := strings.CutPrefix(uri, "file://"); ok {
		return p, true
	}
	return uri, !strings.Contains(uri, "://")
}

// openExisting opens a table that must exist.
func openExisting(ctx context.Context, uri string, opts storage.Options) (*delta.Table, *delta.Snapshot, error) {
	if p, ok := localDir(uri); ok {
		if _, err := os.Stat(p); err != nil {
			return nil, nil, fmt.Errorf("table %s: %w", uri, err)
		}
	}
	store, err := storage.Open(ctx, uri, opts)
	if err != nil {
		return nil, nil, err
	}
	tbl := delta.NewTable(store)
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read table %s: %w", uri, err)
	}
	return tbl, snap, nil
}

// heldOffsets lists the partitions for which the table holds deltaflow's
// txn for topic.
func heldOffsets(s *delta.Snapshot, app, topic string) []int32 {
	return slices.Sorted(maps.Keys(ledger.Last(s, app, topic)))
}

// startTable is where deltaflow will start each partition, next to what
// the topic holds.
type startTable struct {
	source  string // header of the "from" column
	rows    []startRow
	topicID string // the topic's ID, recorded with the offsets
}

type startRow struct {
	partition int32
	from      *int64 // where the start comes from, e.g. Spark's next offset; nil if none
	start     int64  // deltaflow's first offset
	logStart  int64
	end       int64
}

// planTakeover checks Spark's end offsets against the topic: a partition
// Spark never saw starts at its log start, as Spark's would.
func planTakeover(ctx context.Context, kcfg kafka.Config, next map[int32]int64) (*startTable, error) {
	logs, err := topicLogs(ctx, kcfg)
	if err != nil {
		return nil, err
	}
	plan := &startTable{source: "SPARK (NEXT OFFSET)", topicID: logs.ID}
	for _, p := range logs.Partitions() {
		lr := logs.Ranges[p]
		r := startRow{partition: p, logStart: lr.Start, end: lr.End, start: lr.Start}
		if n, ok := next[p]; ok {
			r.from, r.start = &n, n
		}
		plan.rows = append(plan.rows, r)
	}
	for p := range next {
		if _, ok := logs.Ranges[p]; !ok {
			return nil, fmt.Errorf("refusing: Spark's checkpoint has partition %d of %s, which the topic does not have: is this the same Kafka cluster?", p, kcfg.Topic)
		}
	}
	return plan, nil
}

// topicLogs asks the brokers for the topic's ID and every partition's log
// range.
func topicLogs(ctx context.Context, kcfg kafka.Config) (ledger.TopicLogs, error) {
	adm, err := kafka.NewAdmin(kcfg, nil)
	if err != nil {
		return ledger.TopicLogs{}, err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	logs, err := adm.TopicLogs(ctx)
	if err != nil {
		return ledger.TopicLogs{}, fmt.Errorf("%w (brokers %s)", err, strings.Join(kcfg.Brokers, ","))
	}
	return logs, nil
}

func (p *startTable) starts() map[int32]int64 {
	out := make(map[int32]int64, len(p.rows))
	for _, r := range p.rows {
		out[r.partition] = r.start
	}
	return out
}

// lost counts the records below the log start that a start skips.
func (p *startTable) lost() int64 {
	var n int64
	for _, r := range p.rows {
		n += max(r.logStart-r.start, 0)
	}
	return n
}

func (p *startTable) lostDetail() string {
	var parts []string
	for _, r := range p.rows {
		if r.start < r.logStart {
			parts = append(parts, fmt.Sprintf("partition %d: offsets %d-%d, %d records", r.partition, r.start, r.logStart-1, r.logStart-r.start))
		}
	}
	return strings.Join(parts, "; ")
}

// startsSpec is the --offsets value that starts every partition at
// max(start, log start).
func (p *startTable) startsSpec() string {
	var parts []string
	for _, r := range p.rows {
		parts = append(parts, fmt.Sprintf("%d:%d", r.partition, max(r.start, r.logStart)))
	}
	return strings.Join(parts, ",")
}

func (p *startTable) print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "PARTITION\t%s\tDELTAFLOW START\tLOG START\tEND\tLAG\n", p.source)
	for _, r := range p.rows {
		from := "-"
		if r.from != nil {
			from = strconv.FormatInt(*r.from, 10)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\n", r.partition, from, r.start, r.logStart, r.end, max(r.end-r.start, 0))
	}
	return tw.Flush()
}

// startJSON is `seek --json` and `takeover --json`.
type startJSON struct {
	Table  string `json:"table"`
	App    string `json:"app"`
	Topic  string `json:"topic"`
	DryRun bool   `json:"dryRun"`
	// Version is the table version that holds the new offsets; null on a
	// dry run.
	Version    *int64         `json:"version"`
	Partitions []startRowJSON `json:"partitions"`
}

// startRowJSON is one partition of startJSON.
type startRowJSON struct {
	Partition int32 `json:"partition"`
	// From is the requested start (Spark's next offset for takeover); null
	// when there is none and the partition starts at its log start.
	From     *int64 `json:"from"`
	Start    int64  `json:"start"`
	LogStart int64  `json:"logStart"`
	End      int64  `json:"end"`
	Lag      int64  `json:"lag"`
}

// writeJSON writes the plan's result: version is the commit, nil on a dry run.
func (p *startTable) writeJSON(w io.Writer, cfg *daemon.Config, version *int64) error {
	js := startJSON{Table: cfg.Table.URI, App: cfg.Table.AppID, Topic: cfg.Kafka.Topic, DryRun: version == nil, Version: version,
		Partitions: make([]startRowJSON, len(p.rows))}
	for i, r := range p.rows {
		js.Partitions[i] = startRowJSON{Partition: r.partition, From: r.from, Start: r.start, LogStart: r.logStart, End: r.end, Lag: max(r.end-r.start, 0)}
	}
	return writeJSON(w, js)
}
