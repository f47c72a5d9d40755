package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/sim"
	"github.com/deltaflow/deltaflow/ledger"
)

// TestCompressionBombIsDeadLettered: a record batch that decompresses past
// kafka.max_decompress_bytes (one 16 MiB zstd record, some KiB on the wire)
// is never decompressed: it becomes one dead letter naming its partition
// and offsets, with no body, and the partition's txn moves past it in the
// same commit, so the records after it are read and a restart neither
// reads it again nor dead-letters it twice.
func TestCompressionBombIsDeadLettered(t *testing.T) {
	h := newHarness(t, nil)
	h.produceBomb(3, 2, 2)
	r := h.start(Config{}, nil)
	h.waitCommitted(r, 30*time.Second)
	r.stop(t)
	h.checkExactlyOnce()

	// A restart resumes past the batch: nothing read again.
	r = h.start(Config{}, nil)
	if err := r.engine.CommitNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.stop(t)

	letters := h.dlq()
	if len(letters) != 1 {
		t.Fatalf("the DLQ holds %d letters, want the batch's one", len(letters))
	}
	msg := letters[0]
	reason := msg.Header.Get(bridge.HeaderError)
	if msg.Header.Get(bridge.HeaderPartition) != "0" || msg.Header.Get(bridge.HeaderOffset) != "2" || len(msg.Data) != 0 ||
		!strings.Contains(reason, "[0]") || !strings.Contains(reason, "offsets 2-2") || !strings.Contains(reason, "kafka.max_decompress_bytes") {
		t.Fatalf("letter: partition %s offset %s, %d bytes, reason %q; want partition 0, offset 2, no body, a reason naming them and the limit",
			msg.Header.Get(bridge.HeaderPartition), msg.Header.Get(bridge.HeaderOffset), len(msg.Data), reason)
	}
}

// TestCommittedRecordsAreFreed: once their epoch is committed, the
// pipeline keeps no record: each reader kept the last record it had mapped
// until its next Fetch, and with it the batch that record was decompressed
// in (up to kafka.max_decompress_bytes a partition, beyond the memory
// budget).
func TestCommittedRecordsAreFreed(t *testing.T) {
	h := newHarness(t, nil)
	cl := h.zstdProducer(2 << 20)
	for p := range int32(3) {
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Partition: p, Value: make([]byte, 1<<20)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	h.records = 3
	watch := &recordWatch{}
	h.wrap = func(c Consumer) Consumer { watch.Consumer = c; return watch }
	r := h.start(Config{}, nil)
	defer r.stop(t)
	h.waitCommitted(r, 30*time.Second)
	runtime.GC()
	runtime.GC()
	watch.mu.Lock()
	defer watch.mu.Unlock()
	if len(watch.values) != 3 {
		t.Fatalf("polled %d records, want 3", len(watch.values))
	}
	for i, v := range watch.values {
		if v.Value() != nil {
			t.Errorf("record %d is still reachable after its epoch was committed", i)
		}
	}
}

// TestSmallCompressedBatchesAreFetchedInParts: record batches each under
// kafka.max_decompress_bytes but together far over it (24 zstd batches of
// 1 MiB of zeros, some hundred bytes each on the wire, between 24 good
// records) were all decompressed by one fetch, beside the memory budget.
// Now a fetch stops decompressing at the bound and the rest is fetched
// later: no poll brings more than the bound, and every record is still in
// the table or the DLQ once.
func TestSmallCompressedBatchesAreFetchedInParts(t *testing.T) {
	h := newHarness(t, nil)
	cl := h.zstdProducer(2 << 20)
	s := sim.New(sim.Config{Seed: 5, Events: 24})
	const bad, size = 24, 1 << 20
	for i := range 2 * bad {
		// One at a time: a batch each.
		rec := &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: make([]byte, size)}
		if i%2 == 0 {
			key, value, ev := s.Next(nil)
			h.events = append(h.events, ev)
			rec.Key, rec.Value = key, value
		}
		if err := cl.ProduceSync(t.Context(), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	h.records = 2 * bad
	watch := &recordWatch{}
	h.wrap = func(c Consumer) Consumer { watch.Consumer = c; return watch }
	r := h.start(Config{}, nil)
	h.waitCommitted(r, 60*time.Second)
	r.stop(t)
	h.checkExactlyOnce()
	letters := map[string]bool{}
	for _, m := range h.dlq() {
		at := m.Header.Get(bridge.HeaderPartition) + "/" + m.Header.Get(bridge.HeaderOffset)
		if letters[at] {
			t.Fatalf("record %s is in the DLQ twice", at)
		}
		letters[at] = true
	}
	wantBad := bad
	for _, ev := range h.events {
		if ev.Bad {
			wantBad++
		}
	}
	if len(letters) != wantBad {
		t.Fatalf("the DLQ holds %d letters, %d bad records were produced", len(letters), wantBad)
	}
	limit := int(h.kcfg.MaxDecompressBytes)
	if watch.most > limit {
		t.Fatalf("one poll brought %d MiB of values; kafka.max_decompress_bytes is %d MiB", watch.most>>20, limit>>20)
	}
	t.Logf("at most %d MiB of values a poll", watch.most>>20)
}

// recordWatch is what the engine polls: it keeps a weak pointer to the
// value of every record Poll returns, and the most value bytes one Poll
// returned.
type recordWatch struct {
	Consumer
	mu     sync.Mutex
	values []weak.Pointer[byte]
	most   int
}

func (w *recordWatch) Poll(ctx context.Context) ([]kafka.Batch, error) {
	bs, err := w.Consumer.Poll(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	polled := 0
	for _, b := range bs {
		for _, r := range b.Records {
			if len(r.Value) > 0 {
				w.values = append(w.values, weak.Make(&r.Value[0]))
			}
			polled += len(r.Value)
		}
	}
	w.most = max(w.most, polled)
	return bs, err
}

// produceRaw writes values to partition 0, one record each, zstd-compressed
// in as few batches as fit 16 MiB so that one poll brings them all, and
// counts them produced (produceValues sends them uncompressed, uncounted).
func (h *harness) produceRaw(values ...[]byte) {
	h.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.kcfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(16<<20), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Partition: 0, Value: v}
	}
	if err := cl.ProduceSync(h.t.Context(), recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
	h.records += len(values)
}

// commitFiles is, per commit after the table's creation, the data files it
// adds.
func (h *harness) commitFiles() []int {
	h.t.Helper()
	s, err := h.table.Snapshot(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	var out []int
	for v := int64(1); v <= s.Version(); v++ {
		data, err := h.store.Get(h.t.Context(), fmt.Sprintf("_delta_log/%020d.json", v))
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, strings.Count(string(data), `{"add":`))
	}
	return out
}

// TestPartitionValuesStayInTheBudget: every open file costs its writer's
// fixed memory (~150 KiB), which the budget once did not count: 300
// records of 300 partition values in one poll opened 300 writers (~45 MiB)
// under a 1 MiB budget. Now a reader reserves a file's memory before it
// routes the epoch's first row of a partition value there, and when it
// does not fit it seals the epoch early and waits: every commit holds at
// most the files the budget holds writers for, and every record still
// lands once.
func TestPartitionValuesStayInTheBudget(t *testing.T) {
	h := newHarness(t, nil)
	const values = 300
	recs := make([][]byte, values)
	for i := range recs {
		recs[i] = fmt.Appendf(nil, `{"device_id":"dev-%d","device_type":"type-%04d","ingested_at":"2026-06-22T10:00:00Z","payload":"{}"}`, i, i)
	}
	h.produceRaw(recs...)
	const budget = 1 << 20
	r := h.start(Config{MemoryBudget: budget}, nil)
	h.waitCommitted(r, 60*time.Second)
	r.stop(t)
	if rows := len(h.tableRows()); rows != values {
		t.Fatalf("%d rows in the table, %d records produced", rows, values)
	}
	files := h.commitFiles()
	perEpoch := budget / int(h.fileMemory())
	t.Logf("%d commits, files per commit %v (the budget holds %d writers)", len(files), files, perEpoch)
	for v, n := range files {
		if n > perEpoch+1 {
			t.Fatalf("commit %d adds %d files: %d writers were open in one epoch, the %d-byte budget holds %d", v+1, n, n, budget, perEpoch)
		}
	}
}

// fileMemory is the fixed memory of a buffer's open file.
func (h *harness) fileMemory() int64 {
	w, err := delta.NewFileWriter(io.Discard, h.mapper.DataSchema(), delta.WriterOptions{PageBufferSize: streamPageSize})
	if err != nil {
		h.t.Fatal(err)
	}
	return w.FixedMemory()
}

// TestDeadLettersStayInTheBudget: a dead letter holds its record's key and
// value until its epoch commits, which the budget once did not count: a
// poll of bad records of 300 KiB each held them all under a 1 MiB budget.
// Now a reader counts each letter before it takes it, and when it does not
// fit seals the epoch early and waits: every epoch holds at most the
// letters the budget holds, and every record still ends in the DLQ once.
func TestDeadLettersStayInTheBudget(t *testing.T) {
	h := newHarness(t, nil)
	const n = 24
	bad := bytes.Repeat([]byte("not json "), 300<<10/9)
	values := make([][]byte, n)
	for i := range values {
		values[i] = bad
	}
	h.produceRaw(values...)
	h.kcfg.MaxDecompressBytes = 64 << 20 // one batch of 7 MiB
	const budget = 1 << 20
	r := h.start(Config{MemoryBudget: budget}, nil)
	h.waitCommitted(r, 60*time.Second)
	r.stop(t)
	perEpoch := budget / int(letterMemory(nil, bad, "mapping: payload: cannot parse JSON"))
	// All records are letters: what each commit moves partition 0's txn by
	// is the letters its epoch held.
	var held []int64
	prev := int64(-1)
	for _, v := range h.commitTxns(0) {
		held = append(held, v-prev)
		prev = v
	}
	t.Logf("letters per epoch %v (the budget holds %d)", held, perEpoch)
	for _, k := range held {
		if k > int64(perEpoch)+1 {
			t.Fatalf("an epoch held %d dead letters of %d bytes, the %d-byte budget holds %d", k, len(bad), budget, perEpoch)
		}
	}
	if msgs := len(h.dlq()); msgs != n {
		t.Fatalf("the DLQ holds %d letters, %d bad records were produced", msgs, n)
	}
}

// commitTxns is the txn version of partition p in each commit that has one.
func (h *harness) commitTxns(p int32) []int64 {
	h.t.Helper()
	s, err := h.table.Snapshot(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	app := ledger.AppID("deltaflow", topic, p)
	var out []int64
	for v := int64(1); v <= s.Version(); v++ {
		data, err := h.store.Get(h.t.Context(), fmt.Sprintf("_delta_log/%020d.json", v))
		if err != nil {
			h.t.Fatal(err)
		}
		for line := range strings.Lines(string(data)) {
			var a struct {
				Txn *struct {
					AppID   string `json:"appId"`
					Version int64  `json:"version"`
				} `json:"txn"`
			}
			if json.Unmarshal([]byte(line), &a) == nil && a.Txn != nil && a.Txn.AppID == app {
				out = append(out, a.Txn.Version)
			}
		}
	}
	return out
}

// TestCatchUpAfterEarlySeals: a reader stopped for room still holds records
// when CatchUp sees every record polled (positions move at dispatch); the
// rest are committed as they are mapped, not left to the flush timer, so
// `run --until-latest` ends promptly on input that seals epochs early.
func TestCatchUpAfterEarlySeals(t *testing.T) {
	h := newHarness(t, nil)
	recs := make([][]byte, 100)
	for i := range recs {
		recs[i] = fmt.Appendf(nil, `{"device_id":"dev-%d","device_type":"type-%04d","ingested_at":"2026-06-22T10:00:00Z","payload":"{}"}`, i, i)
	}
	h.produceRaw(recs...)
	r := h.start(Config{MemoryBudget: 1 << 20, FlushInterval: time.Hour}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := r.engine.CatchUp(ctx); err != nil {
		t.Fatalf("catch-up with a one-hour flush interval: %v", err)
	}
	r.stop(t)
	if rows := len(h.tableRows()); rows != len(recs) {
		t.Fatalf("%d rows in the table, %d records produced", rows, len(recs))
	}
}

// zstdProducer is a client producing zstd batches of up to maxBatch bytes,
// each record to its own partition; closed with the test.
func (h *harness) zstdProducer(maxBatch int32) *kgo.Client {
	h.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.kcfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerBatchMaxBytes(maxBatch))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(cl.Close)
	return cl
}

// produceBomb writes to partition 0 before sensor records of the seed, one
// zstd record batch that decompresses to 16 MiB (some KiB on the wire), and
// after more; h expects them all, the batch as one dead letter.
func (h *harness) produceBomb(seed int64, before, after int) {
	h.t.Helper()
	cl := h.zstdProducer(32 << 20)
	s := sim.New(sim.Config{Seed: seed, Events: before + after})
	var recs []*kgo.Record
	for i := range before + after {
		if i == before {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: make([]byte, 16<<20)})
		}
		key, value, ev := s.Next(nil)
		h.events = append(h.events, ev)
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: key, Value: value})
	}
	for _, rec := range recs { // one batch each
		if err := cl.ProduceSync(h.t.Context(), rec).FirstErr(); err != nil {
			h.t.Fatal(err)
		}
	}
	h.records = len(recs)
}

// losesTooLarge is a consumer whose polls lose the first report of a batch
// too large, as an interrupted poll, a pause or an ignored seek lost them.
type losesTooLarge struct {
	Consumer
	lost atomic.Bool
}

func (c *losesTooLarge) Poll(ctx context.Context) ([]kafka.Batch, error) {
	batches, err := c.Consumer.Poll(ctx)
	if _, tooLarge := errors.AsType[*kafka.BatchTooLargeError](err); tooLarge && c.lost.CompareAndSwap(false, true) {
		err = nil
	}
	return batches, err
}

// TestLostBatchTooLargeIsFetchedAgain: franz-go reports a batch too large
// once and stops its partition; when the report is lost on the way (CI saw
// three ways), the fetch loop notices the partition returns nothing while
// records wait past it, seeks it again, and the report comes again: the
// batch is dead-lettered and the records after it committed, instead of
// the partition staying stopped for good.
func TestLostBatchTooLargeIsFetchedAgain(t *testing.T) {
	old := stuckAfter
	stuckAfter = 500 * time.Millisecond
	t.Cleanup(func() { stuckAfter = old })
	h := newHarness(t, nil)
	lose := &losesTooLarge{}
	h.wrap = func(c Consumer) Consumer { lose.Consumer = c; return lose }
	h.produceBomb(4, 1, 1)
	r := h.start(Config{}, nil)
	h.waitCommitted(r, 30*time.Second)
	r.stop(t)
	h.checkExactlyOnce()
	if !lose.lost.Load() {
		t.Fatal("no report of the batch too large was lost: the test tested nothing")
	}
	if n := len(h.dlq()); n != 1 {
		t.Fatalf("the DLQ holds %d letters, want the batch's one", n)
	}
}
