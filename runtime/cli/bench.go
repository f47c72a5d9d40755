//go:build !nodevtools

package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/deltaflow/deltaflow/runtime/devtools/bench"
)

// benchFlags are bench's flags that bench.Options does not hold as is.
type benchFlags struct {
	bench.Options
	brokers, steady string
	check, asJSON   bool
}

func benchCommand(out IO) *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench [--check FILE...]",
		Short: "measure throughput, memory, latency and restart time against the machine's limits",
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.check {
				return benchCheck(out, args)
			}
			if len(args) > 0 {
				return usagef("unexpected argument %q (JSON files go with --check)", args[0])
			}
			o, err := f.options()
			if err != nil {
				return err
			}
			o.Out, o.Log = out.Stdout, out.Stderr
			if f.asJSON {
				o.Out = io.Discard // the report goes out as JSON instead
			}
			rep, err := bench.Run(cmd.Context(), o)
			if err != nil || !f.asJSON {
				return err
			}
			return writeJSON(out.Stdout, rep)
		},
	}
	fs := cmd.Flags()
	o := &f.Options
	fs.StringVar(&o.Table, "table", "", "table `URI` the e2e stage writes; empty: one in --dir")
	registerS3(fs, &o.S3)
	fs.IntVar(&o.Events, "events", 1_000_000, "events to produce and read")
	fs.IntVar(&o.Devices, "devices", 50, "simulated devices (half smart plugs, half door sensors)")
	fs.IntVar(&o.Partitions, "partitions", 3, "partitions of the bench topic")
	fs.StringVar(&o.Format, "format", bench.FormatJSON, "records of the throughput stages: json, or avro or protobuf (the same events through a schema registry, after a decode stage of the JSON for comparison)")
	fs.StringVar(&f.brokers, "brokers", "", "comma-separated Kafka `brokers`; empty: in-process kfake")
	fs.StringVar(&o.Dir, "dir", "", "work `directory` (tables, logs); empty: a new temp directory")
	fs.StringVar(&o.Config, "config", "", "deltaflow configuration `FILE` whose kafka/flush/backpressure/table settings the stages use")
	fs.DurationVar(&o.FlushInterval, "flush-interval", 0, "daemon flush.interval; 0: the default (60s)")
	fs.BoolVar(&o.Throughput, "throughput", true, "run the consume / decode / e2e stages")
	fs.BoolVar(&o.Latency, "latency", false, "also measure record → commit latency at a steady rate")
	fs.Float64Var(&o.Rate, "rate", 10_000, "latency mode: events per second")
	fs.DurationVar(&o.Duration, "duration", time.Minute, "latency mode: how long to produce")
	fs.StringVar(&f.steady, "steady", "", "also run the daemon at each of these steady `RATES` (events/s, comma-separated; the Pi's load is 17) and measure CPU, RSS, idle wake-ups and bytes written")
	fs.DurationVar(&o.SteadyDuration, "steady-duration", 10*time.Minute, "steady mode: how long to produce at each rate")
	fs.DurationVar(&o.SteadyIdle, "steady-idle", time.Minute, "steady mode: how long to watch the idle daemon afterwards")
	fs.StringVar(&o.NATSURL, "nats-url", "", "latency and steady mode: the daemon uses this NATS `URL`; empty: its embedded server")
	noCredentials(fs, "nats-url", "$NATS_URL")
	fs.IntVar(&o.Tables, "tables", 1, "also drain the events split over this many topics into as many tables with one daemon, and measure each extra table's idle cost")
	fs.DurationVar(&o.TablesIdle, "tables-idle", 30*time.Second, "--tables: how long to watch the idle daemon with one table and with all")
	fs.BoolVar(&o.Upsert, "upsert", false, "also load --upsert-keys keys into an upsert table and drain --events changes to random keys (80% updates, 10% inserts, 10% deletes) end to end")
	fs.IntVar(&o.UpsertKeys, "upsert-keys", 1_000_000, "upsert mode: keys loaded before the changes")
	fs.BoolVar(&o.UpsertSequence, "upsert-sequence", false, "upsert mode: order the changes by a sequence_by column (the record timestamp), deleted keys remembered in the KV")
	fs.BoolVar(&o.Startup, "startup", false, "also measure restart → first fetch on a table with --startup-commits commits")
	fs.IntVar(&o.StartupCommits, "startup-commits", 10_000, "startup mode: commits of the (cached) table")
	jsonFlag(fs, &f.asJSON)
	fs.StringVar(&o.Output, "output", "", "also write the report as JSON to `FILE` (what --check reads)")
	fs.StringVar(&o.PNG, "png", "", "draw throughput and RSS over time to `FILE` (PNG)")
	fs.StringVar(&o.MemProfile, "memprofile", "", "write each stage's heap profile, at its peak, to `FILE`.<stage>")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write each stage's CPU profile to `FILE`.<stage>")
	fs.BoolVar(&f.check, "check", false, "read the JSON FILEs given as arguments and print PASS/FAIL per target")
	cmd.AddCommand(&cobra.Command{
		// A stage child, re-executed by the bench itself with its own flags.
		Use:                "stage",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := bench.StageMain(cmd.Context(), args, out.Stdout, out.Stderr); code != 0 {
				return fmt.Errorf("stage failed (exit %d)", code)
			}
			return nil
		},
	})
	return cmd
}

// options checks the flags and returns the bench's options.
func (f *benchFlags) options() (bench.Options, error) {
	o := f.Options
	if o.Events <= 0 || o.Rate <= 0 || o.Duration <= 0 || o.Partitions <= 0 {
		return o, usagef("--events, --rate, --duration and --partitions must be > 0")
	}
	if f.brokers != "" {
		o.Brokers = strings.Split(f.brokers, ",")
	}
	if f.steady == "" {
		return o, nil
	}
	for _, s := range strings.Split(f.steady, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || r <= 0 {
			return o, usagef("--steady: %q is not a rate > 0", s)
		}
		o.Steady = append(o.Steady, r)
	}
	return o, nil
}

// benchCheck prints PASS/FAIL per target of the bench JSON files.
func benchCheck(out IO, files []string) error {
	if len(files) == 0 {
		return usagef("--check needs JSON files")
	}
	lines, err := bench.CheckFiles(files)
	if err != nil {
		return err
	}
	for _, l := range lines {
		fmt.Fprintln(out.Stdout, l)
	}
	return nil
}
