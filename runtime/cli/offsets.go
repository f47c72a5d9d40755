package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/secret"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/runtime/daemon"
)

// probeTimeout bounds each look at NATS and Kafka: `inspect offsets` is a
// quick look, and the table's answer must not wait on them.
const probeTimeout = 3 * time.Second

// offsetsFlags are the flags of `inspect offsets`.
type offsetsFlags struct {
	app, topic, name string
	natsURL          string
	brokers, group   string
}

func (f *offsetsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.app, "app", "deltaflow", "table.app_id, the txn appId prefix (with --config: its table.app_id)")
	fs.StringVar(&f.topic, "topic", "sensor-events", "Kafka topic (with --config: its kafka.topic)")
	fs.StringVar(&f.name, "name", "sensor_events", "table.name, as in the NATS KV keys (with --config: its table.name)")
	fs.StringVar(&f.natsURL, "nats", "", "NATS `URL` of the KV mirror, without a password (put one in $NATS_URL; with --config: its nats.url); none: skipped")
	bindEnv(fs, "nats", "NATS_URL")
	noCredentials(fs, "nats", "$NATS_URL")
	fs.StringVar(&f.brokers, "brokers", "", "Kafka brokers, comma-separated (with --config: its kafka.brokers); none: skipped")
	bindEnv(fs, "brokers", "KAFKA_BOOTSTRAP")
	fs.StringVar(&f.group, "group", "deltaflow", "Kafka consumer group (with --config: its kafka.group)")
}

// defaultsFrom fills the flags not given (on the command line or by their
// environment variable) from the configuration: with --config, `inspect
// offsets` looks where `run` writes.
func (f *offsetsFlags) defaultsFrom(fs *pflag.FlagSet, cfg *daemon.Config) {
	// nats.url, else the embedded server at nats.listen (as dlq ls finds it).
	natsURL, err := bridge.ClientURL(cfg.NATS)
	if err != nil {
		natsURL = ""
	}
	for _, d := range []struct {
		flag string
		p    *string
		v    string
	}{
		{"app", &f.app, cfg.Table.AppID}, {"topic", &f.topic, cfg.Kafka.Topic}, {"name", &f.name, cfg.Table.Name},
		{"nats", &f.natsURL, natsURL}, {"brokers", &f.brokers, strings.Join(cfg.Kafka.Brokers, ",")}, {"group", &f.group, cfg.Kafka.Group},
	} {
		if !fs.Changed(d.flag) && d.v != "" {
			*d.p = d.v
		}
	}
}

// offsetRow is one partition of `inspect offsets --json`; absent sources are
// null.
type offsetRow struct {
	Partition int32 `json:"partition"`
	// TxnVersion is the last offset the table committed (its txn version).
	TxnVersion *int64 `json:"txnVersion"`
	// KV is the NATS KV mirror's record.
	KV *bridge.OffsetRecord `json:"kv"`
	// GroupOffset is the consumer group's committed offset (the next to read).
	GroupOffset *int64 `json:"groupOffset"`
	// EndOffset is the partition's high watermark.
	EndOffset *int64 `json:"endOffset"`
	// Lag is the records the table does not hold yet: EndOffset minus the
	// table's next offset (TxnVersion+1, 0 without one); null without
	// EndOffset.
	Lag *int64 `json:"lag"`
}

type offsetsJSON struct {
	Version    int64       `json:"version"`
	App        string      `json:"app"`
	Topic      string      `json:"topic"`
	Partitions []offsetRow `json:"partitions"`
	Notes      []string    `json:"notes"`
}

func inspectOffsets(ctx context.Context, w io.Writer, s *delta.Snapshot, f offsetsFlags, asJSON bool) error {
	res := offsetsJSON{Version: s.Version(), App: f.app, Topic: f.topic, Notes: []string{}}
	rows := map[int32]*offsetRow{}
	row := func(p int32) *offsetRow {
		if rows[p] == nil {
			rows[p] = &offsetRow{Partition: p}
		}
		return rows[p]
	}
	for p, v := range ledger.Last(s, f.app, f.topic) {
		row(p).TxnVersion = &v
	}
	if len(rows) == 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("table: no txn for app %q topic %q", f.app, f.topic))
	}

	if f.natsURL == "" {
		res.Notes = append(res.Notes, "nats: skipped (no --nats or NATS_URL)")
	} else if kv, err := kvOffsets(ctx, f.natsURL, f.name, f.topic); err != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("nats: skipped: %v", err))
	} else {
		for p, rec := range kv {
			rec.Time = rec.Time.UTC()
			row(p).KV = &rec
		}
	}

	if f.brokers == "" {
		res.Notes = append(res.Notes, "kafka: skipped (no --brokers or KAFKA_BOOTSTRAP)")
	} else {
		group, end, err := kafkaOffsets(ctx, strings.Split(f.brokers, ","), f.group, f.topic)
		if err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("kafka: %v", err))
		}
		for p, o := range group {
			row(p).GroupOffset = &o
		}
		for p, o := range end {
			r := row(p)
			r.EndOffset = &o
			var next int64
			if r.TxnVersion != nil {
				next = *r.TxnVersion + 1
			}
			lag := max(o-next, 0)
			r.Lag = &lag
		}
	}

	for _, p := range slices.Sorted(maps.Keys(rows)) {
		res.Partitions = append(res.Partitions, *rows[p])
	}
	if res.Partitions == nil {
		res.Partitions = []offsetRow{}
	}
	if asJSON {
		return writeJSON(w, res)
	}
	fmt.Fprintf(w, "table version %d, app %s, topic %s\n", res.Version, res.App, res.Topic)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tTABLE (LAST OFFSET)\tKV OFFSET\tKV VERSION\tGROUP (NEXT)\tEND\tLAG")
	opt := func(v *int64) string {
		if v == nil {
			return "-"
		}
		return strconv.FormatInt(*v, 10)
	}
	for _, r := range res.Partitions {
		kvOff, kvVer := "-", "-"
		if r.KV != nil {
			kvOff, kvVer = strconv.FormatInt(r.KV.Offset, 10), strconv.FormatInt(r.KV.Version, 10)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Partition, opt(r.TxnVersion), kvOff, kvVer, opt(r.GroupOffset), opt(r.EndOffset), opt(r.Lag))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

// kvOffsets reads the KV mirror (bridge.ReadOffsets: bridge.New would
// create the bucket and streams, which an inspection must not do).
func kvOffsets(ctx context.Context, url, table, topic string) (map[int32]bridge.OffsetRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	nc, err := nats.Connect(url, nats.Timeout(probeTimeout), nats.MaxReconnects(0), nats.Name("deltaflow inspect"))
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", secret.RedactURL(url), err)
	}
	defer nc.Close()
	return bridge.ReadOffsets(ctx, nc, bridge.DefaultKVBucket, table, topic)
}

// kafkaOffsets returns the group's committed offsets and the end offsets
// of topic. A group that committed nothing (deltaflow commits its group
// offsets for lag tools only) still gives the end offsets, with the error.
func kafkaOffsets(ctx context.Context, brokers []string, group, topic string) (committed, end map[int32]int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DialTimeout(probeTimeout), kgo.RetryTimeout(probeTimeout))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("end offsets of %s at %s: %w", topic, strings.Join(brokers, ","), err)
	}
	end = map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
	fetched, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = fetched.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil, end, fmt.Errorf("group %s has committed no offsets", group)
	}
	if err != nil {
		return nil, end, fmt.Errorf("offsets of group %s: %w", group, err)
	}
	committed = map[int32]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			committed[o.Partition] = o.At
		}
	})
	return committed, end, nil
}
