package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/actors"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/runtime"
	"github.com/deltaflow/deltaflow/storage"
)

// LatencyReport is latency mode's result: for every record, the delay from
// its Kafka timestamp (set when produced) to the time the commit holding it
// landed in the Delta log.
type LatencyReport struct {
	Events               int64   `json:"events"`
	Rate                 float64 `json:"rate"`
	DurationSeconds      float64 `json:"duration_seconds"`
	FlushIntervalSeconds float64 `json:"flush_interval_seconds"`
	P50Seconds           float64 `json:"p50_seconds"`
	P99Seconds           float64 `json:"p99_seconds"`
	MaxSeconds           float64 `json:"max_seconds"`
	Commits              int     `json:"commits"`
	Uncommitted          int64   `json:"uncommitted,omitempty"`
	PeakRSSBytes         int64   `json:"peak_rss_bytes"`
	CPUSeconds           float64 `json:"cpu_seconds"`
	Table                string  `json:"table"`
}

func latency(ctx context.Context, o Options, k *kafkaEnv) (*LatencyReport, error) {
	nonce := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic := k.prefix + "latency-" + nonce
	if err := k.createTopic(ctx, topic, o.Partitions); err != nil {
		return nil, err
	}
	table := filepath.Join(o.Dir, "latency-table")
	if strings.HasPrefix(o.Table, "s3://") || strings.HasPrefix(o.Table, "s3a://") {
		table = strings.TrimSuffix(o.Table, "/") + "/bench-latency-" + nonce
	}
	base, err := runtime.Load(o.Config, os.Getenv)
	if err != nil {
		return nil, err
	}
	flush := o.FlushInterval
	if flush <= 0 {
		flush = base.Flush.Interval
	}
	events := int(o.Rate * o.Duration.Seconds())
	rep := &LatencyReport{Events: int64(events), Rate: o.Rate, DurationSeconds: o.Duration.Seconds(),
		FlushIntervalSeconds: flush.Seconds(), Table: table}

	a := stageArgs{stage: StageE2E, brokers: strings.Join(k.brokers, ","), topic: topic, group: "bench-latency-" + nonce,
		table: table, natsDir: natsDirFor(o.Dir, "latency"), natsURL: o.NATSURL, flush: o.FlushInterval, s3: s3FlagsOf(o.S3), config: o.Config}
	if o.CPUProfile != "" {
		a.cpuProfile = o.CPUProfile + ".latency"
	}
	assigned := make(chan struct{})
	c, err := startChild(append(slices.Clone(o.Self), a.args()...), o.ChildEnv, filepath.Join(o.Dir, "latency.log"),
		func(time.Time) { close(assigned) })
	if err != nil {
		return nil, err
	}
	childCtx, stopChild := context.WithCancel(ctx)
	defer stopChild()
	fail := func(err error) (*LatencyReport, error) {
		stopChild()
		c.wait(childCtx)
		return nil, err
	}
	select {
	case <-assigned:
	case <-c.readDone:
		return fail(fmt.Errorf("daemon exited before partitions were assigned (log: %s)", c.stderr.Name()))
	case <-time.After(time.Minute):
		return fail(fmt.Errorf("no partitions assigned within a minute (log: %s)", c.stderr.Name()))
	}
	fmt.Fprintf(o.Log, "bench: latency: producing %d events at %.0f/s, flush interval %s ...\n", events, o.Rate, flush)
	if _, err := k.produce(ctx, topic, events, o.Devices, o.Rate, 2); err != nil {
		return fail(fmt.Errorf("produce: %w", err))
	}
	// Wait until every row is committed: about one flush interval.
	deadline := time.Now().Add(2*flush + time.Minute)
	var sum *tableSummary
	for {
		sum, err = summarize(ctx, table, o.S3)
		if err == nil && sum.Rows >= int64(events) {
			break
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("%d of %d rows committed by the deadline", sum.Rows, events)
			}
			return fail(err)
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-c.readDone:
			return fail(fmt.Errorf("daemon exited early (log: %s)", c.stderr.Name()))
		case <-time.After(250 * time.Millisecond):
		}
	}
	stopChild() // SIGTERM: a graceful stop
	run, err := c.wait(childCtx)
	if err != nil {
		return nil, err
	}
	rep.PeakRSSBytes, rep.CPUSeconds = run.maxRSS, round3(run.cpu.Seconds())
	if err := refineCommitTimes(ctx, table, o.S3, sum.commits); err != nil {
		return nil, err
	}
	rep.Commits = len(sum.commits)

	// Every record's timestamp, read back from Kafka.
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var delays []float64
	readCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for n := 0; n < events; {
		fs := cl.PollFetches(readCtx)
		if err := readCtx.Err(); err != nil {
			return nil, fmt.Errorf("read back: %d of %d records: %w", n, events, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			app := actors.TxnAppID(base.Table.AppID, topic, r.Partition)
			for _, cm := range sum.commits {
				if v, ok := cm.Txns[app]; ok && v >= r.Offset {
					delays = append(delays, cm.At.Sub(r.Timestamp).Seconds())
					return
				}
			}
			rep.Uncommitted++
		})
	}
	slices.Sort(delays)
	rep.P50Seconds, rep.P99Seconds = round3(quantile(delays, 0.50)), round3(quantile(delays, 0.99))
	if len(delays) > 0 {
		rep.MaxSeconds = round3(delays[len(delays)-1])
	}
	return rep, nil
}

// refineCommitTimes replaces the commitInfo timestamps (taken just before
// the commit is written, millisecond precision) by the commit files'
// modification times when the store has sub-second ones (local disk):
// that is when the commit became visible.
func refineCommitTimes(ctx context.Context, uri string, opts storage.Options, cs []commitRec) error {
	store, err := storage.Open(ctx, uri, opts)
	if err != nil {
		return err
	}
	for i := range cs {
		info, err := store.Stat(ctx, delta.CommitKey(cs[i].Version))
		if err == nil && info.ModTime.Nanosecond() != 0 && info.ModTime.After(cs[i].At) {
			cs[i].At = info.ModTime
		}
	}
	return nil
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}
