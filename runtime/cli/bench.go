package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/deltaflow/deltaflow/internal/bench"
)

const benchUsage = "[--events N] [--brokers B] [--table URI] [--json FILE] [--png FILE] [--latency [--rate N] [--duration D]] [--steady RATE,... [--steady-duration D] [--steady-idle D]] [--nats-url URL] [--startup] | --check FILE..."

func benchCommand() *Command {
	return &Command{
		Name:    "bench",
		Usage:   benchUsage,
		Summary: "measure throughput, memory, latency and restart time against the machine's limits",
		Run:     runBench,
	}
}

func runBench(ctx context.Context, out IO, args []string) error {
	if bench.IsStage(args) {
		// A stage child re-executed by the bench itself.
		if code := bench.StageMain(ctx, args, out.Stdout, out.Stderr); code != 0 {
			return fmt.Errorf("stage failed (exit %d)", code)
		}
		return nil
	}
	fs := newFlagSet("bench", benchUsage, out.Stderr)
	var o bench.Options
	var brokers string
	var tf tableFlags
	tf.register(fs, false)
	fs.IntVar(&o.Events, "events", 1_000_000, "events to produce and read")
	fs.IntVar(&o.Devices, "devices", 50, "simulated devices (half smart plugs, half door sensors)")
	fs.IntVar(&o.Partitions, "partitions", 3, "partitions of the bench topic")
	fs.StringVar(&brokers, "brokers", "", "comma-separated Kafka `brokers`; empty: in-process kfake")
	fs.StringVar(&o.Dir, "dir", "", "work `directory` (tables, logs); empty: a new temp directory")
	fs.StringVar(&o.Config, "config", "", "deltaflow configuration `FILE` whose kafka/flush/backpressure/table settings the stages use")
	fs.DurationVar(&o.FlushInterval, "flush-interval", 0, "daemon flush.interval; 0: the default (60s)")
	fs.BoolVar(&o.Throughput, "throughput", true, "run the consume / decode / e2e stages")
	fs.BoolVar(&o.Latency, "latency", false, "also measure record → commit latency at a steady rate")
	fs.Float64Var(&o.Rate, "rate", 10_000, "latency mode: events per second")
	fs.DurationVar(&o.Duration, "duration", time.Minute, "latency mode: how long to produce")
	steadyRates := fs.String("steady", "", "also run the daemon at each of these steady `RATES` (events/s, comma-separated; the Pi's load is 17) and measure CPU, RSS, idle wake-ups and bytes written")
	fs.DurationVar(&o.SteadyDuration, "steady-duration", 10*time.Minute, "steady mode: how long to produce at each rate")
	fs.DurationVar(&o.SteadyIdle, "steady-idle", time.Minute, "steady mode: how long to watch the idle daemon afterwards")
	fs.StringVar(&o.NATSURL, "nats-url", "", "latency and steady mode: the daemon uses this NATS `URL`; empty: its embedded server")
	fs.BoolVar(&o.Startup, "startup", false, "also measure restart → first fetch on a table with --startup-commits commits")
	fs.IntVar(&o.StartupCommits, "startup-commits", 10_000, "startup mode: commits of the (cached) table")
	fs.StringVar(&o.JSON, "json", "", "write the results as JSON to `FILE`")
	fs.StringVar(&o.PNG, "png", "", "draw throughput and RSS over time to `FILE` (PNG)")
	fs.StringVar(&o.MemProfile, "memprofile", "", "write each stage's heap profile, at its peak, to `FILE`.<stage>")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write each stage's CPU profile to `FILE`.<stage>")
	check := fs.Bool("check", false, "read the JSON FILEs given as arguments and print PASS/FAIL per target")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *check {
		if len(pos) == 0 {
			return usagef("--check needs JSON files")
		}
		lines, err := bench.CheckFiles(pos)
		if err != nil {
			return err
		}
		for _, l := range lines {
			fmt.Fprintln(out.Stdout, l)
		}
		return nil
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if o.Events <= 0 || o.Rate <= 0 || o.Duration <= 0 || o.Partitions <= 0 {
		return usagef("--events, --rate, --duration and --partitions must be > 0")
	}
	if brokers != "" {
		o.Brokers = strings.Split(brokers, ",")
	}
	if *steadyRates != "" {
		for _, f := range strings.Split(*steadyRates, ",") {
			r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || r <= 0 {
				return usagef("--steady: %q is not a rate > 0", f)
			}
			o.Steady = append(o.Steady, r)
		}
	}
	o.Table, o.S3 = tf.uri, tf.s3
	o.Out, o.Log = out.Stdout, out.Stderr
	_, err = bench.Run(ctx, o)
	return err
}
