// Package bench measures deltaflow against the limits of the machine it runs
// on (`deltaflow bench`): it writes simulated sensor events to Kafka (an
// in-process kfake by default) and reads the same records three ways, each
// in a child process so that its CPU time and peak RSS are its own:
//
//  1. consume: fetch and discard, with the daemon's franz-go settings;
//  2. decode: fetch, decode and map every record to a row (mapping.Mapper),
//     one goroutine per partition of a poll, no output;
//  3. e2e: the daemon itself (daemon.Run with UntilLatest, as
//     `deltaflow run --until-latest`) into a Delta table.
//
// The stage clock of each starts when its partitions are assigned and stops
// when every record is consumed (1, 2) or committed (3). Latency mode
// produces at a steady rate and measures record timestamp → commit delays
// from the table's log; startup mode measures a restart on a table with a
// long history. A child is the same binary re-executed with the hidden
// --stage flag (Options.Self).
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/internal/sim"
	"github.com/deltaflow/deltaflow/runtime/daemon"
	"github.com/deltaflow/deltaflow/storage"
)

// Options configure a bench run. Zero fields take the defaults noted.
type Options struct {
	// Events to produce and read; default 1,000,000.
	Events int
	// Devices simulated (half plugs, half door sensors); default 50.
	Devices int
	// Partitions of the bench topic; default 3.
	Partitions int
	// Brokers of a real Kafka; empty: kfake in this process.
	Brokers []string
	// Table is the e2e table URI; empty: a directory under Dir. An s3:// URI
	// gets a fresh sub-prefix per run (bench-<unix time>).
	Table string
	// S3 are the storage options of an s3:// table (the environment fills
	// what is empty, as for the other commands).
	S3 storage.Options
	// Dir holds tables, logs and profiles; empty: a new temp directory.
	Dir string
	// Config is a deltaflow YAML file whose settings (kafka fetch sizes,
	// flush, backpressure, table columns...) every stage uses; the bench
	// sets brokers, topic, group, table, NATS and HTTP. Empty: defaults.
	Config string
	// Format is the throughput stages' records: json (default) or avro
	// (the same events through a schema registry; Config must be empty).
	Format string
	// FlushInterval of the daemon; 0: the configuration default (60s).
	FlushInterval time.Duration
	// Throughput runs the three stages (the default mode).
	Throughput bool
	// Latency runs latency mode: Rate events/s (default 10,000) for
	// Duration (default 1m).
	Latency  bool
	Rate     float64
	Duration time.Duration
	// Steady runs steady mode once per rate (events/s): the daemon at a
	// constant load for SteadyDuration (default 10m), then idle for
	// SteadyIdle (default 1m).
	Steady         []float64
	SteadyDuration time.Duration
	SteadyIdle     time.Duration
	// NATSURL makes the e2e daemons of latency and steady mode use this
	// NATS server; empty: the embedded one.
	NATSURL string
	// Startup runs startup mode on a table of StartupCommits commits
	// (default 10,000), built once and cached under the temp directory.
	Startup        bool
	StartupCommits int
	// Tables, above 1, also drains the throughput run's events split over
	// that many topics into as many tables with one daemon, and measures
	// what each table beyond the first costs the idle daemon, watched for
	// TablesIdle (default 30s).
	Tables     int
	TablesIdle time.Duration
	// Upsert loads UpsertKeys keys (default 1,000,000) into an upsert table,
	// then drains Events changes to random keys (see upsertRun);
	// UpsertSequence orders them by a sequence_by column (the record's
	// timestamp), which reads the column and the deleted keys' KV too.
	Upsert         bool
	UpsertKeys     int
	UpsertSequence bool
	// CPUProfile writes each stage child's CPU profile to CPUProfile.<stage>.
	CPUProfile string
	// MemProfile writes each stage child's heap profile at its peak to
	// MemProfile.<stage>.
	MemProfile string
	// Output (the report as JSON) and PNG are output files; empty: none.
	Output, PNG string
	// Self is the command line that runs a stage child, to which the stage
	// flags are appended; default: this executable with "bench stage".
	Self []string
	// ChildEnv is added to the children's environment.
	ChildEnv []string
	// Out receives the human-readable report; Log progress (default Out).
	Out, Log io.Writer
}

func (o *Options) setDefaults() error {
	if o.Events <= 0 {
		o.Events = 1_000_000
	}
	if o.Devices <= 0 {
		o.Devices = 50
	}
	if o.Partitions <= 0 {
		o.Partitions = 3
	}
	if o.Rate <= 0 {
		o.Rate = 10_000
	}
	if o.Duration <= 0 {
		o.Duration = time.Minute
	}
	if o.SteadyDuration <= 0 {
		o.SteadyDuration = 10 * time.Minute
	}
	if o.SteadyIdle <= 0 {
		o.SteadyIdle = time.Minute
	}
	if o.StartupCommits <= 0 {
		o.StartupCommits = 10_000
	}
	if o.UpsertKeys <= 0 {
		o.UpsertKeys = 1_000_000
	}
	if o.TablesIdle <= 0 {
		o.TablesIdle = 30 * time.Second
	}
	switch o.Format {
	case "":
		o.Format = FormatJSON
	case FormatJSON:
	case FormatAvro, FormatProtobuf:
		if o.Config != "" {
			return fmt.Errorf("bench: --format %s makes its own configuration; --config is for json", o.Format)
		}
	default:
		return fmt.Errorf("bench: unknown --format %q (want json, avro or protobuf)", o.Format)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Log == nil {
		o.Log = o.Out
	}
	if len(o.Self) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		o.Self = []string{exe, "bench", "stage"}
	}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "deltaflow-bench-")
		if err != nil {
			return err
		}
		o.Dir = d
	}
	return os.MkdirAll(o.Dir, 0o755)
}

// StageReport is one stage's measurements.
type StageReport struct {
	Name          string   `json:"name"`
	Events        int64    `json:"events"`
	InputBytes    int64    `json:"input_bytes"`
	Seconds       float64  `json:"seconds"` // assignment → all consumed / committed
	EPS           float64  `json:"eps"`
	InputMBps     float64  `json:"input_mb_per_s"`
	CPUSeconds    float64  `json:"cpu_seconds"` // whole child process (user+sys)
	CPUPerMillion float64  `json:"cpu_seconds_per_million"`
	PeakRSSBytes  int64    `json:"peak_rss_bytes"` // rusage maxrss of the child
	WallSeconds   float64  `json:"wall_seconds"`   // child process start → exit
	StartSeconds  float64  `json:"start_seconds"`  // child process start → assignment
	DeadLetters   int64    `json:"dead_letters,omitempty"`
	Series        []Sample `json:"series,omitempty"`
}

// Report is the JSON `deltaflow bench --json` prints (and --output writes).
type Report struct {
	Events     int64  `json:"events"`
	Partitions int    `json:"partitions"`
	InputBytes int64  `json:"input_bytes"`
	Kafka      string `json:"kafka"`
	Table      string `json:"table,omitempty"`
	GoMaxProcs int    `json:"gomaxprocs"`
	NumCPU     int    `json:"num_cpu"`
	GoVersion  string `json:"go_version"`
	Date       string `json:"date"`

	FlushIntervalSeconds float64 `json:"flush_interval_seconds"`
	// Format is the throughput stages' records' (Options.Format).
	Format string `json:"format,omitempty"`

	// DecodeJSONEPS is the JSON decode stage's rate in an Avro run, and
	// DecodeVsJSON the Avro decode stage's rate over it.
	DecodeJSONEPS float64 `json:"decode_json_eps,omitempty"`
	DecodeVsJSON  float64 `json:"decode_vs_json,omitempty"`

	ConsumeEPS         float64 `json:"consume_eps,omitempty"`
	DecodeEPS          float64 `json:"decode_eps,omitempty"`
	E2EEPS             float64 `json:"e2e_eps,omitempty"`
	E2EPeakRSSBytes    int64   `json:"e2e_peak_rss_bytes,omitempty"`
	E2ECPUSeconds      float64 `json:"e2e_cpu_seconds,omitempty"`
	E2EVsConsume       float64 `json:"e2e_vs_consume,omitempty"`
	E2EVsDecode        float64 `json:"e2e_vs_decode,omitempty"`
	FirstCommitSeconds float64 `json:"first_commit_seconds,omitempty"`
	Commits            int     `json:"commits,omitempty"`
	Files              int     `json:"files,omitempty"`
	RowsCommitted      int64   `json:"rows_committed,omitempty"`

	Stages  []StageReport  `json:"stages,omitempty"`
	Tables  *TablesReport  `json:"tables,omitempty"`
	Upsert  *UpsertReport  `json:"upsert,omitempty"`
	Latency *LatencyReport `json:"latency,omitempty"`
	Startup *StartupReport `json:"startup,omitempty"`
	Steady  []SteadyReport `json:"steady,omitempty"`
}

// Run runs the bench and writes its outputs.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	rep := &Report{Partitions: o.Partitions, GoMaxProcs: childProcs(), NumCPU: goruntime.NumCPU(),
		GoVersion: goruntime.Version(), Date: time.Now().UTC().Format(time.RFC3339)}
	base, err := daemon.Load(o.Config, os.Getenv)
	if err != nil {
		return nil, err
	}
	rep.FlushIntervalSeconds = base.Flush.Interval.Seconds()
	if o.FlushInterval > 0 {
		rep.FlushIntervalSeconds = o.FlushInterval.Seconds()
	}
	k, err := newKafka(ctx, o)
	if err != nil {
		return nil, err
	}
	defer k.close()
	rep.Kafka = k.describe()
	fmt.Fprintf(o.Log, "bench: work dir %s, kafka %s\n", o.Dir, rep.Kafka)

	if o.Throughput {
		if err := throughput(ctx, o, k, rep); err != nil {
			return rep, err
		}
	}
	if o.Tables > 1 {
		if err := tablesRun(ctx, o, k, rep); err != nil {
			return rep, fmt.Errorf("tables: %w", err)
		}
	}
	if o.Upsert {
		if err := upsertRun(ctx, o, k, rep); err != nil {
			return rep, fmt.Errorf("upsert: %w", err)
		}
	}
	if o.Latency {
		lr, err := latency(ctx, o, k)
		if err != nil {
			return rep, fmt.Errorf("latency: %w", err)
		}
		rep.Latency = lr
	}
	for _, rate := range o.Steady {
		sr, err := steady(ctx, o, k, rate)
		if err != nil {
			return rep, fmt.Errorf("steady %g/s: %w", rate, err)
		}
		rep.Steady = append(rep.Steady, *sr)
	}
	if o.Startup {
		sr, err := startup(ctx, o, k)
		if err != nil {
			return rep, fmt.Errorf("startup: %w", err)
		}
		rep.Startup = sr
	}
	PrintReport(o.Out, rep)
	if o.Output != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return rep, err
		}
		if err := os.WriteFile(o.Output, append(data, '\n'), 0o644); err != nil {
			return rep, fmt.Errorf("write the report: %w", err)
		}
	}
	if o.PNG != "" && len(rep.Stages) > 0 {
		if err := WritePNG(o.PNG, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func childProcs() int {
	if v, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil && v > 0 {
		return v
	}
	return 2
}

// kafkaEnv is the broker the bench uses: kfake here, or real brokers.
type kafkaEnv struct {
	cluster *kfake.Cluster
	brokers []string
	prefix  string // topic name prefix, unique per run on a real broker
	fetch   *fetchWatch
}

func newKafka(ctx context.Context, o Options) (*kafkaEnv, error) {
	if len(o.Brokers) > 0 {
		return &kafkaEnv{brokers: o.Brokers, prefix: fmt.Sprintf("deltaflow-bench-%d-", time.Now().Unix())}, nil
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	k := &kafkaEnv{cluster: c, brokers: c.ListenAddrs(), prefix: "bench-", fetch: &fetchWatch{}}
	k.fetch.install(c)
	return k, nil
}

func (k *kafkaEnv) describe() string {
	if k.cluster != nil {
		return "kfake (in process) " + strings.Join(k.brokers, ",")
	}
	return strings.Join(k.brokers, ",")
}

func (k *kafkaEnv) close() {
	if k.cluster != nil {
		k.cluster.Close()
	}
}

func (k *kafkaEnv) config(topic string) kafka.Config {
	c := kafka.DefaultConfig()
	c.Brokers, c.Topic = k.brokers, topic
	return c
}

// createTopic creates a topic of n partitions.
func (k *kafkaEnv) createTopic(ctx context.Context, name string, n int) error {
	if k.cluster != nil {
		return k.cluster.CreateTopic(name, int32(n), nil)
	}
	return kafka.CreateTopic(ctx, k.config(name), name, int32(n), -1)
}

// produce writes events simulated records (rate 0: as fast as possible)
// and returns their key+value bytes.
func (k *kafkaEnv) produce(ctx context.Context, topic string, events, devices int, rate float64, seed int64) (int64, error) {
	return k.produceWith(ctx, topic, events, devices, rate, seed, nil)
}

// produceWith is produce with each event's value encoded by encode (nil:
// the simulator's JSON).
func (k *kafkaEnv) produceWith(ctx context.Context, topic string, events, devices int, rate float64, seed int64,
	encode func(b []byte, ev sim.Event) ([]byte, error)) (int64, error) {
	p, err := kafka.NewProducer(k.config(topic), nil)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	s := sim.New(sim.Config{Devices: devices, Seed: seed, Events: events, Span: 72 * time.Hour, Rate: rate})
	var total int64
	batch := 10000
	if rate > 0 {
		batch = max(1, int(rate/100)) // flush every ~10 ms: timestamps stay honest
	}
	for i := range events {
		if ctx.Err() != nil {
			return total, ctx.Err()
		}
		key, value, ev := s.Next(nil)
		if encode != nil {
			if value, err = encode(nil, ev); err != nil {
				return total, err
			}
		}
		total += int64(len(key) + len(value))
		p.ProduceAsync(ctx, &kgo.Record{Topic: topic, Key: key, Value: value, Timestamp: time.Now()})
		if (i+1)%batch == 0 {
			if err := p.Flush(ctx); err != nil {
				return total, err
			}
		}
	}
	return total, p.Flush(ctx)
}

// throughput runs the three stages on the same records: the simulator's
// JSON, or with Options.Format avro the same events in Avro through a
// schema registry, after a decode stage of the JSON for comparison.
func throughput(ctx context.Context, o Options, k *kafkaEnv, rep *Report) error {
	topic := k.prefix + "throughput"
	if err := k.createTopic(ctx, topic, o.Partitions); err != nil {
		return err
	}
	start := time.Now()
	bytes, err := k.produce(ctx, topic, o.Events, o.Devices, 0, 1)
	if err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	fmt.Fprintf(o.Log, "bench: produced %d events (%.1f MB) in %s\n", o.Events, float64(bytes)/1e6, time.Since(start).Round(time.Millisecond))
	rep.Events, rep.InputBytes, rep.Format = int64(o.Events), bytes, FormatJSON

	table := o.Table
	if table == "" {
		table = filepath.Join(o.Dir, "table")
	} else if strings.HasPrefix(table, "s3://") || strings.HasPrefix(table, "s3a://") {
		table = strings.TrimSuffix(table, "/") + fmt.Sprintf("/bench-%d", time.Now().Unix())
	}
	rep.Table = table
	nonce := strconv.FormatInt(time.Now().UnixNano(), 36)
	stage := func(stage, name, topic, config string, bytes int64) (StageReport, *stageRun, error) {
		a := stageArgs{stage: stage, brokers: strings.Join(k.brokers, ","), topic: topic, group: "bench-" + name + "-" + nonce,
			events: int64(o.Events), flush: o.FlushInterval, s3: s3FlagsOf(o.S3), config: config}
		if stage == StageE2E {
			a.table, a.natsDir, a.untilLatest = table, natsDirFor(o.Dir, stage), true
		}
		if o.CPUProfile != "" {
			a.cpuProfile = o.CPUProfile + "." + name
		}
		if o.MemProfile != "" {
			a.memProfile = o.MemProfile + "." + name
		}
		fmt.Fprintf(o.Log, "bench: stage %s ...\n", name)
		run, err := runChild(ctx, o, a, nil)
		if err != nil {
			return StageReport{}, nil, fmt.Errorf("stage %s: %w", name, err)
		}
		sr := stageReport(name, run, bytes)
		return sr, run, nil
	}
	config := o.Config
	if o.Format != FormatJSON {
		sr, _, err := stage(StageDecode, stageDecodeJSON, topic, config, bytes)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Log, "bench: stage %s: %.0f events/s\n", sr.Name, sr.EPS)
		rep.Stages = append(rep.Stages, sr)
		topic = k.prefix + "throughput-" + o.Format
		if err := k.createTopic(ctx, topic, o.Partitions); err != nil {
			return err
		}
		b, err := newBinaryTopic(o.Format, o.Dir, topic)
		if err != nil {
			return err
		}
		defer b.close()
		if bytes, err = k.produceBinary(ctx, b, topic, o.Events, o.Devices); err != nil {
			return fmt.Errorf("produce %s: %w", o.Format, err)
		}
		fmt.Fprintf(o.Log, "bench: produced the events in %s (%.1f MB)\n", o.Format, float64(bytes)/1e6)
		rep.InputBytes, rep.Format, config = bytes, o.Format, b.configFile()
	}
	for _, name := range []string{StageConsume, StageDecode, StageE2E} {
		sr, run, err := stage(name, name, topic, config, bytes)
		if err != nil {
			return err
		}
		if name == StageE2E {
			sum, err := summarize(ctx, table, o.S3)
			if err != nil {
				return err
			}
			if err := refineCommitTimes(ctx, table, o.S3, sum.commits); err != nil {
				return err
			}
			// The clock stops when the last row is committed (not when the
			// process has shut down).
			if n := len(sum.commits); n > 0 {
				sr.Seconds = round3(sum.commits[n-1].At.Sub(run.assigned).Seconds())
			}
			sr.Events = sum.Rows
			if sr.Seconds > 0 {
				sr.EPS = float64(sum.Rows) / sr.Seconds
				sr.InputMBps = float64(bytes) / 1e6 / sr.Seconds
			}
			rep.Commits, rep.Files, rep.RowsCommitted = sum.Commits, sum.Files, sum.Rows
			if !sum.FirstCommit.IsZero() {
				rep.FirstCommitSeconds = round3(sum.FirstCommit.Sub(run.assigned).Seconds())
			}
		}
		fmt.Fprintf(o.Log, "bench: stage %s: %.0f events/s, peak RSS %.1f MiB\n", name, sr.EPS, float64(sr.PeakRSSBytes)/(1<<20))
		rep.Stages = append(rep.Stages, sr)
	}
	for _, s := range rep.Stages {
		switch s.Name {
		case StageConsume:
			rep.ConsumeEPS = s.EPS
		case StageDecode:
			rep.DecodeEPS = s.EPS
		case stageDecodeJSON:
			rep.DecodeJSONEPS = s.EPS
		case StageE2E:
			rep.E2EEPS, rep.E2EPeakRSSBytes, rep.E2ECPUSeconds = s.EPS, s.PeakRSSBytes, s.CPUSeconds
		}
	}
	if rep.ConsumeEPS > 0 {
		rep.E2EVsConsume = round3(rep.E2EEPS / rep.ConsumeEPS)
	}
	if rep.DecodeEPS > 0 {
		rep.E2EVsDecode = round3(rep.E2EEPS / rep.DecodeEPS)
	}
	if rep.DecodeJSONEPS > 0 {
		rep.DecodeVsJSON = round3(rep.DecodeEPS / rep.DecodeJSONEPS)
	}
	return nil
}

func s3FlagsOf(o storage.Options) s3Flags {
	return s3Flags{endpoint: o.Endpoint, accessKey: o.AccessKey, secretKey: o.SecretKey, region: o.Region}
}

// runChild runs one stage child to its end (or until ctx ends).
func runChild(ctx context.Context, o Options, a stageArgs, onAssign func(time.Time)) (*stageRun, error) {
	argv := append(slices.Clone(o.Self), a.args()...)
	c, err := startChild(argv, append(slices.Clone(o.ChildEnv), a.env()...), filepath.Join(o.Dir, a.stage+"-"+a.topic+".log"), onAssign)
	if err != nil {
		return nil, err
	}
	return c.wait(ctx)
}

func stageReport(name string, run *stageRun, bytes int64) StageReport {
	secs := run.done.Sub(run.assigned).Seconds()
	sr := StageReport{Name: name, Events: run.result.Events, InputBytes: bytes, Seconds: round3(secs),
		CPUSeconds: round3(run.cpu.Seconds()), PeakRSSBytes: run.maxRSS, WallSeconds: round3(run.wall.Seconds()),
		StartSeconds: round3(run.assigned.Sub(run.started).Seconds()), DeadLetters: run.result.DeadLetter, Series: run.series}
	if secs > 0 {
		sr.EPS = float64(sr.Events) / secs
		sr.InputMBps = float64(bytes) / 1e6 / secs
	}
	if sr.Events > 0 {
		sr.CPUPerMillion = round3(run.cpu.Seconds() / float64(sr.Events) * 1e6)
	}
	return sr
}

// PrintReport writes the human-readable tables.
func PrintReport(w io.Writer, r *Report) {
	if len(r.Stages) > 0 {
		fmt.Fprintf(w, "\n%d events, %.1f MB, %d partitions, kafka %s, GOMAXPROCS=%d of %d CPUs, %s\n",
			r.Events, float64(r.InputBytes)/1e6, r.Partitions, r.Kafka, r.GoMaxProcs, r.NumCPU, r.GoVersion)
		if r.Format == FormatAvro || r.Format == FormatProtobuf {
			fmt.Fprintf(w, "records in %s through a schema registry: decode %.2f× the JSON decode stage's rate\n", r.Format, r.DecodeVsJSON)
		}
		fmt.Fprintf(w, "%-11s %10s %9s %12s %9s %9s %9s %10s %9s\n", "stage", "events", "seconds", "events/s", "in MB/s", "CPU s", "CPU s/M", "peak RSS", "start s")
		for _, s := range r.Stages {
			fmt.Fprintf(w, "%-11s %10d %9.3f %12.0f %9.1f %9.2f %9.2f %7.1f MiB %9.3f\n", s.Name, s.Events, s.Seconds, s.EPS, s.InputMBps,
				s.CPUSeconds, s.CPUPerMillion, float64(s.PeakRSSBytes)/(1<<20), s.StartSeconds)
		}
		fmt.Fprintf(w, "e2e / consume %.2f, e2e / decode %.2f; %d commits, %d files, %d rows committed, first commit after %.3f s (flush interval %gs)\n",
			r.E2EVsConsume, r.E2EVsDecode, r.Commits, r.Files, r.RowsCommitted, r.FirstCommitSeconds, r.FlushIntervalSeconds)
		fmt.Fprintf(w, "table %s\n", r.Table)
	}
	if u := r.Upsert; u != nil {
		seq := ""
		if u.Sequenced {
			seq = ", sequence_by the record timestamp"
		}
		fmt.Fprintf(w, "upsert%s: %d keys loaded in %.1fs (%.0f/s, peak RSS %.1f MiB); %d changes (80%% updates, 10%% inserts, 10%% deletes) in %.1fs: %.0f changes/s e2e, %d commits, CPU %.1fs, peak RSS %.1f MiB\n",
			seq, u.Keys, u.LoadSeconds, u.LoadEPS, float64(u.LoadRSSBytes)/(1<<20), u.Changes, u.Seconds, u.ChangesPerS, u.Commits,
			u.CPUSeconds, float64(u.PeakRSSBytes)/(1<<20))
	}
	if t := r.Tables; t != nil {
		fmt.Fprintf(w, "\n%d tables (one topic each, %d events in all): %.0f events/s (%.2f of one table's e2e), %.3f s, %d commits, CPU %.2f s, peak RSS %.1f MiB\n",
			t.Tables, t.Events, t.EPS, t.VsOneTable, t.Seconds, t.Commits, t.CPUSeconds, float64(t.PeakRSSBytes)/(1<<20))
		fmt.Fprintf(w, "idle for %.0f s, one table vs %d: RSS %.1f vs %.1f MiB, %.1f vs %.1f wake-ups/s, %.3f%% vs %.3f%% CPU; each table beyond the first: %.2f MiB, %.1f wake-ups/s\n",
			t.IdleSeconds, t.Tables, float64(t.IdleRSSBytes[0])/(1<<20), float64(t.IdleRSSBytes[1])/(1<<20), t.IdleWakeups[0], t.IdleWakeups[1],
			t.IdleCPUPercent[0], t.IdleCPUPercent[1], float64(t.ExtraTableRSSBytes)/(1<<20), t.ExtraTableWakeupsPerSec)
	}
	if l := r.Latency; l != nil {
		fmt.Fprintf(w, "\nlatency: %d events at %.0f/s for %s, flush interval %gs: record timestamp → commit p50 %.3f s, p99 %.3f s, max %.3f s (%d commits); peak RSS %.1f MiB\n",
			l.Events, l.Rate, time.Duration(l.DurationSeconds*float64(time.Second)), l.FlushIntervalSeconds, l.P50Seconds, l.P99Seconds, l.MaxSeconds, l.Commits,
			float64(l.PeakRSSBytes)/(1<<20))
	}
	if s := r.Startup; s != nil {
		fmt.Fprintf(w, "\nstartup on %d commits (checkpoint every %d, %d live files): process start → first fetch %.3f s (→ partitions assigned %.3f s); snapshot load alone %.3f s\n",
			s.Commits, s.CheckpointInterval, s.Files, s.FirstFetchSeconds, s.AssignedSeconds, s.SnapshotSeconds)
	}
	if len(r.Steady) > 0 {
		fmt.Fprintf(w, "\nsteady load (flush interval %gs):\n", r.Steady[0].FlushIntervalSeconds)
		fmt.Fprintf(w, "%10s %9s %9s %8s %10s %10s %10s %12s %12s\n", "events/s", "NATS", "minutes", "CPU %", "avg RSS", "peak RSS", "idle CPU %", "idle wake/s", "MB/hour")
		for _, s := range r.Steady {
			fmt.Fprintf(w, "%10.0f %9s %9.1f %8.2f %6.1f MiB %6.1f MiB %10.3f %12.1f %12.2f\n", s.Rate, s.NATS, s.DurationSeconds/60,
				s.CPUPercent, float64(s.AvgRSSBytes)/(1<<20), float64(s.PeakRSSBytes)/(1<<20), s.IdleCPUPercent, s.IdleWakeupsPerSec,
				s.TableBytesPerHour/1e6)
		}
	}
	fmt.Fprintln(w)
	for _, c := range Check(r) {
		fmt.Fprintln(w, c)
	}
}
