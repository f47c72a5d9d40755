package bridge

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deltaflow/deltaflow/internal/secret"
	"github.com/deltaflow/deltaflow/messages/letter"
)

// StoredLetter is a dead letter as the DLQ stream holds it.
type StoredLetter struct {
	letter.DeadLetter
	Seq    uint64    // stream sequence
	Stored time.Time // when the stream stored it
	// Truncated is the value's original length when the stream holds only
	// its first bytes (it did not fit max_payload); 0 when whole.
	Truncated int
	// KeyTruncated is the key's original length when the letter holds only
	// its first bytes (it was too large for a header); 0 when whole.
	KeyTruncated int
}

// Whole reports whether the letter holds the whole Kafka record, so that
// mapping it again gives what mapping the record would.
func (l StoredLetter) Whole() bool { return l.Truncated == 0 && l.KeyTruncated == 0 }

// ClientURL is the server a tool connects to for cfg: nats.url, or the
// embedded server's nats.listen address when deltaflow runs it.
func ClientURL(cfg Config) (string, error) {
	if !cfg.embedded() {
		return cfg.URL, nil
	}
	listen := cfg.withDefaults().Listen
	if _, port, err := net.SplitHostPort(listen); err != nil || port == "-1" || port == "0" {
		return "", fmt.Errorf("nats.listen %q names no fixed port to reach the embedded server at: give its URL", listen)
	}
	return "nats://" + listen, nil
}

// Dial connects a command-line tool to the server at url with cfg's
// credentials and TLS: one attempt bounded by timeout, no reconnects.
func Dial(url string, cfg Config, name string, timeout time.Duration) (*nats.Conn, error) {
	opts := append([]nats.Option{nats.Name(name), nats.Timeout(timeout), nats.MaxReconnects(0)}, authOptions(cfg)...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect nats %s: %w", secret.RedactURL(url), err)
	}
	return nc, nil
}

// DLQReader reads and deletes the letters of one DLQ stream. Unlike New it
// creates nothing: a tool looking at the DLQ must not set up streams.
type DLQReader struct {
	name   string
	stream jetstream.Stream
}

// OpenDLQ opens the DLQ stream name over nc.
func OpenDLQ(ctx context.Context, nc *nats.Conn, name string) (*DLQReader, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	s, err := js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("dlq stream %s: %w", name, err)
	}
	return &DLQReader{name: name, stream: s}, nil
}

// DLQ opens the bridge's own DLQ stream for reading.
func (b *Bridge) DLQ(ctx context.Context) (*DLQReader, error) {
	return OpenDLQ(ctx, b.nc, b.dlq)
}

// Name is the stream's name.
func (r *DLQReader) Name() string { return r.name }

// Letter returns the letter at seq; a *NoLetterError (which is
// jetstream.ErrMsgNotFound) when there is none.
func (r *DLQReader) Letter(ctx context.Context, seq uint64) (StoredLetter, error) {
	m, err := r.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return StoredLetter{}, &NoLetterError{Stream: r.name, Seq: seq}
	}
	if err != nil {
		return StoredLetter{}, fmt.Errorf("dlq %s sequence %d: %w", r.name, seq, err)
	}
	return parseLetter(m)
}

// NoLetterError says a DLQ stream holds no letter at a sequence (never
// stored, replayed, deleted or expired), in deltaflow's words rather than
// the JetStream API's (code=404 err_code=10037).
type NoLetterError struct {
	Stream string
	Seq    uint64
}

func (e *NoLetterError) Error() string {
	return fmt.Sprintf("dlq %s: no letter at sequence %d (never stored, replayed, deleted or expired; deltaflow dlq ls lists them)", e.Stream, e.Seq)
}

// Is makes it jetstream.ErrMsgNotFound.
func (e *NoLetterError) Is(target error) bool { return target == jetstream.ErrMsgNotFound }

// Letters calls fn with every letter from sequence from on, in order, up to
// the last one stored when Letters began: letters stored meanwhile wait for
// the next call. fn's error ends the walk and is returned.
func (r *DLQReader) Letters(ctx context.Context, from uint64, fn func(StoredLetter) error) error {
	info, err := r.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("dlq stream %s: %w", r.name, err)
	}
	last := info.State.LastSeq
	for seq := max(from, info.State.FirstSeq, 1); seq <= last; seq++ {
		// The next message at or after seq: one request however many
		// deleted sequences lie between.
		m, err := r.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("dlq %s from sequence %d: %w", r.name, seq, err)
		}
		if m.Sequence > last {
			return nil
		}
		l, err := parseLetter(m)
		if err != nil {
			return err
		}
		if err := fn(l); err != nil {
			return err
		}
		seq = m.Sequence
	}
	return nil
}

// Delete removes the letter at seq; one already gone is no error.
func (r *DLQReader) Delete(ctx context.Context, seq uint64) error {
	err := r.stream.DeleteMsg(ctx, seq)
	// The server answers a sequence it does not hold with its store's
	// "no message found", which nats.go passes on only as text.
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) && !strings.Contains(err.Error(), "no message found") {
		return fmt.Errorf("dlq %s: delete sequence %d: %w", r.name, seq, err)
	}
	return nil
}

// parseLetter reads back what dlqMsg stored.
func parseLetter(m *jetstream.RawStreamMsg) (StoredLetter, error) {
	h := m.Header
	l := StoredLetter{Seq: m.Sequence, Stored: m.Time.UTC()}
	bad := func(key string, err error) (StoredLetter, error) {
		return StoredLetter{}, fmt.Errorf("dlq letter %d: header %s %q: %w", m.Sequence, key, h.Get(key), err)
	}
	l.Reason, l.Topic, l.TopicID, l.Value = h.Get(HeaderError), h.Get(HeaderTopic), h.Get(HeaderTopicID), m.Data
	p, err := strconv.ParseInt(h.Get(HeaderPartition), 10, 32)
	if err != nil {
		return bad(HeaderPartition, err)
	}
	l.Partition = int32(p)
	if l.Offset, err = strconv.ParseInt(h.Get(HeaderOffset), 10, 64); err != nil {
		return bad(HeaderOffset, err)
	}
	if k := h.Values(HeaderKey); len(k) > 0 {
		l.Key = []byte(k[0])
		if h.Get(HeaderKeyEncoding) == "base64" {
			if l.Key, err = base64.StdEncoding.DecodeString(k[0]); err != nil {
				return bad(HeaderKey, err)
			}
		}
	}
	if ts := h.Get(HeaderTimestamp); ts != "" {
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return bad(HeaderTimestamp, err)
		}
		l.Timestamp = t.UnixMilli()
	}
	for _, t := range []struct {
		header string
		n      *int
	}{{HeaderTruncated, &l.Truncated}, {HeaderKeyTruncated, &l.KeyTruncated}} {
		if v := h.Get(t.header); v != "" {
			if *t.n, err = strconv.Atoi(v); err != nil {
				return bad(t.header, err)
			}
		}
	}
	return l, nil
}
