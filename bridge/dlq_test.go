package bridge

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deltaflow/deltaflow/messages/letter"
)

func testLetters(n int) []letter.DeadLetter {
	ts := time.Date(2026, 6, 22, 9, 15, 30, 123000000, time.UTC).UnixMilli() // Kafka timestamps are ms
	var out []letter.DeadLetter
	for i := range n {
		out = append(out, letter.DeadLetter{
			Topic: "sensor.events", Partition: 2, Offset: int64(100 + i),
			Key: []byte("smart-plug-01"), Value: []byte(`{"device_id":` + strconv.Itoa(i)),
			Timestamp: ts, Reason: "invalid JSON:\nunexpected end",
		})
	}
	return out
}

// TestDLQLetterFreedOnceStored: once the stream has acknowledged a letter,
// nothing keeps its value. nats.go holds each message until its ack
// timeout's timer, stopped, leaves the runtime's timer heap (up to
// nats.publish_timeout later), and the message held the letter's value,
// which the memory budget no longer counted: with letters of 3.9 MiB, one
// an epoch, five were alive at once.
func TestDLQLetterFreedOnceStored(t *testing.T) {
	b, _ := externalBridge(t)
	value := publishLetter(t, b, 4<<20)
	runtime.GC()
	runtime.GC()
	if value.Value() != nil {
		t.Fatal("the letter's value is still reachable after the stream acknowledged it")
	}
}

// publishLetter stores a letter of n bytes in the DLQ and returns a weak
// pointer to its value.
func publishLetter(t *testing.T, b *Bridge, n int) weak.Pointer[byte] {
	letters := testLetters(1)
	letters[0].Value = make([]byte, n)
	if err := b.PublishDLQ(t.Context(), letters); err != nil {
		t.Fatal(err)
	}
	return weak.Make(&letters[0].Value[0])
}

func TestDLQDedupAndHeaders(t *testing.T) {
	b, ns := externalBridge(t)
	ctx := t.Context()
	nc := connect(t, ns.ClientURL())
	events, err := nc.SubscribeSync(EventSubject(testTable, KindDLQ))
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()

	letters := testLetters(3)
	letters[2].Key = []byte{0xff, '\n', 0}
	if err := b.PublishDLQ(ctx, letters); err != nil {
		t.Fatal(err)
	}
	// An epoch replayed after a crash republishes the same letters.
	if err := b.PublishDLQ(ctx, letters); err != nil {
		t.Fatal(err)
	}
	s, err := b.js.Stream(ctx, "DELTAFLOW_DLQ_SENSOR_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Info(ctx)
	if info.State.Msgs != 3 {
		t.Fatalf("stream holds %d messages, want 3 (deduplicated)", info.State.Msgs)
	}
	m, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "deltaflow.sensor_events.dlq.sensor=2Eevents.2" || string(m.Data) != string(letters[0].Value) {
		t.Errorf("msg = %s %q", m.Subject, m.Data)
	}
	for k, want := range map[string]string{
		HeaderError: "invalid JSON: unexpected end", HeaderTopic: "sensor.events", HeaderPartition: "2",
		HeaderOffset: "100", HeaderKey: "smart-plug-01", HeaderTimestamp: "2026-06-22T09:15:30.123Z",
		"Nats-Msg-Id": "sensor.events/2/100",
	} {
		if got := m.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	m3, _ := s.GetMsg(ctx, 3)
	if m3.Header.Get(HeaderKeyEncoding) != "base64" || m3.Header.Get(HeaderKey) != base64.StdEncoding.EncodeToString(letters[2].Key) {
		t.Errorf("binary key headers = %v", m3.Header)
	}
	// One DLQEvent per stored letter; the duplicates get none.
	for i := range 3 {
		msg, err := events.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("dlq event %d: %v", i, err)
		}
		var ev DLQEvent
		_ = json.Unmarshal(msg.Data, &ev)
		if ev.Type != KindDLQ.Type() || ev.Topic != "sensor.events" || ev.Stream != "DELTAFLOW_DLQ_SENSOR_EVENTS" || ev.Sequence == 0 {
			t.Errorf("event = %s", msg.Data)
		}
	}
	if msg, err := events.NextMsg(200 * time.Millisecond); err == nil {
		t.Errorf("event for a duplicate: %s", msg.Data)
	}
}

func TestDLQTruncatesOversizedValues(t *testing.T) {
	opts := testServerOpts(t)
	opts.MaxPayload = 64 << 10
	ns := runServer(t, opts)
	b := newTestBridge(t, Config{URL: ns.ClientURL()})
	dl := testLetters(1)[0]
	dl.Value = []byte(strings.Repeat("x", 100<<10))
	if err := b.PublishDLQ(t.Context(), []letter.DeadLetter{dl}); err != nil {
		t.Fatal(err)
	}
	s, _ := b.js.Stream(t.Context(), b.dlq)
	m, err := s.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(HeaderTruncated) != strconv.Itoa(100<<10) || len(m.Data) == 0 || len(m.Data) >= 64<<10 {
		t.Errorf("truncated header %q, body %d bytes", m.Header.Get(HeaderTruncated), len(m.Data))
	}
}

func TestDLQLargeValueEmbedded(t *testing.T) {
	b := newTestBridge(t, Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir()})
	dl := testLetters(1)[0]
	dl.Value = make([]byte, 10<<20) // a hostile 10 MB record fits whole
	if err := b.PublishDLQ(t.Context(), []letter.DeadLetter{dl}); err != nil {
		t.Fatal(err)
	}
	s, _ := b.js.Stream(t.Context(), b.dlq)
	m, err := s.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Data) != 10<<20 || m.Header.Get(HeaderTruncated) != "" {
		t.Errorf("stored %d bytes, truncated=%q", len(m.Data), m.Header.Get(HeaderTruncated))
	}
}

func TestDLQFailsWhenStreamMissing(t *testing.T) {
	b, _ := externalBridge(t)
	ctx := t.Context()
	if err := b.js.DeleteStream(ctx, b.dlq); err != nil {
		t.Fatal(err)
	}
	err := b.PublishDLQ(ctx, testLetters(2))
	if !errors.Is(err, ErrDLQIncomplete) || !strings.Contains(err.Error(), "2 of 2") {
		t.Fatalf("err = %v, want ErrDLQIncomplete for 2 of 2", err)
	}
	if !IsTransient(err) {
		t.Errorf("missing stream should be transient (it is recreated): %v", err)
	}
	// The failed call recreated the stream, so the retry succeeds.
	if err := b.PublishDLQ(ctx, testLetters(2)); err != nil {
		t.Fatalf("retry: %v", err)
	}
}

func TestDLQFailsWhenServerUnreachable(t *testing.T) {
	b, ns := externalBridge(t, fastReconnect)
	stopEmbedded(ns)
	waitFor(t, "disconnect", func() bool { return !b.Healthy() })
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	err := b.PublishDLQ(ctx, testLetters(3))
	if !errors.Is(err, ErrDLQIncomplete) || !IsTransient(err) {
		t.Fatalf("err = %v, want a transient ErrDLQIncomplete", err)
	}
}

func TestDLQStreamIsBoundToItsStream(t *testing.T) {
	b, _ := externalBridge(t)
	// Another stream capturing the same subjects must not count as ours.
	_ = b.js.DeleteStream(t.Context(), b.dlq)
	if _, err := b.js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"deltaflow.>"}}); err != nil {
		t.Fatal(err)
	}
	if err := b.PublishDLQ(t.Context(), testLetters(1)); err == nil {
		t.Fatal("letters stored in a foreign stream counted as acknowledged")
	}
}

// Letters sent while the server is down are stored when nats.go reconnects
// and resends them, but their acks are lost: the retry finds them stored
// (duplicates) and must still publish their dlq events, once each.
func TestDLQEventsAfterUnacknowledgedPublish(t *testing.T) {
	opts := testServerOpts(t)
	ns := runServer(t, opts)
	b := newTestBridge(t, Config{URL: ns.ClientURL(), PublishTimeout: time.Second}, fastReconnect)
	letters := testLetters(3)
	opts.Port = ns.Addr().(*net.TCPAddr).Port // for the same server to come back
	stopEmbedded(ns)
	waitFor(t, "disconnect", func() bool { return !b.Healthy() })
	if err := b.PublishDLQ(t.Context(), letters); !errors.Is(err, ErrDLQIncomplete) {
		t.Fatalf("PublishDLQ while the server is down = %v, want ErrDLQIncomplete", err)
	}

	ns = runServer(t, opts)
	waitFor(t, "reconnect", b.Healthy)
	nc := connect(t, ns.ClientURL())
	sub, err := nc.SubscribeSync(EventSubject(testTable, KindDLQ))
	if err != nil {
		t.Fatal(err)
	}
	// The server must know the subscription before the events go out.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := b.PublishDLQ(t.Context(), letters); err != nil {
		t.Fatalf("retry: %v", err)
	}
	for _, l := range letters {
		msg, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("dlq event of %s: %v", l.MsgID(), err)
		}
		var ev DLQEvent
		if err := json.Unmarshal(msg.Data, &ev); err != nil || ev.Offset != l.Offset {
			t.Errorf("dlq event %s (%v), want offset %d", msg.Data, err, l.Offset)
		}
	}
	// Once each: a replay finds them stored and acknowledged before.
	if err := b.PublishDLQ(t.Context(), letters); err != nil {
		t.Fatal(err)
	}
	if msg, err := sub.NextMsg(500 * time.Millisecond); err == nil {
		t.Errorf("a second dlq event: %s", msg.Data)
	}
	if n := len(b.unacked); n != 0 {
		t.Errorf("%d letters still remembered as unacknowledged", n)
	}
}

// TestDLQRecreatedTopicIsNotADuplicate: a topic deleted and created again
// reuses offsets; its bad records carry the new topic ID, so the DLQ's
// duplicate window does not drop them as copies of the old topic's.
func TestDLQRecreatedTopicIsNotADuplicate(t *testing.T) {
	b, _ := externalBridge(t)
	ctx := t.Context()
	old := testLetters(2)
	for i := range old {
		old[i].TopicID = "pLDKJ2HLSx-Xk5yGoJwFhg"
	}
	if err := b.PublishDLQ(ctx, old); err != nil {
		t.Fatal(err)
	}
	recreated := testLetters(2)
	for i := range recreated {
		recreated[i].TopicID = "Zq8Uc2vTRmiBEW1kS5yZ3A"
		recreated[i].Value = []byte("new topic's record")
	}
	if err := b.PublishDLQ(ctx, append(recreated, old...)); err != nil {
		t.Fatal(err)
	}
	s, err := b.js.Stream(ctx, "DELTAFLOW_DLQ_SENSOR_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Info(ctx)
	if info.State.Msgs != 4 {
		t.Fatalf("stream holds %d messages; want 4: both topics' letters at offsets 100 and 101, the old ones once", info.State.Msgs)
	}
	m, err := s.GetMsg(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get(HeaderTopicID); got != "Zq8Uc2vTRmiBEW1kS5yZ3A" || string(m.Data) != "new topic's record" {
		t.Errorf("third letter: topic ID %q, body %q", got, m.Data)
	}
}

// TestDLQLetterAlwaysFits: a bad record whose key, in a header (base64,
// a third larger), alone passes the server's max_payload (an ~800 KiB
// binary key against NATS's default 1 MiB) is still stored: its key header
// is cut, and the letter says so with the key's size and SHA-256, so a
// reader of the stream sees it was cut and can match it to the record.
// Before, ErrMaxPayload (permanent) failed its epoch again and again.
func TestDLQLetterAlwaysFits(t *testing.T) {
	opts := testServerOpts(t)
	opts.MaxPayload = 1 << 20 // nats-server's default
	ns := runServer(t, opts)
	b := newTestBridge(t, Config{URL: ns.ClientURL()})
	binKey := make([]byte, 800<<10)
	for i := range binKey {
		binKey[i] = byte(i*7 + 1)
	}
	textKey := []byte(strings.Repeat("k", 2<<20))
	letters := testLetters(3)
	letters[0].Key = binKey
	letters[1].Key, letters[1].Value = textKey, []byte(strings.Repeat("v", 2<<20))
	letters[2].Reason = strings.Repeat("why ", 300<<10)
	if err := b.PublishDLQ(t.Context(), letters); err != nil {
		t.Fatalf("publish: %v", err)
	}
	s, _ := b.js.Stream(t.Context(), b.dlq)
	for i, l := range letters {
		m, err := s.GetMsg(t.Context(), uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		size := len(m.Data)
		for k, vs := range m.Header {
			for _, v := range vs {
				size += len(k) + len(v)
			}
		}
		if size > 1<<20 {
			t.Errorf("letter %d: %d bytes stored, past max_payload", i, size)
		}
		if m.Header.Get(HeaderOffset) != strconv.FormatInt(l.Offset, 10) {
			t.Errorf("letter %d: offset header %q", i, m.Header.Get(HeaderOffset))
		}
		if i == 2 {
			if r := m.Header.Get(HeaderError); len(r) > 4<<10 || !strings.HasPrefix(r, "why why") {
				t.Errorf("letter 2: reason header of %d bytes, want it cut to a few KiB", len(r))
			}
			continue
		}
		sum := sha256.Sum256(l.Key)
		if got := m.Header.Get(HeaderKeyTruncated); got != strconv.Itoa(len(l.Key)) {
			t.Errorf("letter %d: %s = %q, want the key's %d bytes", i, HeaderKeyTruncated, got, len(l.Key))
		}
		if got := m.Header.Get(HeaderKeySHA256); got != hex.EncodeToString(sum[:]) {
			t.Errorf("letter %d: %s = %q, want the key's SHA-256", i, HeaderKeySHA256, got)
		}
	}
	m, _ := s.GetMsg(t.Context(), 2)
	if m.Header.Get(HeaderTruncated) != strconv.Itoa(2<<20) || len(m.Data) == 0 {
		t.Errorf("letter 1: value truncated header %q with %d bytes kept", m.Header.Get(HeaderTruncated), len(m.Data))
	}
}
