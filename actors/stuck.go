package actors

import (
	"context"
	"time"
)

// stuckAfter is how long a fetched partition with records waiting may
// return none before the fetch loop seeks it again. franz-go stops a
// partition at a record batch too large to decompress and reports it
// once; a report that never reaches the loop (one lost to an interrupted
// poll, to a pause, or to a seek the consumer ignored before it owned the
// partition, all seen) would leave the partition stopped for good, and a
// seek makes franz-go fetch it, and report it, again. A variable for the
// tests.
var stuckAfter = 10 * time.Second

// healStuck seeks again the fetched partitions that returned nothing for
// stuckAfter while the brokers hold records past where they are: at most
// one lag request every stuckAfter, and only while some fetched partition
// is silent (an idle topic costs that request, and nothing else).
func (f *fetcher) healStuck(ctx context.Context, now time.Time) {
	if now.Sub(f.stuckChecked) < stuckAfter {
		return
	}
	f.stuckChecked = now
	var silent []tp
	for p, on := range f.active {
		if on && now.Sub(f.lastData[p]) >= stuckAfter {
			silent = append(silent, p)
		}
	}
	if len(silent) == 0 {
		return
	}
	lag, err := f.lagNow(ctx)
	if err != nil {
		f.logger.Debug("lag of silent partitions not measured", "err", err)
		return
	}
	stuck := map[tp]bool{}
	for _, p := range silent {
		if lag[p] > 0 {
			stuck[p] = true
			delete(f.pos, p) // sought to where its tables continue
			f.lastData[p] = now
		}
	}
	if len(stuck) > 0 {
		f.logger.Warn("kafka: partitions with records waiting returned none; fetching them again", "partitions", sortedTPs(stuck), "after", stuckAfter)
		f.reposition(stuck)
	}
}
