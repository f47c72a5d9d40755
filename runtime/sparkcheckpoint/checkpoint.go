package sparkcheckpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/deltaflow/deltaflow/storage"
)

// MaxLogVersion is the highest offsets/ and commits/ format version Spark
// 3.5 writes and this package reads ("v1").
const MaxLogVersion = 1

// ErrNotCheckpoint is matched (errors.Is) when the directory holds no Spark
// streaming checkpoint (no metadata file, or no offsets).
var ErrNotCheckpoint = errors.New("sparkcheckpoint: not a Spark streaming checkpoint")

// ErrUnsupportedVersion is matched when a log file's version header is one
// this package does not know (a newer Spark's "v2").
var ErrUnsupportedVersion = errors.New("sparkcheckpoint: unsupported log version")

// ErrCorrupt is matched when a checkpoint file cannot be parsed (truncated,
// not JSON, not Kafka offsets).
var ErrCorrupt = errors.New("sparkcheckpoint: corrupt checkpoint file")

// ErrNothingCommitted is returned by Resolve when no batch of the query
// reached the table.
var ErrNothingCommitted = errors.New("sparkcheckpoint: no batch of the query reached the table")

// Checkpoint is a streaming query's checkpoint as Spark's recovery sees it.
type Checkpoint struct {
	// QueryID is the query's id from metadata; the Delta sink writes its
	// txn under this appId.
	QueryID string
	// Latest is the highest batch with an offsets file.
	Latest Batch
	// Committed is the highest batch id with a commits file, -1 for none.
	Committed int64
	// CommittedAt is the commits file's modification time (zero when none).
	CommittedAt time.Time

	store storage.Store
}

// Batch is one offsets/N file.
type Batch struct {
	ID int64
	// Topic is the Kafka topic the query's one source reads.
	Topic string
	// End holds the end offsets of the batch per partition: the next
	// offset to read after it.
	End map[int32]int64
	// WrittenAt is the file's modification time.
	WrittenAt time.Time
}

// Read reads the checkpoint at the store's root: metadata, the latest
// offsets file and the latest commits file.
func Read(ctx context.Context, store storage.Store) (*Checkpoint, error) {
	meta, err := store.Get(ctx, "metadata")
	if errors.Is(err, storage.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no metadata file", ErrNotCheckpoint, store.URI())
	}
	if err != nil {
		return nil, fmt.Errorf("read %s/metadata: %w", store.URI(), err)
	}
	var m struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(firstLine(meta), &m); err != nil || m.ID == "" {
		return nil, fmt.Errorf("%w: %s/metadata: want {\"id\":\"<query id>\"}, got %q", ErrCorrupt, store.URI(), truncate(meta))
	}
	offsets, err := batchFiles(ctx, store, "offsets/")
	if err != nil {
		return nil, err
	}
	if len(offsets) == 0 {
		return nil, fmt.Errorf("%w: %s has no offsets/ files (the query never planned a batch)", ErrNotCheckpoint, store.URI())
	}
	commits, err := batchFiles(ctx, store, "commits/")
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{QueryID: m.ID, Committed: -1, store: store}
	latest := slices.Max(slices.Collect(maps.Keys(offsets)))
	if c.Latest, err = c.readBatch(ctx, latest, offsets[latest]); err != nil {
		return nil, err
	}
	if len(commits) > 0 {
		c.Committed = slices.Max(slices.Collect(maps.Keys(commits)))
		c.CommittedAt = commits[c.Committed].ModTime
		if err := c.readCommit(ctx, c.Committed); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// batchFiles lists the batch files under dir by batch id. Like Spark's
// HDFSMetadataLog it takes only names that are batch ids, so checksum
// (.N.crc) and temporary files are ignored.
func batchFiles(ctx context.Context, store storage.Store, dir string) (map[int64]storage.ObjectInfo, error) {
	objs, err := store.List(ctx, dir, "")
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", store.URI(), dir, err)
	}
	out := map[int64]storage.ObjectInfo{}
	for _, o := range objs {
		name := strings.TrimPrefix(o.Key, dir)
		id, err := strconv.ParseInt(name, 10, 64)
		if err != nil || id < 0 || strings.Contains(name, "/") {
			continue
		}
		out[id] = o
	}
	return out, nil
}

// readBatch parses offsets/id.
func (c *Checkpoint) readBatch(ctx context.Context, id int64, info storage.ObjectInfo) (Batch, error) {
	key := "offsets/" + strconv.FormatInt(id, 10)
	data, err := c.store.Get(ctx, key)
	if err != nil {
		return Batch{}, fmt.Errorf("read %s/%s: %w", c.store.URI(), key, err)
	}
	lines, err := logLines(c.store.URI()+"/"+key, data)
	if err != nil {
		return Batch{}, err
	}
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s/%s: %s", ErrCorrupt, c.store.URI(), key, fmt.Sprintf(format, args...))
	}
	// lines[0] is the batch metadata (watermark, timestamp, conf), then one
	// line per source.
	if len(lines) < 2 {
		return Batch{}, corrupt("no source offsets after the batch metadata (truncated?)")
	}
	if !json.Valid(lines[0]) {
		return Batch{}, corrupt("batch metadata is not JSON: %q", truncate(lines[0]))
	}
	if len(lines) > 2 {
		return Batch{}, corrupt("the query reads %d sources; takeover supports one Kafka source", len(lines)-1)
	}
	var topics map[string]map[string]int64
	if err := json.Unmarshal(lines[1], &topics); err != nil {
		return Batch{}, corrupt("source offsets are not Kafka offsets {\"topic\":{\"partition\":offset}}: %q", truncate(lines[1]))
	}
	if len(topics) != 1 {
		return Batch{}, corrupt("the Kafka source reads %d topics (%s); takeover supports one", len(topics), strings.Join(slices.Sorted(maps.Keys(topics)), ", "))
	}
	b := Batch{ID: id, End: map[int32]int64{}, WrittenAt: info.ModTime}
	for topic, parts := range topics {
		b.Topic = topic
		for p, off := range parts {
			n, err := strconv.ParseInt(p, 10, 32)
			if err != nil || n < 0 {
				return Batch{}, corrupt("partition %q of topic %s is not a partition number", p, topic)
			}
			if off < 0 {
				return Batch{}, corrupt("partition %d of topic %s has offset %d", n, topic, off)
			}
			b.End[int32(n)] = off
		}
	}
	return b, nil
}

// readCommit checks commits/id: a version header and one JSON line.
func (c *Checkpoint) readCommit(ctx context.Context, id int64) error {
	key := "commits/" + strconv.FormatInt(id, 10)
	data, err := c.store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("read %s/%s: %w", c.store.URI(), key, err)
	}
	lines, err := logLines(c.store.URI()+"/"+key, data)
	if err != nil {
		return err
	}
	if len(lines) < 1 || !json.Valid(lines[0]) {
		return fmt.Errorf("%w: %s/%s: no commit metadata after the version (truncated?)", ErrCorrupt, c.store.URI(), key)
	}
	return nil
}

// logLines checks a metadata log file's version header ("v1") the way
// Spark's validateVersion does and returns the lines after it.
func logLines(name string, data []byte) ([][]byte, error) {
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	head := string(lines[0])
	v, ok := strings.CutPrefix(head, "v")
	n, err := strconv.Atoi(v)
	if !ok || err != nil || n <= 0 {
		return nil, fmt.Errorf("%w: %s: want a version line such as \"v1\", got %q", ErrCorrupt, name, truncate([]byte(head)))
	}
	if n > MaxLogVersion {
		return nil, fmt.Errorf("%w: %s is v%d, written by a newer Spark; this deltaflow reads up to v%d (Spark 3.x)",
			ErrUnsupportedVersion, name, n, MaxLogVersion)
	}
	return lines[1:], nil
}

// Offsets reads offsets/id (for the batch before the latest).
func (c *Checkpoint) Offsets(ctx context.Context, id int64) (Batch, error) {
	key := "offsets/" + strconv.FormatInt(id, 10)
	info, err := c.store.Stat(ctx, key)
	if errors.Is(err, storage.ErrNotExist) {
		return Batch{}, fmt.Errorf("%w: %s/%s is missing (Spark's recovery needs it too)", ErrCorrupt, c.store.URI(), key)
	}
	if err != nil {
		return Batch{}, fmt.Errorf("stat %s/%s: %w", c.store.URI(), key, err)
	}
	return c.readBatch(ctx, id, info)
}

// LastActivity is when the query last wrote its checkpoint: the newer of
// the latest offsets and commits files.
func (c *Checkpoint) LastActivity() time.Time {
	if c.CommittedAt.After(c.Latest.WrittenAt) {
		return c.CommittedAt
	}
	return c.Latest.WrittenAt
}

// End is where the query's output ends: the last batch in the table and the
// next offset to read per partition.
type End struct {
	// Batch is the last batch whose rows are in the table.
	Batch Batch
	// Why explains the choice, e.g. "commits/7 exists".
	Why string
}

// Resolve decides which batch last reached the table, as Spark's recovery
// and Delta sink would: batch N (the latest offsets file) if commits/N
// exists or the table's txn for the query id (txnVersion, when hasTxn) is
// ≥ N; otherwise batch N-1, which must then have reached the table.
func (c *Checkpoint) Resolve(ctx context.Context, txnVersion int64, hasTxn bool) (End, error) {
	n := c.Latest.ID
	txn := "no txn"
	if hasTxn {
		txn = fmt.Sprintf("txn %d", txnVersion)
	}
	switch {
	case c.Committed >= n:
		return End{Batch: c.Latest, Why: fmt.Sprintf("commits/%d exists", c.Committed)}, nil
	case hasTxn && txnVersion >= n:
		return End{Batch: c.Latest, Why: fmt.Sprintf("offsets/%d without commits/%d, and the table's txn for query %s is %d: batch %d reached the table",
			n, n, c.QueryID, txnVersion, n)}, nil
	case n == 0:
		return End{}, fmt.Errorf("%w: batch 0 was planned but the table has %s for query %s", ErrNothingCommitted, txn, c.QueryID)
	case c.Committed < n-1 && !(hasTxn && txnVersion >= n-1):
		return End{}, fmt.Errorf("%w: %s: offsets/ ends at batch %d, commits/ at %d and the table has %s for query %s: "+
			"batches before %d may be missing from the table", ErrCorrupt, c.store.URI(), n, c.Committed, txn, c.QueryID, n)
	}
	prev, err := c.Offsets(ctx, n-1)
	if err != nil {
		return End{}, err
	}
	return End{Batch: prev, Why: fmt.Sprintf("offsets/%d without commits/%d, and the table has %s for query %s: batch %d did not reach the table, batch %d did",
		n, n, txn, c.QueryID, n, n-1)}, nil
}

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i]
	}
	return b
}

func truncate(b []byte) string {
	const max = 80
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
