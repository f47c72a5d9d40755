package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/runtime/daemon"
)

// UpsertReport is --upsert's result: a table of Keys keys loaded by one
// daemon run, then Changes changes to random keys (80% updates, 10%
// inserts, 10% deletes) drained by another, end to end.
type UpsertReport struct {
	Keys         int     `json:"keys"`
	Sequenced    bool    `json:"sequenced"`    // by sequence_by changed_at, the record's timestamp
	LoadSeconds  float64 `json:"load_seconds"` // assignment → the load's last commit
	LoadEPS      float64 `json:"load_eps"`
	Changes      int     `json:"changes"`
	Seconds      float64 `json:"seconds"` // assignment → the changes' last commit
	ChangesPerS  float64 `json:"changes_per_second"`
	Commits      int     `json:"commits"` // of the changes
	CPUSeconds   float64 `json:"cpu_seconds"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"` // of the changes' run
	LoadRSSBytes int64   `json:"load_peak_rss_bytes"`
}

// upsertTable makes cfg's table the bench's upsert table: id (the record
// key's), name and balance, one row per id; if sequenced, changed_at (the
// record's timestamp, which a tombstone has too) orders the changes.
func upsertTable(cfg *daemon.Config, sequenced bool) {
	cfg.Table.WriteMode, cfg.Table.KeyColumns, cfg.Table.KeyFormat = daemon.WriteUpsert, []string{"id"}, mapping.JSON
	cfg.Table.PartitionColumns = []string{}
	cfg.Table.Columns = []mapping.Column{{Name: "id", Type: "long", Source: "kafka.key.id"},
		{Name: "name", Type: "string"}, {Name: "balance", Type: "long"}}
	if sequenced {
		cfg.Table.Columns = append(cfg.Table.Columns, mapping.Column{Name: "changed_at", Type: "timestamp", Source: "kafka.timestamp"})
		cfg.Table.SequenceBy = "changed_at"
	}
}

// upsertRun loads o.UpsertKeys keys, then drains o.Events changes to them,
// each with one daemon run to the end of the topic.
func upsertRun(ctx context.Context, o Options, k *kafkaEnv, rep *Report) error {
	topic := k.prefix + "upsert"
	if err := k.createTopic(ctx, topic, o.Partitions); err != nil {
		return err
	}
	uri := filepath.Join(o.Dir, "upsert")
	if strings.HasPrefix(o.Table, "s3://") || strings.HasPrefix(o.Table, "s3a://") {
		uri = strings.TrimSuffix(o.Table, "/") + fmt.Sprintf("/bench-upsert-%d", time.Now().Unix())
	}
	ur := &UpsertReport{Keys: o.UpsertKeys, Changes: o.Events, Sequenced: o.UpsertSequence}
	rng := rand.New(rand.NewPCG(11, 12))
	next := int64(o.UpsertKeys) // the next new key
	load := func(i int) (int64, bool) { return int64(i), false }
	change := func(int) (int64, bool) {
		switch r := rng.IntN(10); {
		case r == 0:
			next++
			return next - 1, false
		case r == 1:
			return rng.Int64N(next), true
		}
		return rng.Int64N(next), false
	}
	group := "bench-upsert-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for phase, p := range []struct {
		name string
		n    int
		gen  func(int) (int64, bool)
	}{{"load", o.UpsertKeys, load}, {"changes", o.Events, change}} {
		fmt.Fprintf(o.Log, "bench: upsert %s: %d records ...\n", p.name, p.n)
		if err := produceChanges(ctx, k, topic, p.n, p.gen); err != nil {
			return fmt.Errorf("produce the %s: %w", p.name, err)
		}
		before, err := summarize(ctx, uri, o.S3)
		if err != nil {
			before = &tableSummary{} // the table is made by the first run
		}
		a := stageArgs{stage: StageE2E, brokers: strings.Join(k.brokers, ","), topic: topic, upsert: true, sequenced: o.UpsertSequence, group: group,
			flush: o.FlushInterval, s3: s3FlagsOf(o.S3), config: o.Config, table: uri, natsDir: natsDirFor(o.Dir, "upsert"), untilLatest: true}
		if o.CPUProfile != "" {
			a.cpuProfile = o.CPUProfile + ".upsert-" + p.name
		}
		if o.MemProfile != "" {
			a.memProfile = o.MemProfile + ".upsert-" + p.name
		}
		run, err := runChild(ctx, o, a, nil)
		if err != nil {
			return fmt.Errorf("upsert %s: %w", p.name, err)
		}
		after, err := summarize(ctx, uri, o.S3)
		if err != nil {
			return err
		}
		if err := refineCommitTimes(ctx, uri, o.S3, after.commits); err != nil {
			return err
		}
		var seconds float64
		if c := len(after.commits); c > 0 {
			seconds = round3(after.commits[c-1].At.Sub(run.assigned).Seconds())
		}
		if phase == 0 {
			ur.LoadSeconds, ur.LoadRSSBytes = seconds, run.maxRSS
			if seconds > 0 {
				ur.LoadEPS = float64(p.n) / seconds
			}
			continue
		}
		ur.Seconds, ur.PeakRSSBytes, ur.CPUSeconds = seconds, run.maxRSS, round3(run.cpu.Seconds())
		ur.Commits = after.Commits - before.Commits
		if seconds > 0 {
			ur.ChangesPerS = float64(p.n) / seconds
		}
	}
	rep.Upsert = ur
	return nil
}

// produceChanges produces n records to topic: gen(i) says the key and
// whether it is a tombstone; other values are a random name and balance.
// Keys go to partitions by Kafka's default (hash) partitioner, so a key's
// changes stay in order.
func produceChanges(ctx context.Context, k *kafkaEnv, topic string, n int, gen func(int) (int64, bool)) error {
	p, err := kafka.NewProducer(k.config(topic), nil)
	if err != nil {
		return err
	}
	defer p.Close()
	for i := range n {
		id, tombstone := gen(i)
		rec := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, `{"id":%d}`, id)}
		if !tombstone {
			rec.Value = fmt.Appendf(nil, `{"name":"account-%d","balance":%d}`, id, i)
		}
		p.ProduceAsync(ctx, rec)
		if (i+1)%10000 == 0 {
			if err := p.Flush(ctx); err != nil {
				return err
			}
		}
	}
	return p.Flush(ctx)
}
