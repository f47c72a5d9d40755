package actors

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/schemareg"
	"github.com/deltaflow/deltaflow/storage"
)

const (
	plugV1 = `{"type":"record","name":"Plug","fields":[{"name":"id","type":"string"},{"name":"seq","type":"long"}]}`
	plugV2 = `{"type":"record","name":"Plug","fields":[{"name":"id","type":"string"},{"name":"seq","type":"long"},
		{"name":"volts","type":["null","double"],"default":null}]}`
)

// A record whose writer schema the process has not fetched waits for it,
// off the actors, while the registry is down: its partition stops there
// (nothing dead-lettered, nothing skipped), the engine reports the
// registry degraded, and once the registry answers every record is
// committed once.
func TestRecordsWaitForTheirSchema(t *testing.T) {
	fake, reg, v1, latest := plugRegistry(t)

	h := registryHarness(t, reg, mapping.Config{Format: mapping.Avro, Registry: reg, Schema: latest})
	v2, _, err := fake.RegisterSchema(topic+"-value", sr.Schema{Schema: plugV2})
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	down.Store(true)
	fake.Intercept(func(w http.ResponseWriter, _ *http.Request) bool {
		if down.Load() {
			http.Error(w, "registry restarting", http.StatusServiceUnavailable)
		}
		return down.Load()
	})

	// Every partition: v1 records, then v2 records, then v1 again.
	produceWire(h, v1, plugV1, 0, 20)
	produceWire(h, v2, plugV2, 20, 40)
	produceWire(h, v1, plugV1, 40, 60)

	r := h.start(Config{}, nil)
	defer r.stop(t)
	// The v1 records before the first v2 one of each partition commit;
	// the rest waits for schema v2.
	waitFor(t, func() bool { return h.health.Degraded()[componentSchemaRegistry] != "" })
	time.Sleep(time.Second) // a flush interval and more
	if got := committedRecords(h); got >= int64(h.records) {
		t.Fatalf("%d records committed while schema %d was unreachable", got, v2)
	}
	down.Store(false)
	h.waitCommitted(r, 30*time.Second)
	if why := h.health.Degraded()[componentSchemaRegistry]; why != "" {
		t.Errorf("still degraded once fetched: %s", why)
	}
	checkSeqs(h, 60)
}

// checkSeqs asserts the table holds rows seq 0..n-1 once each (so no
// record was dead-lettered or doubled).
func checkSeqs(h *harness, n int) {
	h.t.Helper()
	s, err := h.table.Snapshot(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	schema, _ := s.Schema()
	seen := map[int64]int{}
	for _, a := range s.Files() {
		rows, err := delta.ReadDataFile(h.t.Context(), h.store, schema, nil, a)
		if err != nil {
			h.t.Fatal(err)
		}
		for _, r := range rows {
			seen[r[1].(int64)]++
		}
	}
	for seq := range int64(n) {
		if seen[seq] != 1 {
			h.t.Errorf("seq %d is in the table %d times", seq, seen[seq])
		}
	}
	if len(seen) != n {
		h.t.Errorf("%d distinct rows, want %d", len(seen), n)
	}
}

// produceWire sends records seq [from, to) in the Confluent wire format,
// written with schema id, keyed by seq (spread over the partitions).
func produceWire(h *harness, id int, schema string, from, to int) {
	h.t.Helper()
	p, err := kafka.NewProducer(h.kcfg, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	defer p.Close()
	enc := avro.MustParse(schema)
	for seq := from; seq < to; seq++ {
		v := map[string]any{"id": "plug", "seq": int64(seq)}
		if strings.Contains(schema, "volts") {
			v["volts"] = 230.0
		}
		value, err := sr.AppendEncode(nil, v, new(sr.ConfluentHeader), id, nil, func(b []byte, v any) ([]byte, error) { return enc.AppendEncode(b, v) })
		if err != nil {
			h.t.Fatal(err)
		}
		p.ProduceAsync(h.t.Context(), &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(seq)), Value: value})
	}
	if err := p.Flush(h.t.Context()); err != nil {
		h.t.Fatal(err)
	}
	h.records += to - from
}

// committedRecords is how many records the table's txns hold.
func committedRecords(h *harness) int64 {
	s, err := h.table.Snapshot(h.t.Context())
	if err != nil {
		return 0
	}
	var n int64
	for p := int32(0); p < 3; p++ {
		if v, ok := s.TxnVersion(ledger.AppID("deltaflow", topic, p)); ok {
			n += v + 1
		}
	}
	return n
}

// Records of a newer writer schema whose new field makes a new column
// evolve the table while running: the column is added (nullable), the
// records of both versions are committed once each, the newer ones with
// the field's values and the older ones null in it.
func TestSchemaEvolutionAddsColumns(t *testing.T) {
	h, s, _ := evolvingRun(t, plugV2, 20)
	schema, _ := s.Schema()
	if f := schema.Field("volts"); f == nil || f.Type != delta.Double || !f.Nullable {
		t.Fatalf("table schema %v: want a nullable double column volts", schema.Fields)
	}
	checkSeqs(h, 60)
	for _, a := range s.Files() {
		rows, err := delta.ReadDataFile(t.Context(), h.store, schema, nil, a)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			seq, volts := row[1].(int64), row[2]
			if want := seq >= 20 && seq < 40; (volts == 230.0) != want || (volts == nil) == want {
				t.Errorf("seq %d: volts %v", seq, volts)
			}
		}
	}
}

// A writer schema whose new column the table refuses (a local date-time,
// timestamp_ntz, in a table without the timestampNtz feature) makes its
// records dead letters naming the refusal, and the records of the other
// schemas are committed: before, the committer retried the schema change
// forever and the table committed nothing more.
func TestSchemaEvolutionRefusedByTheTable(t *testing.T) {
	const plugNTZ = `{"type":"record","name":"Plug","fields":[{"name":"id","type":"string"},{"name":"seq","type":"long"},
		{"name":"at","type":["null",{"type":"long","logicalType":"local-timestamp-micros"}],"default":null}]}`
	h, s, ntz := evolvingRun(t, plugNTZ, 10)
	if schema, _ := s.Schema(); schema.Field("at") != nil {
		t.Fatalf("table schema %v: the refused column was added", schema.Fields)
	}
	letters := h.dlq()
	if len(letters) != 10 {
		t.Fatalf("the DLQ holds %d letters, want the 10 records of schema id %d", len(letters), ntz)
	}
	for _, l := range letters {
		if reason := l.Header.Get(bridge.HeaderError); !strings.Contains(reason, fmt.Sprintf("schema id %d", ntz)) ||
			!strings.Contains(reason, "timestampNtz") {
			t.Fatalf("letter reason %q: want the schema id and the feature the table lacks", reason)
		}
	}
	if n := committedRecords(h); n != 50 {
		t.Fatalf("the txns hold %d records, want all 50", n)
	}
}

// evolvingRun runs an evolving Avro table over 20 records of plugV1, n of
// schema next (registered after it) and 20 of plugV1 again, until every
// one is committed, and returns the harness, the table's snapshot and
// next's schema id.
func evolvingRun(t *testing.T, next string, n int) (*harness, *delta.Snapshot, int) {
	t.Helper()
	fake, reg, v1, latest := plugRegistry(t)
	id, _, err := fake.RegisterSchema(topic+"-value", sr.Schema{Schema: next})
	if err != nil {
		t.Fatal(err)
	}
	h := registryHarness(t, reg, mapping.Config{Format: mapping.Avro, Registry: reg, Schema: latest, Evolve: true})
	produceWire(h, v1, plugV1, 0, 20)
	produceWire(h, id, next, 20, 20+n)
	produceWire(h, v1, plugV1, 20+n, 40+n)
	r := h.start(Config{}, nil)
	t.Cleanup(func() { r.stop(t) })
	h.waitCommitted(r, 30*time.Second)
	s, err := h.table.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return h, s, id
}

// registryHarness is newHarness with a table of mc's mapping, reading
// through reg.
func registryHarness(t *testing.T, reg *schemareg.Registry, mc mapping.Config) *harness {
	t.Helper()
	h := newHarness(t, nil)
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if h.mapper, err = mapping.New(mc, nil); err != nil {
		t.Fatal(err)
	}
	h.store, h.table = store, delta.NewTable(store)
	if _, err := h.table.Create(t.Context(), h.mapper.Schema(), nil, nil); err != nil {
		t.Fatal(err)
	}
	h.schemas, h.health = reg, NewHealth()
	return h
}

// plugRegistry is a registry (srfake, over HTTP) holding plugV1 under the
// topic's subject, with the Registry that asked it for its latest schema:
// v1's id and text.
func plugRegistry(t *testing.T) (*srfake.Registry, *schemareg.Registry, int, string) {
	t.Helper()
	fake := srfake.New()
	t.Cleanup(fake.Close)
	v1, _, err := fake.RegisterSchema(topic+"-value", sr.Schema{Schema: plugV1})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := schemareg.New(t.Context(), schemareg.Config{URL: []string{fake.URL()}}, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	_, latest, _, err := reg.Latest(t.Context(), topic+"-value")
	if err != nil {
		t.Fatal(err)
	}
	return fake, reg, v1, latest.Text
}

// A kill loop over a topic whose schema changes inside it (v1, then v2
// adding a column, then both mixed): every record is committed exactly
// once, the table gains the column once, and the v2 records hold it.
func TestSchemaEvolutionKillLoop(t *testing.T) {
	fake, reg, v1, latest := plugRegistry(t)
	v2, _, err := fake.RegisterSchema(topic+"-value", sr.Schema{Schema: plugV2})
	if err != nil {
		t.Fatal(err)
	}
	h := registryHarness(t, reg, mapping.Config{Format: mapping.Avro, Registry: reg, Schema: latest, Evolve: true})
	ctx, cancel := context.WithCancel(t.Context())
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; ctx.Err() == nil && i < 20; i++ {
			id, schema := v1, plugV1
			if i >= 5 && i%2 == 1 {
				id, schema = v2, plugV2
			}
			produceWire(h, id, schema, i*50, (i+1)*50)
			time.Sleep(40 * time.Millisecond)
		}
	}()
	for i := range 6 {
		r := h.start(Config{FlushInterval: 100 * time.Millisecond}, nil)
		time.Sleep(time.Duration(150+i*70) * time.Millisecond)
		r.kill()
	}
	<-produced
	cancel()
	r := h.start(Config{}, nil)
	defer r.stop(t)
	h.waitCommitted(r, 30*time.Second)
	checkSeqs(h, h.records)
	s, err := h.table.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := s.Schema()
	if f := schema.Field("volts"); f == nil {
		t.Fatalf("table schema %v: no column volts", schema.Fields)
	}
	for _, a := range s.Files() {
		rows, err := delta.ReadDataFile(t.Context(), h.store, schema, nil, a)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			seq := row[1].(int64)
			if batch := seq / 50; (batch >= 5 && batch%2 == 1) != (row[2] == 230.0) {
				t.Errorf("seq %d: volts %v", seq, row[2])
			}
		}
	}
}
