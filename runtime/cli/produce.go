//go:build !nodevtools

package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/internal/sim"
)

// produceOptions are the simulator settings of produce (and demo).
type produceOptions struct {
	count    int // 0: until ctx ends
	rate     float64
	devices  int
	badRatio float64
	seed     int64
	// start is the first record's ingested_at; zero: see simConfig.
	start time.Time
}

// simSpan is the event time an unpaced run covers (the simulator's
// default): several event_date partitions.
const simSpan = 72 * time.Hour

// simConfig is the simulator for o, its clock in the present unless o.start
// pins it: paced by --rate, ingested_at follows the wall clock from now;
// unpaced, the records cover simSpan ending now. Either way the table looks
// fresh (a fixed past date would set off the freshness alert).
func (o produceOptions) simConfig(events int, now time.Time) sim.Config {
	cfg := sim.Config{Devices: o.devices, Seed: o.seed, Events: events, Rate: o.rate, BadRatio: o.badRatio, Start: o.start, Span: simSpan}
	if o.rate > 0 {
		cfg.Span = time.Duration(float64(events) / o.rate * float64(time.Second))
	}
	if cfg.Start.IsZero() {
		cfg.Start = now
		if o.rate <= 0 {
			cfg.Start = now.Add(-cfg.Span)
		}
	}
	return cfg
}

// produceResult counts what a producer run acknowledged.
type produceResult struct{ produced, bad int64 }

// produceFlags are produce's flags.
type produceFlags struct {
	produceOptions
	brokers, topic string
	partitions     int
	asJSON         bool
}

// produceJSON is `produce --json`.
type produceJSON struct {
	Topic    string `json:"topic"`
	Produced int64  `json:"produced"`
	Bad      int64  `json:"bad"`
}

func produceCommand(out IO) *cobra.Command {
	var f produceFlags
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "write simulated sensor records to Kafka",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runProduce(cmd.Context(), out, f) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.brokers, "brokers", "127.0.0.1:9092", "comma-separated seed `brokers`")
	bindEnv(fs, "brokers", "KAFKA_BOOTSTRAP")
	fs.StringVar(&f.topic, "topic", "sensor-events", "`topic` to write")
	bindEnv(fs, "topic", "KAFKA_TOPIC")
	atLeast(fs, &f.count, "count", 10000, 0, "records to write; 0: until interrupted")
	atLeast(fs, &f.rate, "rate", 0, 0, "records per second; 0: as fast as possible")
	atLeast(fs, &f.devices, "devices", 50, 1, "simulated devices (half smart plugs, half door sensors)")
	within(fs, &f.badRatio, "bad-ratio", 0, 0, 1, "fraction of malformed records, 0 to 1")
	fs.Int64Var(&f.seed, "seed", 1, "random seed (same seed and --start, same records)")
	fs.Func("start", "first record's ingested_at, a `TIME`: RFC 3339 or a date (default: records end now; with --rate they start now and follow the clock)",
		func(v string) error {
			t, err := kafka.ParseTime(v)
			f.start = t
			return err
		})
	atLeast(fs, &f.partitions, "partitions", 0, 0, "create the topic with this many partitions if it is missing")
	jsonFlag(fs, &f.asJSON)
	return cmd
}

func runProduce(ctx context.Context, out IO, f produceFlags) error {
	if f.count < 0 || f.rate < 0 || f.devices <= 0 || f.badRatio < 0 || f.badRatio > 1 || f.partitions < 0 {
		return usagef("--count, --rate and --partitions must be >= 0, --devices > 0, --bad-ratio in [0, 1]")
	}
	kcfg := kafka.DefaultConfig()
	kcfg.Brokers = strings.Split(f.brokers, ",")
	kcfg.Topic = f.topic
	if err := kcfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	if f.partitions > 0 {
		if err := kafka.CreateTopic(ctx, kcfg, f.topic, int32(f.partitions), -1); err != nil {
			return err
		}
	}
	p, err := kafka.NewProducer(kcfg, nil)
	if err != nil {
		return err
	}
	defer p.Close()
	start := time.Now()
	res, err := produceSim(ctx, p, f.topic, f.produceOptions, nil)
	if f.asJSON {
		if jerr := writeJSON(out.Stdout, produceJSON{Topic: f.topic, Produced: res.produced, Bad: res.bad}); err == nil {
			err = jerr
		}
		return err
	}
	fmt.Fprintf(out.Stdout, "produced %d, bad %d (to %s in %s)\n", res.produced, res.bad, f.topic, time.Since(start).Round(time.Millisecond))
	return err
}

// produceSim writes simulated records until o.count are written or ctx
// ends, then waits for the acknowledgements. progress, if set, is called with
// the running count as batches are acknowledged.
// Interrupted (ctx ended), it returns what was acknowledged and no error.
func produceSim(ctx context.Context, p *kafka.Producer, topic string, o produceOptions, progress func(int64)) (produceResult, error) {
	events := o.count
	if events == 0 {
		events = 100_000 // spreads the virtual clock; the run goes on past it
	}
	s := sim.New(o.simConfig(events, time.Now()))
	var res produceResult
	var pending int64
	flush := func() error {
		// Only acknowledged records count, so "produced" never overstates.
		err := p.Flush(context.WithoutCancel(ctx))
		if err == nil {
			res.produced += pending
			if progress != nil {
				progress(res.produced)
			}
		}
		pending = 0
		return err
	}
	var bad int64
	for i := 0; o.count == 0 || i < o.count; i++ {
		if ctx.Err() != nil {
			break
		}
		key, value, ev := s.Next(nil)
		// Not ctx: a record queued when ctx ends is still delivered and
		// counted, so the count matches what Kafka holds.
		p.ProduceAsync(context.WithoutCancel(ctx), &kgo.Record{Topic: topic, Key: key, Value: value})
		pending++
		if ev.Bad {
			bad++
		}
		if pending >= 1000 || o.rate > 0 && pending >= max(1, int64(o.rate/10)) {
			if err := flush(); err != nil {
				return res, err
			}
			res.bad = bad
		}
	}
	if err := flush(); err != nil && !errors.Is(err, context.Canceled) {
		return res, err
	}
	res.bad = bad
	return res, nil
}
