package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
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
	d, err := startDaemon(ctx, o, k, "latency", func(a *stageArgs) {
		if o.CPUProfile != "" {
			a.cpuProfile = o.CPUProfile + ".latency"
		}
	})
	if err != nil {
		return nil, err
	}
	topic, table := d.topic, d.table
	events := int(o.Rate * o.Duration.Seconds())
	rep := &LatencyReport{Events: int64(events), Rate: o.Rate, DurationSeconds: o.Duration.Seconds(),
		FlushIntervalSeconds: d.flush.Seconds(), Table: table}
	fmt.Fprintf(o.Log, "bench: latency: producing %d events at %.0f/s, flush interval %s ...\n", events, o.Rate, d.flush)
	if _, err := k.produce(ctx, topic, events, o.Devices, o.Rate, 2); err != nil {
		return nil, d.abort(fmt.Errorf("produce: %w", err))
	}
	sum, err := d.waitCommitted(ctx, o, int64(events))
	if err != nil {
		return nil, d.abort(err)
	}
	run, err := d.stop()
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
			app := ledger.AppID(d.appID, topic, r.Partition)
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
