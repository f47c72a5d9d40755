package actors

import (
	"context"
	"time"
)

// pausedLagEvery is how often the fetch loop measures the lag while Kafka
// is paused: dispatched records measure it otherwise, and a pause must not
// freeze deltaflow_lag_records while the backlog grows behind it.
const pausedLagEvery = pollWait

// pausedLagTimeout bounds one measure: a resume waits for it.
const pausedLagTimeout = time.Second

// measureLag sets deltaflow_lag_records from the brokers' high watermarks,
// at most every pausedLagEvery. Called by the loop while it fetches
// nothing.
func (f *fetcher) measureLag(ctx context.Context) {
	if time.Since(f.lagMeasured) < pausedLagEvery {
		return
	}
	f.lagMeasured = time.Now()
	if _, err := f.lagNow(ctx); err != nil {
		f.logger.Debug("lag not measured while paused", "err", err)
	}
}

// lagNow asks the brokers for each owned partition's lag, within
// pausedLagTimeout, and sets deltaflow_lag_records from it. Kafka's lag
// starts after the records parked for a partition (fetched, handed to no
// table yet): they are counted too.
func (f *fetcher) lagNow(ctx context.Context) (map[tp]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, pausedLagTimeout)
	defer cancel()
	lag, err := f.cons.Lag(ctx)
	if err != nil {
		return nil, err
	}
	for p, n := range lag {
		if pk := f.parked[p]; pk != nil {
			n += int64(len(pk.batch.Records))
			lag[p] = n
		}
		f.metrics.Lag.WithLabelValues(p.Topic, partitionLabel(p.Partition)).Set(float64(n))
	}
	return lag, nil
}
