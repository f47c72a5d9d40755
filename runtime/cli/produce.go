package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/internal/sim"
)

const produceUsage = "--brokers B --topic T [--rate N] [--count N] [--devices N] [--bad-ratio F] [--seed S] [--partitions N]"

func produceCommand() *Command {
	return &Command{
		Name:    "produce",
		Usage:   produceUsage,
		Summary: "write simulated sensor records to Kafka",
		Run:     runProduce,
	}
}

// produceOptions are the simulator settings of produce (and demo).
type produceOptions struct {
	count    int // 0: until ctx ends
	rate     float64
	devices  int
	badRatio float64
	seed     int64
}

// produceResult counts what a producer run acknowledged.
type produceResult struct{ produced, bad int64 }

func runProduce(ctx context.Context, out IO, args []string) error {
	fs := newFlagSet("produce", produceUsage, out.Stderr)
	brokers := fs.String("brokers", envOr("KAFKA_BOOTSTRAP", "127.0.0.1:9092"), "comma-separated seed `brokers` (default $KAFKA_BOOTSTRAP)")
	topic := fs.String("topic", envOr("KAFKA_TOPIC", "sensor-events"), "`topic` to write (default $KAFKA_TOPIC)")
	var o produceOptions
	fs.IntVar(&o.count, "count", 10000, "records to write; 0: until interrupted")
	fs.Float64Var(&o.rate, "rate", 0, "records per second; 0: as fast as possible")
	fs.IntVar(&o.devices, "devices", 50, "simulated devices (half smart plugs, half door sensors)")
	fs.Float64Var(&o.badRatio, "bad-ratio", 0, "fraction of malformed records, 0 to 1")
	fs.Int64Var(&o.seed, "seed", 1, "random seed (same seed, same records)")
	partitions := fs.Int("partitions", 0, "create the topic with this many partitions if it is missing")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if o.count < 0 || o.rate < 0 || o.devices <= 0 || o.badRatio < 0 || o.badRatio > 1 || *partitions < 0 {
		return usagef("--count, --rate and --partitions must be >= 0, --devices > 0, --bad-ratio in [0, 1]")
	}
	kcfg := kafka.DefaultConfig()
	kcfg.Brokers = strings.Split(*brokers, ",")
	kcfg.Topic = *topic
	if err := kcfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	if *partitions > 0 {
		if err := kafka.CreateTopic(ctx, kcfg, *topic, int32(*partitions), -1); err != nil {
			return err
		}
	}
	p, err := kafka.NewProducer(kcfg, nil)
	if err != nil {
		return err
	}
	defer p.Close()
	start := time.Now()
	res, err := produceSim(ctx, p, *topic, o, nil)
	fmt.Fprintf(out.Stdout, "produced %d, bad %d (to %s in %s)\n", res.produced, res.bad, *topic, time.Since(start).Round(time.Millisecond))
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
	s := sim.New(sim.Config{Devices: o.devices, Seed: o.seed, Events: events, Rate: o.rate, BadRatio: o.badRatio})
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

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
