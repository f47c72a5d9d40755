package dlqreplay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/messages"
	"github.com/deltaflow/deltaflow/schemareg"
	"github.com/deltaflow/deltaflow/storage"
)

const testTable = "sensor_events"

// rig is a real JetStream server holding the DLQ stream of a bridge, and a
// local table with the default mapping.
type rig struct {
	t      *testing.T
	bridge *bridge.Bridge
	src    *bridge.DLQReader
	target Target
}

// newRig starts it; maxPayload 0 keeps the server's default.
func newRig(t *testing.T, maxPayload int32) *rig {
	t.Helper()
	m, err := mapping.New(mapping.DefaultConfig(), mapping.DefaultPartitionColumns)
	if err != nil {
		t.Fatal(err)
	}
	return newRigOf(t, maxPayload, m)
}

// newRigOf is newRig with a table of m's mapping.
func newRigOf(t *testing.T, maxPayload int32, m *mapping.Mapper) *rig {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		MaxPayload: maxPayload, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	ctx := context.Background()
	cfg := bridge.Config{URL: ns.ClientURL()}
	b, err := bridge.New(ctx, cfg, nil, bridge.WithTable(testTable))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	nc, err := bridge.Dial(ns.ClientURL(), cfg, "test", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	src, err := bridge.OpenDLQ(ctx, nc, bridge.DefaultDLQStream(testTable))
	if err != nil {
		t.Fatal(err)
	}
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tbl := delta.NewTable(store)
	snap, _, err := tbl.EnsureSchema(ctx, m.Schema(), m.PartitionColumns(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, bridge: b, src: src, target: Target{Table: tbl, Snapshot: snap, Mapper: m, Writer: delta.WriterOptions{}}}
}

// good is a record the default mapping takes; bad one it refuses.
func good(offset int64) []byte {
	return fmt.Appendf(nil, `{"device_id":"dev-%d","device_type":"plug","ingested_at":"2026-12-01T10:00:00Z","payload":"{\"power\":%d.5}"}`, offset, offset)
}

func bad(offset int64) []byte { return fmt.Appendf(nil, `{"device_id":"dev-%d"`, offset) }

// publish stores letters for offsets, as the engine would have rejected
// them under an older mapping; isGood picks which map now.
func (r *rig) publish(offsets []int64, isGood func(int64) bool) {
	r.t.Helper()
	var letters []messages.DeadLetter
	for _, o := range offsets {
		v := bad(o)
		if isGood(o) {
			v = good(o)
		}
		letters = append(letters, messages.DeadLetter{Topic: "sensor-events", TopicID: "AAAAAAAAAAAAAAAAAAAAAA", Partition: int32(o % 3), Offset: o,
			Key: fmt.Appendf(nil, "k%d", o), Value: v, Timestamp: 1_764_583_200_000 + o, Reason: "old mapping refused it"})
	}
	if err := r.bridge.PublishDLQ(context.Background(), letters); err != nil {
		r.t.Fatal(err)
	}
}

// devices returns the device_id of every row in the table, sorted.
func (r *rig) devices() []string {
	r.t.Helper()
	ctx := context.Background()
	if err := r.target.Table.Update(ctx, r.target.Snapshot); err != nil {
		r.t.Fatal(err)
	}
	schema, err := r.target.Snapshot.Schema()
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, add := range r.target.Snapshot.Files() {
		rows, err := delta.ReadDataFile(ctx, r.target.Table.Store(), schema, r.target.Snapshot.PartitionColumns(), add)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, row := range rows {
			out = append(out, row[0].(string))
		}
	}
	slices.Sort(out)
	return out
}

// stream returns the sequences and offsets left in the DLQ stream.
func (r *rig) stream() (offsets []int64) {
	r.t.Helper()
	err := r.src.Letters(context.Background(), 0, func(l bridge.StoredLetter) error {
		offsets = append(offsets, l.Offset)
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return offsets
}

func span(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

func deviceNames(offsets []int64) []string {
	var out []string
	for _, o := range offsets {
		out = append(out, fmt.Sprintf("dev-%d", o))
	}
	slices.Sort(out)
	return out
}

func even(o int64) bool { return o%2 == 0 }

// TestReplayWritesEachLetterOnce: letters that map now go into the table
// once, over several commits, and leave the stream; those that still fail
// stay; a second replay writes nothing; a dry run changes nothing.
func TestReplayWritesEachLetterOnce(t *testing.T) {
	r := newRig(t, 0)
	ctx := context.Background()
	r.publish(span(0, 40), even)

	dry, err := Run(ctx, r.target, r.src, Options{App: "deltaflow", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Replayed != 20 || dry.FailedCount != 20 || len(dry.Versions) != 0 || len(r.devices()) != 0 || len(r.stream()) != 40 {
		t.Fatalf("dry run: %+v; table %d rows, stream %d letters", dry, len(r.devices()), len(r.stream()))
	}

	res, err := Run(ctx, r.target, r.src, Options{App: "deltaflow", BatchLetters: 8})
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed != 20 || res.FailedCount != 20 || len(res.Versions) != 3 || res.Failures[0].Reason == "" {
		t.Errorf("replay: %+v", res)
	}
	var goodOffsets []int64
	for _, o := range span(0, 40) {
		if even(o) {
			goodOffsets = append(goodOffsets, o)
		}
	}
	if got, want := r.devices(), deviceNames(goodOffsets); !slices.Equal(got, want) {
		t.Errorf("table rows %v, want %v", got, want)
	}
	for _, o := range r.stream() {
		if even(o) {
			t.Errorf("offset %d replayed but still in the stream", o)
		}
	}
	h, err := r.target.Table.History(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if h[0].Operation != Operation || h[0].OperationParameters["txnAppId"] != "deltaflow-dlq-DELTAFLOW_DLQ_SENSOR_EVENTS" {
		t.Errorf("last commit %+v", h[0])
	}

	again, err := Run(ctx, r.target, r.src, Options{App: "deltaflow"})
	if err != nil {
		t.Fatal(err)
	}
	if again.Replayed != 0 || len(again.Versions) != 0 || again.FailedCount != 20 {
		t.Errorf("second replay: %+v", again)
	}
	if n := len(r.devices()); n != 20 {
		t.Errorf("table holds %d rows after a second replay, want 20", n)
	}
}

// failingDeletes is a stream whose deletions fail: a replay that stops
// between its commit and its deletions.
type failingDeletes struct{ *bridge.DLQReader }

func (failingDeletes) Delete(context.Context, uint64) error { return errors.New("connection lost") }

// TestReplayInterruptedAfterCommit: a replay that committed but could not
// delete its letters; the next one deletes them without writing them again.
func TestReplayInterruptedAfterCommit(t *testing.T) {
	r := newRig(t, 0)
	ctx := context.Background()
	r.publish(span(0, 10), func(int64) bool { return true })
	if _, err := Run(ctx, r.target, failingDeletes{r.src}, Options{App: "deltaflow"}); err == nil {
		t.Fatal("replay with failing deletions succeeded")
	}
	if got := len(r.stream()); got != 10 {
		t.Fatalf("stream holds %d letters, want all 10 still", got)
	}
	r.publish(span(10, 12), func(int64) bool { return true })

	res, err := Run(ctx, r.target, r.src, Options{App: "deltaflow"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Cleaned != 10 || res.Replayed != 2 {
		t.Errorf("after the interruption: %+v, want 10 cleaned, 2 replayed", res)
	}
	if got, want := r.devices(), deviceNames(span(0, 12)); !slices.Equal(got, want) {
		t.Errorf("table rows %v, want each of %v once", got, want)
	}
	if got := r.stream(); len(got) != 0 {
		t.Errorf("stream still holds offsets %v", got)
	}
}

// TestReplayTruncatedLetterStays: a letter whose value or key was cut to
// fit max_payload is not the record; it is never written, and says how to
// get the record back.
func TestReplayTruncatedLetterStays(t *testing.T) {
	r := newRig(t, 4096)
	ctx := context.Background()
	big := fmt.Appendf(nil, `{"device_id":"dev-1","device_type":"plug","ingested_at":"2026-12-01T10:00:00Z","payload":"{\"note\":\"%s\"}"}`,
		strings.Repeat("x", 8192))
	err := r.bridge.PublishDLQ(ctx, []messages.DeadLetter{{Topic: "sensor-events", Partition: 0, Offset: 1, Value: big, Reason: "old mapping"}})
	if err != nil {
		t.Fatal(err)
	}
	// A key too long for a header is cut too, whatever the max payload.
	k := newRig(t, 0)
	err = k.bridge.PublishDLQ(ctx, []messages.DeadLetter{{Topic: "sensor-events", Partition: 0, Offset: 2,
		Key: []byte(strings.Repeat("k", 64<<10)), Value: good(2), Reason: "old mapping"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*rig{r, k} {
		res, err := Run(ctx, r.target, r.src, Options{App: "deltaflow"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Replayed != 0 || res.FailedCount != 1 || !strings.Contains(res.Failures[0].Reason, "deltaflow seek") {
			t.Errorf("truncated letter: %+v", res)
		}
		if n := len(r.devices()); n != 0 {
			t.Errorf("table holds %d rows", n)
		}
	}
}

// Letters of a registry topic are mapped with the writer schema each
// names, fetched from the registry when the mapper lacks it; one whose id
// the registry does not have stays, saying so.
func TestReplayFetchesWriterSchemas(t *testing.T) {
	const (
		v1 = `{"type":"record","name":"Plug","fields":[{"name":"id","type":"string"}]}`
		v2 = `{"type":"record","name":"Plug","fields":[{"name":"id","type":"string"},{"name":"volts","type":["null","double"],"default":null}]}`
	)
	fake := srfake.New()
	defer fake.Close()
	id1, _, err := fake.RegisterSchema("plugs-value", sr.Schema{Schema: v1})
	if err != nil {
		t.Fatal(err)
	}
	id2, _, err := fake.RegisterSchema("plugs-value", sr.Schema{Schema: v2})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := schemareg.New(t.Context(), schemareg.Config{URL: []string{fake.URL()}}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	_, latest, _, err := reg.Latest(t.Context(), "plugs-value")
	if err != nil {
		t.Fatal(err)
	}
	m, err := mapping.New(mapping.Config{Format: mapping.Avro, Registry: reg, Schema: latest.Text}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newRigOf(t, 0, m)
	r.target.Schemas = reg
	encode := func(id int, schema string, v map[string]any) []byte {
		b, err := sr.AppendEncode(nil, v, new(sr.ConfluentHeader), id, nil, func(b []byte, v any) ([]byte, error) {
			return avro.MustParse(schema).AppendEncode(b, v)
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	letters := []messages.DeadLetter{
		{Offset: 1, Value: encode(id1, v1, map[string]any{"id": "dev-1"})},
		{Offset: 2, Value: encode(id2, v2, map[string]any{"id": "dev-2", "volts": 230.0})},
		{Offset: 3, Value: encode(99, v1, map[string]any{"id": "dev-3"})},
	}
	for i := range letters {
		letters[i].Topic, letters[i].Reason = "plugs", "the registry was gone"
	}
	if err := r.bridge.PublishDLQ(t.Context(), letters); err != nil {
		t.Fatal(err)
	}
	res, err := Run(t.Context(), r.target, r.src, Options{App: "deltaflow"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed != 2 || res.FailedCount != 1 || !strings.Contains(res.Failures[0].Reason, "schema id 99: not found in the schema registry") {
		t.Errorf("replay: %+v", res)
	}
	if got := r.devices(); !slices.Equal(got, []string{"dev-1", "dev-2"}) {
		t.Errorf("rows %v, want dev-1 and dev-2", got)
	}
}
