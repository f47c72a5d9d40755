package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	rtpprof "runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/runtime/daemon"
)

// Stages a child process runs (`deltaflow bench --stage NAME`).
const (
	StageConsume = "consume" // fetch and discard
	StageDecode  = "decode"  // fetch, decode and map to rows, no output
	StageE2E     = "e2e"     // daemon.Run: the daemon itself
	// stageDecodeJSON is the decode stage of the JSON records in an Avro
	// run, for comparison.
	stageDecodeJSON = "decode-json"
)

// stageArgs are the flags of a stage child. The parent builds them with
// args(); StageMain parses them.
type stageArgs struct {
	stage       string
	brokers     string
	topic       string
	group       string
	events      int64 // consume/decode: stop after this many records
	table       string
	tables      int  // e2e: above 1, that many routes (see benchRoutes)
	upsert      bool // e2e: the upsert table (see upsertTable)
	sequenced   bool // e2e: its changes ordered by a column
	natsDir     string
	natsURL     string // external NATS; empty: embedded in natsDir
	untilLatest bool
	// noProgress: the e2e child does not scrape its own /metrics for
	// progress lines (steady mode measures the idle daemon's wake-ups).
	noProgress bool
	flush      time.Duration
	cpuProfile string
	memProfile string
	config     string // deltaflow YAML whose kafka, flush and backpressure settings apply
	s3         s3Flags
}

type s3Flags struct{ endpoint, accessKey, secretKey, region string }

func (a *stageArgs) register(fs *flag.FlagSet) {
	fs.StringVar(&a.stage, "stage", "", "internal: run one bench stage (consume, decode or e2e) in this process")
	fs.StringVar(&a.brokers, "stage-brokers", "", "internal")
	fs.StringVar(&a.topic, "stage-topic", "", "internal")
	fs.StringVar(&a.group, "stage-group", "", "internal")
	fs.Int64Var(&a.events, "stage-events", 0, "internal")
	fs.StringVar(&a.table, "stage-table", "", "internal")
	fs.IntVar(&a.tables, "stage-tables", 0, "internal")
	fs.BoolVar(&a.upsert, "stage-upsert", false, "internal")
	fs.BoolVar(&a.sequenced, "stage-upsert-sequence", false, "internal")
	fs.StringVar(&a.natsDir, "stage-nats-dir", "", "internal")
	fs.StringVar(&a.natsURL, "stage-nats-url", "", "internal")
	fs.BoolVar(&a.untilLatest, "stage-until-latest", false, "internal")
	fs.BoolVar(&a.noProgress, "stage-no-progress", false, "internal")
	fs.DurationVar(&a.flush, "stage-flush-interval", 0, "internal")
	fs.StringVar(&a.config, "stage-config", "", "internal")
	fs.StringVar(&a.memProfile, "memprofile", "", "write a heap profile of each stage child, taken at its peak Go heap, to `FILE`.<stage>")
	fs.StringVar(&a.cpuProfile, "cpuprofile", "", "write a CPU profile of each stage child to `FILE`.<stage>")
}

// env is the child's environment besides the parent's: the S3 secret key,
// which never goes into args, where ps shows it.
func (a *stageArgs) env() []string {
	if a.s3.secretKey == "" {
		return nil
	}
	return []string{"MINIO_SECRET_KEY=" + a.s3.secretKey}
}

func (a *stageArgs) args() []string {
	out := []string{"--stage", a.stage, "--stage-brokers", a.brokers, "--stage-topic", a.topic, "--stage-group", a.group,
		"--stage-events", strconv.FormatInt(a.events, 10)}
	if a.table != "" {
		out = append(out, "--stage-table", a.table, "--stage-nats-dir", a.natsDir)
	}
	if a.tables > 1 {
		out = append(out, "--stage-tables", strconv.Itoa(a.tables))
	}
	if a.upsert {
		out = append(out, "--stage-upsert")
	}
	if a.sequenced {
		out = append(out, "--stage-upsert-sequence")
	}
	if a.natsURL != "" {
		out = append(out, "--stage-nats-url", a.natsURL)
	}
	if a.untilLatest {
		out = append(out, "--stage-until-latest")
	}
	if a.noProgress {
		out = append(out, "--stage-no-progress")
	}
	if a.flush > 0 {
		out = append(out, "--stage-flush-interval", a.flush.String())
	}
	if a.cpuProfile != "" {
		out = append(out, "--cpuprofile", a.cpuProfile)
	}
	if a.config != "" {
		out = append(out, "--stage-config", a.config)
	}
	if a.memProfile != "" {
		out = append(out, "--memprofile", a.memProfile)
	}
	if a.s3.endpoint != "" {
		out = append(out, "--s3-endpoint", a.s3.endpoint)
	}
	if a.s3.accessKey != "" {
		out = append(out, "--s3-access-key", a.s3.accessKey)
	}
	if a.s3.region != "" {
		out = append(out, "--s3-region", a.s3.region)
	}
	return out
}

// childResult is the last line a stage child prints ("result {json}").
type childResult struct {
	Events     int64  `json:"events"`
	Bytes      int64  `json:"bytes"`
	AssignedNs int64  `json:"assigned_ns"` // partitions assigned: the stage clock starts
	DoneNs     int64  `json:"done_ns"`     // everything consumed (consume, decode) or committed (e2e)
	DeadLetter int64  `json:"dead_letters,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Lines a child writes on stdout, read by the parent:
//
//	assigned <unix ns>
//	progress <unix ns> <records done> <records committed> <go heap bytes>
//	result <json childResult>
type childOut struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *childOut) printf(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.w, format, args...)
}

// runStage runs one stage in this process and prints its lines on stdout.
func runStage(ctx context.Context, a stageArgs, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if a.cpuProfile != "" {
		f, err := os.Create(a.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := rtpprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer rtpprof.StopCPUProfile()
	}
	if a.memProfile != "" {
		stop := peakHeapProfile(a.memProfile)
		defer stop()
	}
	out := &childOut{w: stdout}
	var res childResult
	var err error
	switch a.stage {
	case StageConsume, StageDecode:
		res, err = consumeStage(ctx, a, out)
	case StageE2E:
		res, err = e2eStage(ctx, a, out, stderr)
	default:
		return fmt.Errorf("unknown stage %q", a.stage)
	}
	if err != nil {
		res.Error = err.Error()
	}
	js, _ := json.Marshal(res)
	out.printf("result %s\n", js)
	return err
}

// handler starts every partition where start_offset says (earliest).
type handler struct {
	assigned atomic.Int64
	out      *childOut
}

func (h *handler) Assigned(_ context.Context, _ string, _ []int32) (map[int32]int64, error) {
	now := time.Now().UnixNano()
	if h.assigned.CompareAndSwap(0, now) {
		h.out.printf("assigned %d\n", now)
	}
	return nil, nil
}

func (h *handler) Revoked(context.Context, string, []int32) {}

// consumeStage polls with the daemon's consumer settings until a.events
// records are read; decode also maps every record, one goroutine per
// partition of a poll (as the engine's readers do).
func consumeStage(ctx context.Context, a stageArgs, out *childOut) (childResult, error) {
	var res childResult
	cfg, err := daemon.Load(a.config, os.Getenv)
	if err != nil {
		return res, err
	}
	kcfg := cfg.Kafka
	kcfg.Brokers = strings.Split(a.brokers, ",")
	kcfg.Topic, kcfg.Group = a.topic, a.group
	h := &handler{out: out}
	cons, err := kafka.NewConsumer(kcfg, h, nil)
	if err != nil {
		return res, err
	}
	defer cons.Close()
	if _, err := cfg.ResolveSchemas(ctx, slog.New(slog.DiscardHandler)); err != nil {
		return res, err
	}
	m, err := mapping.New(cfg.MappingConfig(), cfg.Table.PartitionColumns)
	if err != nil {
		return res, err
	}
	var mappers map[int32]*partMapper
	var base *mapping.Mapper
	if a.stage == StageDecode {
		base, mappers = m, map[int32]*partMapper{}
	}
	var done atomic.Int64
	stopProgress := progressLoop(out, func() (int64, int64) { n := done.Load(); return n, n })
	defer stopProgress()
	// decode: one worker per partition, fed through a short queue, so
	// polling overlaps decoding (the upper bound of what readers can do).
	var wg sync.WaitGroup
	queues := map[int32]chan kafka.Batch{}
	defer func() {
		for _, q := range queues {
			close(q)
		}
		wg.Wait()
	}()
	var polled int64
	for polled < a.events {
		batches, err := cons.Poll(ctx)
		if err != nil && len(batches) == 0 {
			return res, err
		}
		for _, b := range batches {
			polled += int64(len(b.Records))
			for _, r := range b.Records {
				res.Bytes += int64(len(r.Key) + len(r.Value))
			}
			if mappers == nil {
				done.Add(int64(len(b.Records)))
				continue
			}
			q := queues[b.Partition]
			if q == nil {
				pm := &partMapper{m: base.Clone(), row: mapping.Row{Arena: new(mapping.Arena)}}
				mappers[b.Partition] = pm
				q = make(chan kafka.Batch, 2)
				queues[b.Partition] = q
				wg.Go(func() {
					for b := range q {
						pm.mapBatch(b)
						done.Add(int64(len(b.Records)))
					}
				})
			}
			q <- b
		}
	}
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	clear(queues)
	res.DoneNs = time.Now().UnixNano()
	res.Events = done.Load()
	res.AssignedNs = h.assigned.Load()
	for _, pm := range mappers {
		res.DeadLetter += pm.dead
	}
	return res, nil
}

// partMapper maps one partition's records, as a reader actor does (without
// routing rows to buffers).
type partMapper struct {
	m    *mapping.Mapper
	row  mapping.Row
	rec  mapping.Record
	dead int64
}

func (p *partMapper) mapBatch(b kafka.Batch) {
	p.m.StartBatch()
	for _, kr := range b.Records {
		p.rec = mapping.Record{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset, Timestamp: kr.Timestamp, Key: kr.Key, Value: kr.Value}
		if err := p.m.Map(&p.rec, &p.row); err != nil {
			p.dead++
		}
	}
	p.row.Arena.Reset()
}

// progressLoop prints a progress line every 100 ms until stopped.
func progressLoop(out *childOut, counts func() (done, committed int64)) (stop func()) {
	return every(100*time.Millisecond, func() {
		d, c := counts()
		out.printf("progress %d %d %d %d\n", time.Now().UnixNano(), d, c, goHeapBytes())
	})
}

// every calls f every d in its own goroutine until stop, which returns
// once f has run for the last time.
func every(d time.Duration, f func()) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f()
			}
		}
	}()
	return func() { cancel(); <-finished }
}

// e2eStage runs the daemon (daemon.Run) on the bench topic, to the high
// watermark with untilLatest (as `run --until-latest`) or until SIGTERM.
func e2eStage(ctx context.Context, a stageArgs, out *childOut, stderr io.Writer) (childResult, error) {
	var res childResult
	cfg, err := daemon.Load(a.config, os.Getenv)
	if err != nil {
		return res, err
	}
	cfg.Storage.Endpoint, cfg.Storage.AccessKey, cfg.Storage.Region = a.s3.endpoint, a.s3.accessKey, a.s3.region
	cfg.Kafka.Brokers = strings.Split(a.brokers, ",")
	cfg.Kafka.Group = a.group
	if a.natsURL != "" {
		cfg.NATS.URL = a.natsURL
	} else {
		cfg.NATS.Listen = "127.0.0.1:-1"
		cfg.NATS.StoreDir = a.natsDir
	}
	cfg.HTTP.Listen = "127.0.0.1:0" // on, as in the daemon; scraped for progress
	cfg.Log.Level = "info"
	if a.flush > 0 {
		cfg.Flush.Interval = a.flush
	}
	if a.upsert {
		upsertTable(cfg, a.sequenced)
	}
	if a.tables > 1 {
		benchRoutes(cfg, a.topic, a.table, a.tables)
	} else {
		cfg.Table.URI, cfg.Kafka.Topic = a.table, a.topic
	}
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	// With untilLatest the daemon is also stopped (gracefully) once it has
	// committed a.events rows: runtime's until-latest can wait a whole
	// flush interval after the last commit (a Flush queued behind a
	// running epoch is only answered by the next one).
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	logw := &logWatch{out: out, w: stderr, noScrape: a.noProgress}
	if a.untilLatest && a.events > 0 {
		logw.target, logw.reached = a.events, cancel
	}
	defer logw.stopScrape()
	err = daemon.Run(runCtx, cfg, daemon.RunOptions{UntilLatest: a.untilLatest, LogOutput: logw, MemoryLimit: true})
	res.DoneNs = time.Now().UnixNano()
	res.AssignedNs = logw.assigned.Load()
	logw.stopScrape()
	res.Events = int64(logw.records.Load())
	if ctx.Err() != nil && err == nil {
		return res, nil // SIGTERM: latency mode stops the daemon this way
	}
	return res, err
}

// logWatch passes the daemon's log to w and watches it for the moment
// partitions are assigned and for the HTTP address, whose /metrics it then
// scrapes for progress (records consumed and rows committed).
type logWatch struct {
	out      *childOut
	w        io.Writer
	mu       sync.Mutex
	buf      []byte
	assigned atomic.Int64
	started  bool
	noScrape bool
	stop     func()
	records  atomic.Uint64
	target   int64  // rows committed at which to call reached
	reached  func() // stops the daemon
}

var httpAddr = regexp.MustCompile(`msg="deltaflow running".* http=(\S+)`)

func (l *logWatch) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		line := string(l.buf[:i])
		l.buf = l.buf[i+1:]
		if strings.Contains(line, "partitions assigned") {
			now := time.Now().UnixNano()
			if l.assigned.CompareAndSwap(0, now) {
				l.out.printf("assigned %d\n", now)
			}
		}
		if m := httpAddr.FindStringSubmatch(line); m != nil && !l.started && !l.noScrape {
			l.started = true
			l.stop = l.scrape("http://" + m[1] + "/metrics")
		}
	}
	return l.w.Write(p)
}

func (l *logWatch) stopScrape() {
	l.mu.Lock()
	stop := l.stop
	l.stop = nil
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// scrape reads the daemon's counters every 100 ms.
func (l *logWatch) scrape(url string) func() {
	cl := &http.Client{Timeout: time.Second}
	var committed atomic.Uint64
	read := func() {
		resp, err := cl.Get(url)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		var rec, rows float64
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "deltaflow_records_total{"):
				rec += metricValue(line)
			case strings.HasPrefix(line, "deltaflow_rows_committed_total{"):
				rows += metricValue(line) // every table's
			}
		}
		l.records.Store(uint64(rec))
		committed.Store(uint64(rows))
		if l.reached != nil && l.target > 0 && int64(rows) >= l.target {
			l.reached()
		}
	}
	stop := progressLoop(l.out, func() (int64, int64) {
		read()
		return int64(l.records.Load()), int64(committed.Load())
	})
	return func() { stop(); read() }
}

func metricValue(line string) float64 {
	f := strings.Fields(line)
	v, _ := strconv.ParseFloat(f[len(f)-1], 64)
	return v
}

// StageMain runs a stage child: args are the bench command's arguments
// including --stage. It returns the exit code.
func StageMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench-stage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var a stageArgs
	a.register(fs)
	fs.StringVar(&a.s3.endpoint, "s3-endpoint", "", "")
	fs.StringVar(&a.s3.accessKey, "s3-access-key", "", "")
	fs.StringVar(&a.s3.region, "s3-region", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := runStage(ctx, a, stdout, stderr); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "bench stage %s: %v\n", a.stage, err)
		return 1
	}
	return 0
}

// natsDirFor is the stage child's embedded NATS store.
func natsDirFor(dir, stage string) string { return filepath.Join(dir, "nats-"+stage) }

// peakHeapProfile writes the heap profile to path each time the Go heap
// passes its previous peak by 10%, so the file shows what was live then.
func peakHeapProfile(path string) (stop func()) {
	var peak int64
	return every(100*time.Millisecond, func() {
		if h := goHeapBytes(); h > peak+peak/10 {
			peak = h
			if f, err := os.Create(path); err == nil {
				rtpprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
	})
}
