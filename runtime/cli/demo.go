//go:build !nodevtools

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/runtime/daemon"
	"github.com/deltaflow/deltaflow/storage"
)

// demoTopic and demoPartitions are the in-process Kafka topic.
const (
	demoTopic      = "sensor-events"
	demoPartitions = 3
)

// demoDrainTimeout bounds the wait for the last records to be committed.
const demoDrainTimeout = 60 * time.Second

// demoOptions are demo's flags.
type demoOptions struct {
	data     string
	rate     float64
	duration time.Duration
	badRatio float64
}

func demoCommand(out IO) *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "run Kafka, NATS, the simulator and deltaflow in one process",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runDemo(cmd.Context(), out, o) },
	}
	cmd.Flags().StringVar(&o.data, "data", "./data", "`directory` for the table (DIR/sensor_events) and the NATS store (DIR/nats)")
	atLeast(cmd.Flags(), &o.rate, "rate", 1000, 1, "simulated events per second")
	atLeast(cmd.Flags(), &o.duration, "duration", 30*time.Second, 0, "how long to produce; 0: until Ctrl-C")
	within(cmd.Flags(), &o.badRatio, "bad-ratio", 0, 0, 1, "fraction of malformed records, 0 to 1: they go to the DLQ stream")
	return cmd
}

func runDemo(ctx context.Context, out IO, o demoOptions) error {
	if o.rate <= 0 || o.duration < 0 {
		return usagef("--rate must be > 0 and --duration >= 0")
	}
	tablePath := filepath.Join(o.data, "sensor_events")
	if _, err := os.Stat(filepath.Join(tablePath, "_delta_log")); err == nil {
		// Never write demo rows into a table that may be real (./data is
		// also run's default), and keep the final counts about this run.
		return fmt.Errorf("%s already holds a table; delete it or pick another --data directory", tablePath)
	}

	cluster, err := kfake.NewCluster(kfake.Ports(9092), kfake.SeedTopics(demoPartitions, demoTopic))
	if err != nil {
		if cluster, err = kfake.NewCluster(kfake.SeedTopics(demoPartitions, demoTopic)); err != nil {
			return fmt.Errorf("start in-process kafka: %w", err)
		}
		fmt.Fprintf(out.Stdout, "port 9092 is taken; in-process Kafka listens on %s instead\n", cluster.ListenAddrs()[0])
	}
	defer cluster.Close()
	natsAddr := preferAddr(out.Stdout, "NATS", "127.0.0.1:4222")
	httpAddr := preferAddr(out.Stdout, "HTTP", "127.0.0.1:8080")

	cfg := daemon.DefaultConfig()
	cfg.Table.URI = tablePath
	cfg.Kafka.Brokers = cluster.ListenAddrs()
	cfg.Kafka.Topic = demoTopic
	cfg.Kafka.Group = "deltaflow-demo"
	cfg.NATS.Listen = natsAddr
	cfg.NATS.StoreDir = filepath.Join(o.data, "nats")
	cfg.Flush.Interval = 2 * time.Second
	cfg.HTTP.Listen = httpAddr
	cfg.Log.Level = "warn"
	if err := cfg.Validate(); err != nil {
		return err
	}
	fmt.Fprintf(out.Stdout, "kafka   %s, topic %s (%d partitions), %g events/s\n", cfg.Kafka.Brokers[0], demoTopic, demoPartitions, o.rate)
	fmt.Fprintf(out.Stdout, "nats    nats://%s  (try: nats --server nats://%s sub 'deltaflow.>')\n", natsAddr, natsAddr)
	fmt.Fprintf(out.Stdout, "http    http://%s/metrics\n", httpAddr)
	fmt.Fprintf(out.Stdout, "table   %s  (try: deltaflow inspect snapshot --table %s)\n", tablePath, tablePath)

	// The daemon gets its own context: Ctrl-C stops producing first, then
	// the demo lets it commit the rest before stopping it.
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	runErr := make(chan error, 1)
	go func() { runErr <- daemon.Run(runCtx, &cfg, daemon.RunOptions{LogOutput: out.Stderr}) }()

	prodCtx, stopProd := context.WithCancel(ctx)
	defer stopProd()
	if o.duration > 0 {
		prodCtx, stopProd = context.WithTimeout(ctx, o.duration)
		defer stopProd()
	}
	p, err := kafka.NewProducer(cfg.Kafka, nil)
	if err != nil {
		return err
	}
	defer p.Close()
	progress := newProgress(out.Stdout)
	type prodResult struct {
		res produceResult
		err error
	}
	prodDone := make(chan prodResult, 1)
	go func() {
		res, err := produceSim(prodCtx, p, demoTopic, produceOptions{rate: o.rate, devices: 50, seed: 1, badRatio: o.badRatio},
			func(n int64) { progress.produced.Store(n) })
		prodDone <- prodResult{res, err}
	}()

	tbl, err := openTable(ctx, tablePath)
	if err != nil {
		return err
	}
	var produced, bad int64
	tick := time.NewTicker(progress.interval)
	defer tick.Stop()
producing:
	for {
		select {
		case r := <-prodDone:
			if r.err != nil {
				stopRun()
				<-runErr
				return fmt.Errorf("produce: %w", r.err)
			}
			produced, bad = r.res.produced, r.res.bad
			break producing
		case err := <-runErr:
			stopProd()
			<-prodDone
			return fmt.Errorf("deltaflow stopped early: %w", err)
		case <-tick.C:
			progress.show(tbl.rows(ctx))
		}
	}

	// Let the daemon commit everything produced (one flush interval or
	// two), then stop it; the final counts come from the table itself.
	drain, cancelDrain := context.WithTimeout(context.WithoutCancel(ctx), demoDrainTimeout)
	defer cancelDrain()
	dlqStream := cfg.NATS.DLQStream
	if dlqStream == "" {
		dlqStream = bridge.DefaultDLQStream(cfg.Table.Name)
	}
	// The dead letters are acknowledged before their epoch commits; one
	// of only bad records commits nothing, so count them too.
	var letters int64
	var lerr error
	settled := func() bool {
		rows, _ := tbl.rows(drain)
		progress.show(rows, tbl.version)
		if rows < produced-bad {
			return false
		}
		if bad > 0 {
			letters, lerr = dlqLetters(drain, "nats://"+natsAddr, dlqStream)
		}
		return letters >= bad
	}
	for !settled() && drain.Err() == nil {
		select {
		case <-drain.Done():
		case err := <-runErr:
			return fmt.Errorf("deltaflow stopped early: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	stopRun()
	if err := <-runErr; err != nil {
		return err
	}
	rows, version := tbl.rows(context.WithoutCancel(ctx))
	progress.done()
	fmt.Fprintf(out.Stdout, "table version %d\n", version)
	if bad == 0 {
		fmt.Fprintf(out.Stdout, "produced %d events, committed %d rows\n", produced, rows)
	} else {
		// The demo has stopped: the letters are in its NATS store, which
		// dlq ls opens when nothing serves it (the store is next to the
		// table).
		list := "deltaflow dlq ls"
		if filepath.Clean(o.data) != "data" {
			list = "DELTAFLOW_TABLE_URI=" + tablePath + " " + list
		}
		fmt.Fprintf(out.Stdout, "produced %d events (%d malformed), committed %d rows, %d dead letters in stream %s\n"+
			"  (%s lists them)\n", produced, bad, rows, letters, dlqStream, list)
	}
	switch {
	case rows != produced-bad:
		return fmt.Errorf("committed rows (%d) differ from the good events produced (%d)", rows, produced-bad)
	case lerr != nil:
		return fmt.Errorf("count the dead letters: %w", lerr)
	case letters != bad:
		return fmt.Errorf("%d dead letters for %d malformed events", letters, bad)
	}
	return nil
}

// dlqLetters counts the messages of the DLQ stream on the NATS server at url.
func dlqLetters(ctx context.Context, url, stream string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	nc, err := nats.Connect(url, nats.Timeout(probeTimeout), nats.MaxReconnects(0), nats.Name("deltaflow demo"))
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	s, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int64(info.State.Msgs), nil
}

// preferAddr returns addr if it is free, else a free port on 127.0.0.1
// (saying so on w).
func preferAddr(w io.Writer, what, addr string) string {
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		return addr
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return addr // let the real listen report it
	}
	defer ln.Close()
	fmt.Fprintf(w, "%s is taken; %s listens on %s instead\n", addr, what, ln.Addr())
	return ln.Addr().String()
}

// demoTable follows the table the demo writes.
type demoTable struct {
	tbl     *delta.Table
	snap    *delta.Snapshot
	version int64
}

func openTable(ctx context.Context, path string) (*demoTable, error) {
	store, err := storage.Open(ctx, path, storage.Options{})
	if err != nil {
		return nil, err
	}
	return &demoTable{tbl: delta.NewTable(store), version: -1}, nil
}

// rows returns the committed rows (the sum of numRecords of live files) and
// the table version; 0 and -1 before the table exists.
func (d *demoTable) rows(ctx context.Context) (int64, int64) {
	var err error
	if d.snap == nil {
		d.snap, err = d.tbl.Snapshot(ctx)
	} else {
		err = d.tbl.Update(ctx, d.snap)
	}
	if err != nil {
		if !errors.Is(err, delta.ErrTableNotFound) {
			d.snap = nil // reload from scratch next time
		}
		return 0, d.version
	}
	d.version = d.snap.Version()
	rows, _ := totals(d.snap.Files())
	return rows, d.version
}
