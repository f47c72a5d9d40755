package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/storage"
)

// Report is the accounting of one scenario: what the topic holds against
// what the table and the DLQ hold.
type Report struct {
	Produced   int // records in the topic
	Rows       int // rows in the table's live files
	DLQ        int // messages in the DLQ stream for the topic
	Duplicates int // extra copies of a record (table + DLQ)
	Missing    int // records neither in the table nor in the DLQ
	Unexpected int // rows or letters naming a record the topic does not hold
	Version    int64
	Files      int
	Problems   []string // the first few duplicates, missing or unexpected records
}

// OK reports exactly-once: nothing missing, doubled or invented.
func (r Report) OK() bool { return r.Duplicates == 0 && r.Missing == 0 && r.Unexpected == 0 }

func (r Report) String() string {
	s := fmt.Sprintf("produced=%d rows=%d dlq=%d duplicates=%d missing=%d unexpected=%d (table v%d, %d files)",
		r.Produced, r.Rows, r.DLQ, r.Duplicates, r.Missing, r.Unexpected, r.Version, r.Files)
	if len(r.Problems) > 0 {
		s += "; e.g. " + strings.Join(r.Problems, ", ")
	}
	return s
}

// Source names where to look: the topic, the table and its DLQ stream.
type Source struct {
	Brokers []string
	Topic   string
	Store   storage.Store // the table root
	NATSURL string        // server of the DLQ stream
	// NATSOptions are extra options to connect with (credentials, TLS).
	NATSOptions []nats.Option
	Table       string // table.name, which names the DLQ stream
}

const maxProblems = 5

// tally counts, per partition and offset, whether the topic holds the
// record (bit 7) and how often the table and DLQ hold it (low 7 bits):
// a byte per record keeps a million-record scenario at a megabyte.
type tally struct {
	parts map[int32][]byte
	r     *Report
}

const producedBit = 0x80

func (t *tally) grow(p int32, off int64) []byte {
	s := t.parts[p]
	if int64(len(s)) <= off {
		s = slices.Grow(s, int(off+1)-len(s))[:off+1]
		t.parts[p] = s
	}
	return s
}

func (t *tally) see(p int32, off int64, where string) {
	if off < 0 {
		t.r.Unexpected++
		t.problem("%s p%d@%d: negative offset", where, p, off)
		return
	}
	s := t.grow(p, off)
	if s[off]&^producedBit < 0x7f {
		s[off]++
	}
}

func (t *tally) problem(format string, args ...any) {
	if len(t.r.Problems) < maxProblems {
		t.r.Problems = append(t.r.Problems, fmt.Sprintf(format, args...))
	}
}

// Account compares the records the topic holds (read back from Kafka, so
// records from any producer count, and a produce whose ack was lost is
// judged by what the broker kept) with the table's rows and the DLQ's
// letters.
func Account(ctx context.Context, src Source) (Report, error) {
	var r Report
	t := &tally{parts: map[int32][]byte{}, r: &r}
	if err := topicOffsets(ctx, src.Brokers, src.Topic, t); err != nil {
		return r, fmt.Errorf("read topic %s: %w", src.Topic, err)
	}
	if err := tableOffsets(ctx, src.Store, t); err != nil {
		return r, fmt.Errorf("read table %s: %w", src.Store.URI(), err)
	}
	if err := dlqOffsets(ctx, src, t); err != nil {
		return r, fmt.Errorf("read dlq of %s: %w", src.Table, err)
	}
	t.finish()
	return r, nil
}

// finish turns the counts into the report's verdicts.
func (t *tally) finish() {
	parts := make([]int32, 0, len(t.parts))
	for p := range t.parts {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	for _, p := range parts {
		for off, b := range t.parts[p] {
			n := int(b &^ producedBit)
			switch {
			case b&producedBit == 0 && n > 0:
				t.r.Unexpected += n
				t.problem("p%d@%d not in the topic but stored %d times", p, off, n)
			case b&producedBit != 0 && n == 0:
				t.r.Missing++
				t.problem("p%d@%d missing", p, off)
			case n > 1:
				t.r.Duplicates += n - 1
				t.problem("p%d@%d stored %d times", p, off, n)
			}
		}
	}
}

// produced marks a record the topic holds.
func (t *tally) produced(p int32, off int64) {
	s := t.grow(p, off)
	if s[off]&producedBit == 0 {
		s[off] |= producedBit
		t.r.Produced++
	}
}

// topicOffsets marks every offset the topic holds, reading it from the log
// start to the high watermarks of the moment.
func topicOffsets(ctx context.Context, brokers []string, topic string, t *tally) error {
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	adm.Close()
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	want := map[int32]int64{}
	start := map[string]map[int32]kgo.Offset{topic: {}}
	var ferr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			ferr = errors.Join(ferr, fmt.Errorf("partition %d: %w", o.Partition, o.Err))
			return
		}
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			start[topic][o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if ferr != nil || len(want) == 0 {
		return ferr
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(start),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if err != nil {
		return err
	}
	defer cl.Close()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%d partitions not read to their end: %w", len(want), err)
		}
		for _, e := range fs.Errors() {
			return fmt.Errorf("fetch partition %d: %w", e.Partition, e.Err)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			t.produced(rec.Partition, rec.Offset)
			if end, ok := want[rec.Partition]; ok && rec.Offset+1 >= end {
				delete(want, rec.Partition)
			}
		})
	}
	return nil
}

// tableOffsets counts the (partition, offset) of every row of the table's
// latest snapshot.
func tableOffsets(ctx context.Context, store storage.Store, t *tally) error {
	snap, err := delta.NewTable(store).Snapshot(ctx)
	if err != nil {
		return err
	}
	t.r.Version, t.r.Files = snap.Version(), snap.NumFiles()
	schema, err := snap.Schema()
	if err != nil {
		return err
	}
	pi, oi := -1, -1
	for i, f := range schema.Fields {
		switch f.Name {
		case PartitionColumn:
			pi = i
		case OffsetColumn:
			oi = i
		}
	}
	if pi < 0 || oi < 0 {
		return fmt.Errorf("table has no %s/%s columns (use scenario.WriteConfig)", PartitionColumn, OffsetColumn)
	}
	for _, add := range snap.Files() {
		for row, err := range delta.DataFileRows(ctx, store, schema, snap.PartitionColumns(), add) {
			if err != nil {
				return err
			}
			p, pok := delta.AsInt64(row[pi])
			off, ook := delta.AsInt64(row[oi])
			if !pok || !ook {
				t.r.Unexpected++
				t.problem("row in %s without partition/offset", add.Path)
				continue
			}
			t.r.Rows++
			t.see(int32(p), off, "table")
		}
	}
	return nil
}

// dlqOffsets counts the (partition, offset) headers of the topic's letters
// in the table's DLQ stream; no stream means no letters.
func dlqOffsets(ctx context.Context, src Source, t *tally) error {
	return Letters(ctx, src.NATSURL, src.Table, func(msg jetstream.Msg) error {
		h := msg.Headers()
		if h.Get(bridge.HeaderTopic) != src.Topic {
			return nil
		}
		p, perr := strconv.ParseInt(h.Get(bridge.HeaderPartition), 10, 32)
		off, oerr := strconv.ParseInt(h.Get(bridge.HeaderOffset), 10, 64)
		if perr != nil || oerr != nil {
			t.r.Unexpected++
			t.problem("dlq letter without partition/offset headers: %v", h)
			return nil
		}
		t.r.DLQ++
		t.see(int32(p), off, "dlq")
		return nil
	}, src.NATSOptions...)
}

// Letters calls each for every message of table's DLQ stream on the NATS
// server at url (connecting with opts), in stream order, until each returns
// an error; no stream means no letters.
func Letters(ctx context.Context, url, table string, each func(jetstream.Msg) error, opts ...nats.Option) error {
	nc, err := nats.Connect(url, append([]nats.Option{nats.Timeout(10 * time.Second)}, opts...)...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	stream, err := js.Stream(ctx, bridge.DefaultDLQStream(table))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return err
	}
	total := info.State.Msgs
	if total == 0 {
		return nil
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	for read := uint64(0); read < total; {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			if err := each(msg); err != nil {
				return err
			}
		}
		if err := batch.Error(); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("stream %s: read %d of %d messages", info.Config.Name, read, total)
		}
		read += uint64(n)
	}
	return nil
}

// Check accounts src (within 5 minutes), prints the report and fails t
// unless every record is stored exactly once. It returns the report for
// the scenario's own checks.
func Check(t testing.TB, src Source) Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	rep, err := Account(ctx, src)
	if err != nil {
		t.Fatalf("account: %v", err)
	}
	t.Logf("account: %s", rep)
	if !rep.OK() {
		t.Errorf("not exactly once: %s", rep)
	}
	return rep
}
