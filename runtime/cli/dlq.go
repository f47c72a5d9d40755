package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/runtime/daemon"
	"github.com/deltaflow/deltaflow/runtime/dlqreplay"
)

// dlqFlags say where the DLQ stream is: the configuration's nats section
// and table name, or --nats and --stream.
type dlqFlags struct {
	natsURL, stream string
}

func (f *dlqFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.natsURL, "nats", "", "NATS `URL`, without a password (put one in $NATS_URL or the configuration); "+
		"default nats.url, else deltaflow's embedded server at nats.listen, else its store (nats.store_dir) when deltaflow is stopped")
	bindEnv(fs, "nats", "NATS_URL")
	noCredentials(fs, "nats", "$NATS_URL")
	fs.StringVar(&f.stream, "stream", "", "DLQ stream `NAME` (default nats.dlq_stream: DELTAFLOW_DLQ_<TABLE>)")
}

// open opens the DLQ stream of cfg's table. With nats.url empty and nothing
// listening at nats.listen (deltaflow stopped), it starts the embedded
// server on its store itself, on a free loopback port. close ends it all.
func (f *dlqFlags) open(ctx context.Context, cfg *daemon.Config) (r *bridge.DLQReader, closeAll func(), err error) {
	stream := f.stream
	if stream == "" {
		stream = cfg.NATS.DLQStream
	}
	if stream == "" {
		stream = bridge.DefaultDLQStream(cfg.Table.Name)
	}
	url := f.natsURL
	if url == "" {
		if url, err = bridge.ClientURL(cfg.NATS); err != nil {
			return nil, nil, err
		}
	}
	nc, err := bridge.Dial(url, cfg.NATS, "deltaflow dlq", 5*time.Second)
	if errors.Is(err, nats.ErrNoServers) && f.natsURL == "" && cfg.NATS.URL == "" {
		return openStoppedDLQ(ctx, cfg, stream)
	}
	if err != nil {
		return nil, nil, err
	}
	if r, err = bridge.OpenDLQ(ctx, nc, stream); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return r, nc.Close, nil
}

// with loads the configuration at path (defaults and environment without
// one), opens its DLQ stream and calls fn with it.
func (f *dlqFlags) with(ctx context.Context, path string, fn func(*bridge.DLQReader) error) error {
	cfg, err := loadConfig(path)
	if err != nil {
		return err
	}
	r, done, err := f.open(ctx, cfg)
	if err != nil {
		return err
	}
	defer done()
	return fn(r)
}

// openStoppedDLQ opens the DLQ of a stopped deltaflow from the embedded
// server's store.
func openStoppedDLQ(ctx context.Context, cfg *daemon.Config, stream string) (*bridge.DLQReader, func(), error) {
	nc := cfg.NATS
	nc.Listen, nc.DLQStream = "127.0.0.1:-1", stream
	b, err := bridge.New(ctx, nc, nil, bridge.WithTable(cfg.Table.Name))
	if err != nil {
		return nil, nil, fmt.Errorf("nothing listens at nats.listen %s, and its store %s does not open: %w", cfg.NATS.Listen, cfg.NATS.StoreDir, err)
	}
	r, err := b.DLQ(ctx)
	if err != nil {
		_ = b.Close()
		return nil, nil, err
	}
	return r, func() { _ = b.Close() }, nil
}

func dlqCommand(out IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "list, show and replay the dead letters (records the mapping refused)",
		Long: "dlq lists and shows the dead letters of the table's DLQ stream, and replays them into the\n" +
			"table once the mapping that refused them is fixed: exactly once, and the letters written\n" +
			"leave the stream (those that still fail stay).",
		Example: `  deltaflow dlq ls --config ./deltaflow.yaml --limit 20
  deltaflow dlq show 1 --config ./deltaflow.yaml
  deltaflow dlq replay --config ./deltaflow.yaml --dry-run`,
		RunE: needCommand,
	}
	cmd.AddCommand(dlqListCommand(out), dlqShowCommand(out), dlqReplayCommand(out))
	return cmd
}

// loadConfig loads --config (defaults and environment without it).
func loadConfig(path string) (*daemon.Config, error) {
	return daemon.Load(path, os.Getenv)
}

// letterJSON is a letter in `dlq ls --json` and `dlq show --json`.
type letterJSON struct {
	Seq       uint64     `json:"seq"`
	Stored    time.Time  `json:"stored"`
	Topic     string     `json:"topic"`
	TopicID   string     `json:"topicId,omitempty"`
	Partition int32      `json:"partition"`
	Offset    int64      `json:"offset"`
	Timestamp *time.Time `json:"timestamp"`
	Key       *string    `json:"key"`
	Bytes     int        `json:"bytes"`
	// Truncated is the value's original length when the stream holds only
	// its first Bytes bytes.
	Truncated int    `json:"truncated,omitempty"`
	Reason    string `json:"reason"`
	// Value (show only) is the record's value, as text when it is UTF-8,
	// else base64 with ValueEncoding "base64".
	Value         *string `json:"value,omitempty"`
	ValueEncoding string  `json:"valueEncoding,omitempty"`
}

func newLetterJSON(l bridge.StoredLetter, withValue bool) letterJSON {
	j := letterJSON{Seq: l.Seq, Stored: l.Stored, Topic: l.Topic, TopicID: l.TopicID, Partition: l.Partition, Offset: l.Offset,
		Bytes: len(l.Value), Truncated: l.Truncated, Reason: l.Reason}
	if l.Timestamp != 0 {
		ts := time.UnixMilli(l.Timestamp).UTC()
		j.Timestamp = &ts
	}
	if l.Key != nil {
		k, _ := text(l.Key)
		j.Key = &k
	}
	if withValue {
		v, enc := text(l.Value)
		j.Value, j.ValueEncoding = &v, enc
	}
	return j
}

// text is b as a string, or its base64 and "base64" when it is not UTF-8.
func text(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

func dlqListCommand(out IO) *cobra.Command {
	var df dlqFlags
	var config string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "list the dead letters, oldest first: sequence, partition, offset, size and reason",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return df.with(cmd.Context(), config, func(r *bridge.DLQReader) error {
				return listLetters(cmd.Context(), out.Stdout, r, limit, asJSON)
			})
		},
	}
	configFlag(cmd.Flags(), &config, "deltaflow configuration `FILE` (as for run) for the nats section and table.name")
	df.register(cmd.Flags())
	atLeast(cmd.Flags(), &limit, "limit", 100, 0, "list at most this many letters (0: all)")
	jsonFlag(cmd.Flags(), &asJSON)
	return cmd
}

// errEnough ends a walk over the letters early.
var errEnough = errors.New("enough")

func listLetters(ctx context.Context, w io.Writer, r *bridge.DLQReader, limit int, asJSON bool) error {
	letters := []letterJSON{}
	err := r.Letters(ctx, 0, func(l bridge.StoredLetter) error {
		if limit > 0 && len(letters) == limit {
			return errEnough
		}
		letters = append(letters, newLetterJSON(l, false))
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return err
	}
	if asJSON {
		return writeJSON(w, letters)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tSTORED\tPARTITION\tOFFSET\tBYTES\tREASON")
	for _, l := range letters {
		size := strconv.Itoa(l.Bytes)
		if l.Truncated > 0 {
			size += " of " + strconv.Itoa(l.Truncated)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\n", l.Seq, formatTime(l.Stored), l.Partition, l.Offset, size, clip(l.Reason, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if errors.Is(err, errEnough) {
		fmt.Fprintf(w, "(the first %d; --limit 0 lists all)\n", limit)
	}
	return nil
}

// clip shortens s to at most n runes.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func dlqShowCommand(out IO) *cobra.Command {
	var df dlqFlags
	var config string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show SEQ",
		Short: "show one dead letter: where it came from, why it was refused, and the record's value",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("want one stream sequence (see dlq ls)")
			}
			if _, err := strconv.ParseUint(args[0], 10, 64); err != nil {
				return usagef("sequence %q is not a number", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, _ := strconv.ParseUint(args[0], 10, 64)
			return df.with(cmd.Context(), config, func(r *bridge.DLQReader) error {
				l, err := r.Letter(cmd.Context(), seq)
				if err != nil {
					return err
				}
				return showLetter(out.Stdout, newLetterJSON(l, true), asJSON)
			})
		},
	}
	configFlag(cmd.Flags(), &config, "deltaflow configuration `FILE` (as for run) for the nats section and table.name")
	df.register(cmd.Flags())
	jsonFlag(cmd.Flags(), &asJSON)
	return cmd
}

func showLetter(w io.Writer, l letterJSON, asJSON bool) error {
	if asJSON {
		return writeJSON(w, l)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "seq\t%d\n", l.Seq)
	fmt.Fprintf(tw, "stored\t%s\n", formatTime(l.Stored))
	fmt.Fprintf(tw, "topic\t%s\n", l.Topic)
	if l.TopicID != "" {
		fmt.Fprintf(tw, "topic id\t%s\n", l.TopicID)
	}
	fmt.Fprintf(tw, "partition\t%d\n", l.Partition)
	fmt.Fprintf(tw, "offset\t%d\n", l.Offset)
	if l.Timestamp != nil {
		fmt.Fprintf(tw, "timestamp\t%s\n", formatTime(*l.Timestamp))
	}
	if l.Key != nil {
		fmt.Fprintf(tw, "key\t%s\n", *l.Key)
	}
	fmt.Fprintf(tw, "reason\t%s\n", l.Reason)
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case l.Truncated > 0:
		fmt.Fprintf(w, "value (first %d of %d bytes%s):\n", l.Bytes, l.Truncated, encodingNote(l.ValueEncoding))
	default:
		fmt.Fprintf(w, "value (%d bytes%s):\n", l.Bytes, encodingNote(l.ValueEncoding))
	}
	_, err := fmt.Fprintln(w, *l.Value)
	return err
}

func encodingNote(enc string) string {
	if enc == "" {
		return ""
	}
	return ", shown as " + enc
}

func dlqReplayCommand(out IO) *cobra.Command {
	var tf tableFlags
	var df dlqFlags
	var dryRun, asJSON bool
	var batch int
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "write the dead letters the mapping now takes into the table, exactly once, and delete them from the stream",
		Long: "replay maps every dead letter with the configuration's mapping (as run would) and writes those it\n" +
			"takes into the table, in commits of at most --batch letters (operation DLQ REPLAY), then deletes\n" +
			"them from the stream. Letters that still fail stay, with their reason listed. A replay stopped at any\n" +
			"point writes no letter twice when run again: each commit records the stream sequences it wrote\n" +
			"under the txn appId <app>-dlq-<stream>. It may run while deltaflow runs.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReplay(cmd.Context(), out, &tf, &df, dlqreplay.Options{BatchLetters: batch, DryRun: dryRun}, asJSON)
		},
	}
	tf.register(cmd.Flags())
	// replay maps with the configuration's columns and reaches its NATS.
	cmd.Flags().Lookup("config").Usage = "deltaflow configuration `FILE` (as for run): the table, its mapping (table.columns) and the nats section; flags override it [$" + configEnv + "]"
	tf.registerWriter(cmd.Flags())
	df.register(cmd.Flags())
	atLeast(cmd.Flags(), &batch, "batch", dlqreplay.DefaultBatchLetters, 1, "letters per commit at most")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "map every letter and report; write and delete nothing")
	jsonFlag(cmd.Flags(), &asJSON)
	return cmd
}

func runReplay(ctx context.Context, out IO, tf *tableFlags, df *dlqFlags, opts dlqreplay.Options, asJSON bool) error {
	cfg, err := tf.load()
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	opts.App = cfg.Table.AppID
	target, err := replayTarget(ctx, cfg, opts.DryRun)
	if err != nil {
		return err
	}
	r, done, err := df.open(ctx, cfg)
	if err != nil {
		return err
	}
	defer done()
	res, err := dlqreplay.Run(ctx, target, r, opts)
	if res != nil && !asJSON {
		printReplay(out.Stdout, res, opts.DryRun)
	}
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(out.Stdout, res)
	}
	return nil
}

// replayTarget opens the table as run does (created or evolved as the
// configuration says); a dry run only reads it.
func replayTarget(ctx context.Context, cfg *daemon.Config, dryRun bool) (dlqreplay.Target, error) {
	var t dlqreplay.Target
	rctx, cancel := context.WithTimeout(ctx, daemon.DefaultConnectTimeout)
	schemas, err := cfg.ResolveSchemas(rctx, slog.New(slog.DiscardHandler))
	cancel()
	if err != nil {
		return t, err
	}
	if schemas != nil {
		t.Schemas = schemas
	}
	if !dryRun {
		t.Table, t.Snapshot, t.Mapper, err = daemon.OpenTable(ctx, cfg, nil)
	} else if t.Table, t.Snapshot, err = readTable(ctx, cfg); err == nil {
		t.Mapper, err = mapping.New(cfg.MappingConfig(), cfg.Table.PartitionColumns)
	}
	if err != nil {
		return t, err
	}
	t.Writer, err = cfg.WriterOptions(t.Snapshot)
	return t, err
}

func printReplay(w io.Writer, res *dlqreplay.Result, dryRun bool) {
	if res.Letters == 0 {
		fmt.Fprintf(w, "%s: no dead letters\n", res.Stream)
		return
	}
	verb := "replayed"
	if dryRun {
		verb = "would replay"
	}
	fmt.Fprintf(w, "%s: %d letters read; %s %d", res.Stream, res.Letters, verb, res.Replayed)
	if len(res.Versions) > 0 {
		fmt.Fprintf(w, " (%d files, versions %d-%d)", res.Files, res.Versions[0], res.Versions[len(res.Versions)-1])
	}
	fmt.Fprintf(w, "; %d duplicates, %d left by an interrupted replay; %d still fail and stay\n", res.Duplicates, res.Cleaned, res.FailedCount)
	for _, f := range res.Failures {
		fmt.Fprintf(w, "  seq %d (partition %d offset %d): %s\n", f.Seq, f.Partition, f.Offset, f.Reason)
	}
	if n := res.FailedCount - len(res.Failures); n > 0 {
		fmt.Fprintf(w, "  … and %d more (deltaflow dlq ls)\n", n)
	}
}
