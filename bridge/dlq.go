package bridge

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deltaflow/deltaflow/messages/letter"
)

// ErrDLQIncomplete is wrapped by PublishDLQ when some letters were not
// acknowledged; the causes are joined to it (see IsTransient).
var ErrDLQIncomplete = errors.New("bridge: dlq publish incomplete")

// DLQ message headers. The body is the record's original value.
const (
	HeaderError     = "Deltaflow-Error"     // why the record was rejected
	HeaderTopic     = "Deltaflow-Topic"     // Kafka topic
	HeaderTopicID   = "Deltaflow-Topic-Id"  // Kafka topic ID, when the brokers have IDs
	HeaderPartition = "Deltaflow-Partition" // Kafka partition
	HeaderOffset    = "Deltaflow-Offset"    // Kafka offset
	HeaderKey       = "Deltaflow-Key"       // Kafka key, as is if printable UTF-8
	// HeaderKeyEncoding is "base64" when the key was not printable UTF-8
	// (headers cannot carry control bytes) and HeaderKey holds its base64.
	HeaderKeyEncoding = "Deltaflow-Key-Encoding"
	HeaderTimestamp   = "Deltaflow-Timestamp" // Kafka timestamp, RFC 3339 with nanoseconds
	// HeaderTruncated is set, to the original length in bytes, when the
	// value did not fit the server's max_payload and the body holds only
	// its first bytes.
	HeaderTruncated = "Deltaflow-Truncated"
	// HeaderLastOffset is set when the letter stands for the records from
	// HeaderOffset to it: a record batch deltaflow did not read (it
	// decompresses past kafka.max_decompress_bytes), and has no body.
	HeaderLastOffset = "Deltaflow-Last-Offset"
	// HeaderKeyTruncated is set, to the key's length in bytes, when the key
	// was too large for a header (see maxKeyHeader): HeaderKey then holds
	// only its first bytes, and HeaderKeySHA256 identifies the whole key.
	HeaderKeyTruncated = "Deltaflow-Key-Truncated"
	// HeaderKeySHA256 is the hex SHA-256 of the whole key, set with
	// HeaderKeyTruncated.
	HeaderKeySHA256 = "Deltaflow-Key-Sha256"
	// HeaderValueSHA256 is the hex SHA-256 of the whole value, set with
	// HeaderTruncated.
	HeaderValueSHA256 = "Deltaflow-Value-Sha256"
)

// Batches of async publishes are bounded so that a backlog of 10 MB hostile
// records never holds more than dlqWindowBytes in the client at once.
const (
	dlqWindowMsgs  = 256
	dlqWindowBytes = 32 << 20
	// headerSlack covers the NATS/1.0 header framing, Nats-Msg-Id and the
	// subject beyond the header values we count.
	headerSlack = 1024
)

// PublishDLQ stores letters in the DLQ stream and waits until JetStream has
// acknowledged every one of them, or ctx (bounded by publish_timeout) ends.
// It returns nil only if all are stored: the engine commits an epoch only
// then, so a bad record is never silently dropped. On error it is safe to
// call again with the same letters (deduplicated by MsgID).
//
// A letter always fits the server's max_payload (see dlqMsg): a value too
// large is truncated (HeaderTruncated, HeaderValueSHA256), a key too long
// for a header is cut (HeaderKeyTruncated, HeaderKeySHA256), rather than
// failing the epoch forever. The Kafka record itself stays
// readable until Kafka's retention removes it.
//
// After the acks, one DLQEvent per newly stored letter is published.
// Duplicates of letters stored by an earlier run (an epoch replayed after a
// crash) get none; but a letter this bridge sent without hearing the ack (a
// timeout, e.g. while NATS was down: nats.go sends it on reconnect) gets
// its event when a later call finds it stored.
func (b *Bridge) PublishDLQ(ctx context.Context, letters []letter.DeadLetter) error {
	if len(letters) == 0 {
		return nil
	}
	ctx, cancel := b.bound(ctx)
	defer cancel()
	acks := make([]*jetstream.PubAck, len(letters))
	var errs []error
	for start := 0; start < len(letters); {
		end, size := start, 0
		for end < len(letters) && end-start < dlqWindowMsgs && (end == start || size+len(letters[end].Value) <= dlqWindowBytes) {
			size += len(letters[end].Value)
			end++
		}
		errs = append(errs, b.publishWindow(ctx, letters[start:end], acks[start:end])...)
		start = end
		if ctx.Err() != nil {
			break
		}
	}
	missing, first := 0, 0 // first: the first letter missing
	for i, a := range acks {
		if a == nil {
			if missing == 0 {
				first = i
			}
			missing++
		}
	}
	if missing > 0 {
		if len(errs) == 0 {
			errs = append(errs, ctx.Err())
		}
		all := errors.Join(errs...)
		switch {
		case errors.Is(all, nats.ErrNoResponders) || errors.Is(all, jetstream.ErrNoStreamResponse):
			// No stream listens: someone deleted it. Recreate it so the
			// caller's retry succeeds.
			if err := b.ensureDLQ(context.WithoutCancel(ctx)); err != nil {
				all = errors.Join(all, err)
				if b.ns != nil && !b.ns.JetStreamEnabled() {
					// nats-server turns JetStream off after some store
					// failures (a store it may not write).
					all = b.reopenStore(ctx, "JetStream was off")
				}
			}
		case ctx.Err() != context.Canceled && (errors.Is(all, jetstream.ErrAsyncPublishTimeout) || errors.Is(all, context.DeadlineExceeded)):
			if err := b.storeFailure(ctx, letters[first]); err != nil {
				all = err // not the timeouts: a failed store is no transient failure
			}
		}
		return fmt.Errorf("%w: %d of %d letters not acknowledged by stream %s: %w",
			ErrDLQIncomplete, missing, len(letters), b.dlq, all)
	}
	for i, d := range letters {
		if b.acked(d.MsgID()) && acks[i].Duplicate {
			continue
		}
		ev := &DLQEvent{Topic: d.Topic, Partition: d.Partition, Offset: d.Offset, Reason: d.Reason, Stream: acks[i].Stream, Sequence: acks[i].Sequence}
		if err := b.Publish(ev); err != nil {
			b.logger.Warn("dlq event not published", "err", err)
		}
	}
	return nil
}

// publishWindow publishes letters asynchronously and waits for their acks,
// filling acks[i] for each one stored. It returns the errors met.
func (b *Bridge) publishWindow(ctx context.Context, letters []letter.DeadLetter, acks []*jetstream.PubAck) []error {
	futures := make([]jetstream.PubAckFuture, len(letters))
	msgs := make([]*nats.Msg, len(letters))
	var errs []error
	for i, d := range letters {
		msgs[i] = b.dlqMsg(d)
		f, err := b.js.PublishMsgAsync(msgs[i], jetstream.WithMsgID(d.MsgID()), jetstream.WithExpectStream(b.dlq))
		if err != nil {
			errs = append(errs, fmt.Errorf("publish dlq %s: %w", d.MsgID(), err))
			continue
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case a := <-f.Ok():
			acks[i] = a
			// Stored. nats.go keeps the message until the ack's
			// timeout timer, stopped, leaves the runtime's heap (up
			// to nats.publish_timeout): not the letter's value with it.
			msgs[i].Data = nil
		case err := <-f.Err():
			errs = append(errs, fmt.Errorf("ack dlq %s: %w", letters[i].MsgID(), err))
			b.unack(letters[i].MsgID()) // sent, maybe stored: the ack is unknown
		case <-ctx.Done():
			for j := i; j < len(futures); j++ {
				if futures[j] != nil {
					b.unack(letters[j].MsgID())
				}
			}
			return append(errs, fmt.Errorf("ack dlq %s: %w", letters[i].MsgID(), ctx.Err()))
		}
	}
	return errs
}

// storeFailure tells a DLQ stream whose store failed from a slow server,
// once letters went unacknowledged for want of time: it sends d again with
// a probe behind it, which the stream refuses before storing anything (it
// expects another stream). The stream answers in order, so the probe
// refused while d has no answer means the stream dropped d: nats-server
// does so, without a word, once a write of the stream's store failed (a
// full disk), until the store is opened again. The embedded server's store
// is reopened here; an external server's needs the server restarted. The
// error wraps ErrStoreFailed, saying where and what to do; nil means the
// stream stored d, or did not answer in time (slow or away: transient).
func (b *Bridge) storeFailure(ctx context.Context, d letter.DeadLetter) error {
	if !b.nc.IsConnected() {
		return nil
	}
	ctx, cancel := b.bound(context.WithoutCancel(ctx))
	defer cancel()
	sent, err := b.js.PublishMsgAsync(b.dlqMsg(d), jetstream.WithMsgID(d.MsgID()), jetstream.WithExpectStream(b.dlq))
	if err != nil {
		return nil
	}
	b.unack(d.MsgID()) // its ack, if any, is not read here
	probe := nats.NewMsg(DLQLetterSubject(b.table, d.Topic, d.Partition))
	refused, err := b.js.PublishMsgAsync(probe, jetstream.WithExpectStream(b.dlq+"-PROBE"))
	if err != nil {
		return nil
	}
	select {
	case err := <-refused.Err():
		if apiErr := (*jetstream.APIError)(nil); !errors.As(err, &apiErr) || apiErr.ErrorCode != jsErrStreamNotMatch {
			return nil
		}
	case <-refused.Ok(): // never: the stream checks the header first
		return nil
	case <-ctx.Done():
		return nil
	}
	select {
	case <-sent.Ok():
		return nil
	case <-sent.Err():
		return nil
	default: // answered before the probe, if at all
	}
	if b.ns == nil {
		return fmt.Errorf("%w: stream %s on %s answers but stores nothing (its disk was full?), and nats-server keeps it so "+
			"until it restarts: make room on the server's store, then restart nats-server; deltaflow retries meanwhile",
			ErrStoreFailed, b.dlq, b.nc.ConnectedUrlRedacted())
	}
	return b.reopenStore(ctx, "stream "+b.dlq+" stored nothing")
}

// reopenStore reopens the embedded server's JetStream store, which failed
// as why says, waits (within ctx) until the bridge is connected again, and
// returns the error wrapping ErrStoreFailed that says so.
func (b *Bridge) reopenStore(ctx context.Context, why string) error {
	ctx, cancel := b.bound(context.WithoutCancel(ctx))
	defer cancel()
	back := b.nc.StatusChanged(nats.CONNECTED)
	defer b.nc.RemoveStatusListener(back)
	if err := b.ns.reopenStore(); err != nil {
		return fmt.Errorf("%w: %s (its disk, under nats.store_dir %s, full?), and reopening the store failed: %w",
			ErrStoreFailed, why, b.cfg.StoreDir, err)
	}
	select {
	case <-back: // the retry finds the bridge connected
	case <-ctx.Done():
	}
	b.logger.Warn("the embedded JetStream store failed (a full disk?); reopened it", "why", why, "store_dir", b.cfg.StoreDir)
	return fmt.Errorf("%w: %s (its disk, under nats.store_dir %s, full?): the store is reopened "+
		"and stores again once the disk has room", ErrStoreFailed, why, b.cfg.StoreDir)
}

// maxUnacked bounds the ids remembered by unack: letters an epoch never
// retries (its partitions moved to another instance) are not kept forever.
// Past it, a letter stored unacknowledged may go without its DLQEvent
// (events are observations; the letter itself is in the stream).
const maxUnacked = 1 << 16

// unack remembers that the letter id was sent but its ack not received.
func (b *Bridge) unack(id string) {
	b.unackedMu.Lock()
	defer b.unackedMu.Unlock()
	if len(b.unacked) < maxUnacked {
		b.unacked[id] = struct{}{}
	}
}

// acked forgets id and reports whether its ack had been received before
// (false: this bridge sent it earlier and never heard back).
func (b *Bridge) acked(id string) bool {
	b.unackedMu.Lock()
	defer b.unackedMu.Unlock()
	_, unknown := b.unacked[id]
	delete(b.unacked, id)
	return !unknown
}

// Header bounds of a dead letter: whatever a record holds, the letter's
// headers stay a few KiB, so the body keeps the rest of max_payload and the
// letter always fits (a letter that cannot be stored would hold its epoch
// back for good).
const (
	// maxKeyHeader bounds Deltaflow-Key (base64 or not): a longer key is
	// cut, marked with HeaderKeyTruncated and HeaderKeySHA256.
	maxKeyHeader = 4 << 10
	// maxReasonHeader bounds Deltaflow-Error.
	maxReasonHeader = 2 << 10
	// truncationSlack covers the truncation headers themselves.
	truncationSlack = 256
)

// dlqMsg builds the stream message of d, within the server's max_payload:
// a key or reason too long for a header is cut (the key's size and SHA-256
// say so), and the body is truncated to what is left (the value's size
// and SHA-256 say so).
func (b *Bridge) dlqMsg(d letter.DeadLetter) *nats.Msg {
	msg := nats.NewMsg(DLQLetterSubject(b.table, d.Topic, d.Partition))
	msg.Header.Set(HeaderError, cut(oneLine(d.Reason), maxReasonHeader))
	msg.Header.Set(HeaderTopic, d.Topic)
	if d.TopicID != "" {
		msg.Header.Set(HeaderTopicID, d.TopicID)
	}
	msg.Header.Set(HeaderPartition, strconv.FormatInt(int64(d.Partition), 10))
	msg.Header.Set(HeaderOffset, strconv.FormatInt(d.Offset, 10))
	if d.LastOffset > d.Offset {
		msg.Header.Set(HeaderLastOffset, strconv.FormatInt(d.LastOffset, 10))
	}
	if d.Key != nil {
		setKey(msg.Header, d.Key)
	}
	if d.Timestamp != 0 {
		msg.Header.Set(HeaderTimestamp, time.UnixMilli(d.Timestamp).UTC().Format(time.RFC3339Nano))
	}
	msg.Data = d.Value
	hdrLen := len(msg.Subject) + len(d.MsgID()) + headerSlack
	for k, vs := range msg.Header {
		for _, v := range vs {
			hdrLen += len(k) + len(v) + 4
		}
	}
	if limit := int(b.nc.MaxPayload()); hdrLen+len(d.Value) > limit {
		keep := max(0, limit-hdrLen-truncationSlack)
		msg.Header.Set(HeaderTruncated, strconv.Itoa(len(d.Value)))
		msg.Header.Set(HeaderValueSHA256, sha256Hex(d.Value))
		msg.Data = d.Value[:keep]
		b.logger.Warn("dlq letter truncated to fit max_payload", "id", d.MsgID(), "bytes", len(d.Value), "kept", keep)
	}
	return msg
}

// setKey sets the key headers: the key as is when printable UTF-8, else
// its base64; past maxKeyHeader, only the first bytes, with the whole
// key's size and SHA-256.
func setKey(h nats.Header, key []byte) {
	safe := headerSafe(key)
	kept := key
	if !safe {
		kept = key[:min(len(key), maxKeyHeader/4*3)] // base64 grows 3 bytes to 4
	}
	if len(kept) > maxKeyHeader {
		kept = []byte(cut(string(kept), maxKeyHeader))
	}
	if safe {
		h.Set(HeaderKey, string(kept))
	} else {
		h.Set(HeaderKey, base64.StdEncoding.EncodeToString(kept))
		h.Set(HeaderKeyEncoding, "base64")
	}
	if len(kept) < len(key) {
		h.Set(HeaderKeyTruncated, strconv.Itoa(len(key)))
		h.Set(HeaderKeySHA256, sha256Hex(key))
	}
}

// cut returns s cut to at most n bytes, on a UTF-8 boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// headerSafe reports whether b can be a header value unchanged: printable
// UTF-8, no control bytes (CR/LF would end the header).
func headerSafe(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// oneLine makes s usable as a header value (also a micro error
// description): line breaks become spaces.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
}
