package actors

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/messages"
	"github.com/deltaflow/deltaflow/storage"
)

// sensorRecord is a well-formed sensor record of the given device type.
func sensorRecord(deviceType string, i int) []byte {
	return []byte(`{"device_id":"plug-` + strings.Repeat("0", i%3) + `","device_type":"` + deviceType +
		`","ingested_at":"2026-06-22T09:15:` + twoDigits(i%60) + `.123456+00:00","payload":"{\"power\": 84.3, \"linkquality\": 248}"}`)
}

func twoDigits(n int) string { return string([]byte{byte('0' + n/10), byte('0' + n%10)}) }

// withPoison returns n sensor records of deviceType, but for the one at
// index bad, of device type "poison".
func withPoison(n, bad int, deviceType string) [][]byte {
	values := make([][]byte, n)
	for i := range values {
		dt := deviceType
		if i == bad {
			dt = "poison"
		}
		values[i] = sensorRecord(dt, i)
	}
	return values
}

// waitNext waits up to 30 s until the table's next offsets include want:
// long enough for two aborts and a bisection with the harness's backoff.
func (h *harness) waitNext(want map[int32]int64) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		next, _, _ := h.tableState()
		done := true
		for p, n := range want {
			done = done && next[p] == n
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("table at %v after 30s; want %v: a record wedges the engine", next, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// produceValues sends one record per value to partition p, in order.
func (h *harness) produceValues(p int32, values ...[]byte) {
	h.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.kcfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(4<<20))
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Partition: p, Value: v}
	}
	if err := cl.ProduceSync(h.t.Context(), recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

// dlq returns the letters in the DLQ stream, oldest first.
func (h *harness) dlq() []*jetstream.RawStreamMsg {
	h.t.Helper()
	nc, err := nats.Connect(h.bridge.ClientURL())
	if err != nil {
		h.t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := js.Stream(h.t.Context(), bridge.DefaultDLQStream("sensor_events"))
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := stream.Info(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := stream.GetMsg(h.t.Context(), seq)
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// TestLongPartitionValueDeadLettered: a device_type whose partition
// directory is longer than a path segment may be (255 bytes on local disk,
// MinIO and most filesystems) is a dead letter naming the column and the
// length, caught while mapping; the good records of its partition are
// committed. Before, the upload failed with ENAMETOOLONG, the epoch was
// aborted and re-read forever and the partition's good records with it.
func TestLongPartitionValueDeadLettered(t *testing.T) {
	h := newHarness(t, nil)
	h.produceValues(0,
		sensorRecord("smart_plug", 1),
		sensorRecord(strings.Repeat("x", 300), 2),
		sensorRecord("smart_plug", 3),
		sensorRecord(strings.Repeat(":", 90), 4),  // 90 bytes, escaped to 270
		sensorRecord(strings.Repeat("y", 200), 5), // fits
	)
	r := h.start(Config{}, nil)
	defer r.stop(t)
	waitFor(t, func() bool { next, _, _ := h.tableState(); return next[0] == 5 })
	if _, rows, _ := h.tableState(); rows != 3 {
		t.Errorf("table holds %d rows, want the 3 that fit", rows)
	}
	letters := h.dlq()
	if len(letters) != 2 {
		t.Fatalf("%d dead letters, want the 2 records with too long a device_type", len(letters))
	}
	for i, want := range []string{"312 bytes", "282 bytes"} {
		why := letters[i].Header.Get(bridge.HeaderError)
		if !strings.Contains(why, "device_type") || !strings.Contains(why, want) || !strings.Contains(why, "255") {
			t.Errorf("letter %d: reason %q; want the column, the segment's %s and the 255-byte limit", i, why, want)
		}
	}
}

// TestRecordFaultIsolated: a record the mapper accepts but the store
// rejects every time (here: a name the store refuses, ENAMETOOLONG, as a
// stricter store than the limits known would) makes every epoch that holds
// it fail. After two such aborts the engine bisects the failing range
// until the one record is found, dead-letters it with the store's reason
// and commits everything else: no good record lost, none wedged. Before, the
// epoch was aborted and re-read forever.
func TestRecordFaultIsolated(t *testing.T) {
	h := newHarness(t, nil)
	faulty := storage.NewFaulty(h.store)
	faulty.Fail(storage.Rule{Op: storage.OpPutStream, Prefix: "device_type=poison/",
		Err: &fs.PathError{Op: "link", Path: "device_type=poison/...", Err: syscall.ENAMETOOLONG}})
	values := withPoison(40, 27, "smart_plug")
	h.produceValues(0, values...)
	h.produceTo(1, 20, 5)
	r := h.start(Config{}, faulty)
	defer r.stop(t)
	h.waitNext(map[int32]int64{0: 40, 1: 20})
	if _, rows, _ := h.tableState(); rows != 59 {
		t.Errorf("table holds %d rows, want the 59 good records once", rows)
	}
	letters := h.dlq()
	if len(letters) != 1 || letters[0].Header.Get(bridge.HeaderOffset) != "27" || letters[0].Header.Get(bridge.HeaderPartition) != "0" {
		t.Fatalf("dead letters %v; want only partition 0's offset 27", letters)
	}
	if why := letters[0].Header.Get(bridge.HeaderError); !strings.Contains(why, "file name too long") {
		t.Errorf("reason %q; want the store's error", why)
	}
	if string(letters[0].Data) != string(values[27]) {
		t.Errorf("letter body %q; want the record", letters[0].Data)
	}
}

// TestRecordPanicIsolated: a record whose rows make a buffer panic every
// time (a bug met by one record's values) is isolated the same way: the
// record is dead-lettered with the panic, everything else committed.
func TestRecordPanicIsolated(t *testing.T) {
	h := newHarness(t, nil)
	h.produceValues(2, withPoison(30, 4, "door_window")...)
	cfg := Config{beforeRows: func(key string) {
		if strings.HasPrefix(key, "device_type=poison/") {
			panic("cannot encode " + key)
		}
	}}
	r := h.start(cfg, nil)
	defer r.stop(t)
	h.waitNext(map[int32]int64{2: 30})
	if _, rows, _ := h.tableState(); rows != 29 {
		t.Errorf("table holds %d rows, want 29", rows)
	}
	letters := h.dlq()
	if len(letters) != 1 || letters[0].Header.Get(bridge.HeaderOffset) != "4" ||
		!strings.Contains(letters[0].Header.Get(bridge.HeaderError), "cannot encode device_type=poison/") {
		t.Fatalf("dead letters %v; want partition 2's offset 4 with the panic", letters)
	}
}

// refusingOutbox refuses, as too large for the server, every letter of
// offset that carries its value.
type refusingOutbox struct {
	Outbox
	offset int64
}

func (o refusingOutbox) PublishDLQ(ctx context.Context, letters []messages.DeadLetter) error {
	for _, l := range letters {
		if l.Offset == o.offset && l.Value != nil {
			return fmt.Errorf("publish dlq %d: %w", l.Offset, nats.ErrMaxPayload)
		}
	}
	return o.Outbox.PublishDLQ(ctx, letters)
}

// TestRefusedLetterIsolated: a bad record whose dead letter the DLQ refuses
// every time (too large for a server whose limits the letter misjudged)
// fails every epoch on its DLQ publish. It is isolated like any record
// fault, its letter refused once more with its body, then sent without key
// and value, saying so; the records around it are committed.
func TestRefusedLetterIsolated(t *testing.T) {
	h := newHarness(t, nil)
	values := withPoison(12, -1, "smart_plug")
	values[5] = []byte("not json")
	h.produceValues(1, values...)
	h.outbox = refusingOutbox{Outbox: NewOutbox(h.bridge), offset: 5}
	r := h.start(Config{}, nil)
	defer r.stop(t)
	h.waitNext(map[int32]int64{1: 12})
	if _, rows, _ := h.tableState(); rows != 11 {
		t.Errorf("table holds %d rows, want 11", rows)
	}
	letters := h.dlq()
	if len(letters) != 1 || letters[0].Header.Get(bridge.HeaderOffset) != "5" || len(letters[0].Data) != 0 {
		t.Fatalf("dead letters %v; want partition 1's offset 5, without its value", letters)
	}
	if why := letters[0].Header.Get(bridge.HeaderError); !strings.Contains(why, "maximum payload exceeded") ||
		!strings.Contains(why, "sent without its 0-byte key and 8-byte value") {
		t.Errorf("reason %q; want the refusal and what was left out", why)
	}
}
