// Package dlqreplay writes dead letters into the table once the mapping that
// rejected them is fixed (`deltaflow dlq replay`), exactly once, and deletes
// them from the DLQ stream.
//
// A replay reads the stream in sequence order, maps each letter with the
// table's mapping as `run` would have, and commits the rows of a batch of
// letters in one commit (operation "DLQ REPLAY"). The commit carries a txn
// action of appId "<app>-dlq-<stream>" whose version counts the replay
// commits, and lists in its commitInfo the stream sequences it wrote. Only
// after the commit are those letters deleted. Letters that still fail stay
// in the stream as they are, for a later replay or a look by hand.
//
// A crash between a commit and its deletions leaves written letters in the
// stream. The next replay finds the last replay commit through the txn
// version (a concurrent replay conflicts on the same txn) and deletes the
// letters it lists instead of writing them again: a letter reaches the table
// once, whatever stops the replay.
package dlqreplay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/mapping"
)

// Operation is the commitInfo operation of a replay commit.
const Operation = "DLQ REPLAY"

// Defaults of Options.
const (
	DefaultBatchLetters = 10_000
	DefaultBatchBytes   = 64 << 20
	DefaultMaxOpenFiles = 64
	// maxListedFailures bounds Result.Failures; FailedCount counts all.
	maxListedFailures = 100
)

// Source is the DLQ stream a replay reads and deletes from
// (*bridge.DLQReader).
type Source interface {
	Name() string
	// Letters calls fn with each letter from sequence from on, in order,
	// up to the last stored when it began.
	Letters(ctx context.Context, from uint64, fn func(bridge.StoredLetter) error) error
	// Delete removes one letter; one already gone is no error.
	Delete(ctx context.Context, seq uint64) error
}

// Target is the table the letters go to, opened as `run` opens it.
type Target struct {
	Table    *delta.Table
	Snapshot *delta.Snapshot // advances with each commit
	Mapper   *mapping.Mapper
	Writer   delta.WriterOptions
	// Schemas fetches the writer schemas the Mapper lacks, for a table
	// reading a schema registry (nil otherwise).
	Schemas SchemaFetcher
}

// SchemaFetcher fetches a writer schema a record names (a
// *schemareg.Registry), waiting out a registry that does not answer until
// ctx ends.
type SchemaFetcher interface {
	Fetch(ctx context.Context, id int, retrying func(error)) error
}

// schemaWait bounds how long a letter waits for its writer schema: a
// registry down longer leaves the letter in the stream.
const schemaWait = 30 * time.Second

// Options shape a replay.
type Options struct {
	App string // table.app_id: the txn appId prefix
	// BatchLetters and BatchBytes (of letter values) bound one commit and
	// the memory it holds; MaxOpenFiles bounds the partition values one
	// commit writes. Zero takes the defaults.
	BatchLetters int
	BatchBytes   int
	MaxOpenFiles int
	// DryRun maps every letter and reports, writing and deleting nothing.
	DryRun bool
}

// Failure is a letter that still fails; it stays in the stream.
type Failure struct {
	Seq       uint64 `json:"seq"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Reason    string `json:"reason"`
}

// Result is what a replay did (or, dry, would do).
type Result struct {
	Stream string `json:"stream"`
	AppID  string `json:"txnAppId"`
	// Letters is how many letters were read.
	Letters int `json:"letters"`
	// Replayed letters are in the table now (one row each).
	Replayed int `json:"replayed"`
	// Duplicates are further letters of a record replayed already
	// (deleted, not written again).
	Duplicates int `json:"duplicates"`
	// Cleaned letters had been written by an interrupted replay; they were
	// only deleted.
	Cleaned     int       `json:"cleaned"`
	FailedCount int       `json:"failed"`
	Failures    []Failure `json:"failures"` // the first maxListedFailures
	Files       int       `json:"files"`
	Bytes       int64     `json:"bytes"`
	Versions    []int64   `json:"versions"` // the replay commits
}

// AppID is the txn appId a replay of stream records its commits under.
func AppID(app, stream string) string { return app + "-dlq-" + stream }

// Run replays src into t.
func Run(ctx context.Context, t Target, src Source, opts Options) (*Result, error) {
	r := &replay{t: t, src: src, opts: opts.withDefaults(), appID: AppID(opts.App, src.Name()), seen: map[string]bool{}}
	r.res = &Result{Stream: src.Name(), AppID: r.appID, Failures: []Failure{}, Versions: []int64{}}
	schema, err := t.Snapshot.Schema()
	if err != nil {
		return nil, fmt.Errorf("table schema: %w", err)
	}
	r.tableSchema = schema
	if r.dataSchema, err = delta.MapColumns(schema, t.Mapper.DataSchema()); err != nil {
		return nil, err
	}
	if err := r.findInterrupted(ctx); err != nil {
		return nil, err
	}
	r.start()
	err = src.Letters(ctx, 0, func(l bridge.StoredLetter) error { return r.letter(ctx, l) })
	if err == nil {
		err = r.commit(ctx)
	}
	return r.res, err
}

func (o Options) withDefaults() Options {
	if o.BatchLetters <= 0 {
		o.BatchLetters = DefaultBatchLetters
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	if o.MaxOpenFiles <= 0 {
		o.MaxOpenFiles = DefaultMaxOpenFiles
	}
	return o
}

type replay struct {
	t                       Target
	src                     Source
	opts                    Options
	appID                   string
	tableSchema, dataSchema *delta.StructType
	res                     *Result

	// interrupted are the sequences the last replay commit wrote: those
	// still in the stream are deleted, not written again.
	interrupted map[uint64]bool
	// seen are the message ids (Kafka topic/partition/offset/topic id) of
	// the letters replayed by this run.
	seen map[string]bool

	// The batch being written.
	files   map[string]*openFile // by partition directory
	written []uint64             // sequences in the batch's files
	dups    []uint64             // duplicates to delete with the batch
	bytes   int
	row     mapping.Row
	one     []parquet.Row
}

type openFile struct {
	values map[string]*string // by display name
	buf    bytes.Buffer
	w      *delta.FileWriter
}

// findInterrupted reads the sequences of the last replay commit when the
// table has one.
func (r *replay) findInterrupted(ctx context.Context) error {
	v, ok := r.t.Snapshot.TxnVersion(r.appID)
	if !ok {
		return nil
	}
	want := strconv.FormatInt(v, 10)
	for limit := 64; ; limit *= 8 {
		h, err := r.t.Table.History(ctx, limit)
		if err != nil {
			return fmt.Errorf("find the last replay commit: %w", err)
		}
		for _, e := range h {
			p := e.OperationParameters
			if e.Operation != Operation || p["txnAppId"] != r.appID || p["txnVersion"] != want {
				continue
			}
			seqs, err := parseRanges(fmt.Sprint(p["sequences"]))
			if err != nil {
				return fmt.Errorf("replay commit version %d: sequences: %w", e.Version, err)
			}
			r.interrupted = seqs
			return nil
		}
		if len(h) < limit {
			return fmt.Errorf("the table's last replay of %s (txn %s version %d) is no longer in its log: "+
				"its letters may still be in the stream; delete those already in the table by hand", r.src.Name(), r.appID, v)
		}
	}
}

// start begins a batch.
func (r *replay) start() {
	r.files, r.written, r.dups, r.bytes = map[string]*openFile{}, r.written[:0], r.dups[:0], 0
	r.t.Mapper.StartBatch()
}

// letter handles one letter of the stream.
func (r *replay) letter(ctx context.Context, l bridge.StoredLetter) error {
	r.res.Letters++
	switch {
	case r.interrupted[l.Seq]:
		r.res.Cleaned++
		if r.opts.DryRun {
			return nil
		}
		return r.src.Delete(ctx, l.Seq)
	case !l.Whole():
		r.fail(l, "truncated in the DLQ (its value or key did not fit): replay it from Kafka while retained (deltaflow seek)")
		return nil
	case r.seen[l.MsgID()]:
		r.res.Duplicates++
		r.dups = append(r.dups, l.Seq)
		return nil
	}
	rec := mapping.Record{Topic: l.Topic, Partition: l.Partition, Offset: l.Offset, Key: l.Key, Value: l.Value}
	if l.Timestamp != 0 {
		rec.Timestamp = time.UnixMilli(l.Timestamp)
	}
	if err := r.mapLetter(ctx, &rec); err != nil {
		r.fail(l, err.Error())
		return nil
	}
	r.seen[l.MsgID()] = true
	r.res.Replayed++
	if r.opts.DryRun {
		return nil
	}
	return r.write(ctx, l)
}

// mapLetter maps rec into r.row, fetching its writer schema first when it
// is one the mapper does not have.
func (r *replay) mapLetter(ctx context.Context, rec *mapping.Record) error {
	err := r.t.Mapper.Map(rec, &r.row)
	pending, ok := errors.AsType[*mapping.SchemaPendingError](err)
	if !ok || r.t.Schemas == nil {
		return err
	}
	fctx, cancel := context.WithTimeout(ctx, schemaWait)
	defer cancel()
	var last error
	if err := r.t.Schemas.Fetch(fctx, pending.ID, func(err error) { last = err }); err != nil {
		return fmt.Errorf("schema id %d: %w (last: %v)", pending.ID, err, last)
	}
	return r.t.Mapper.Map(rec, &r.row)
}

func (r *replay) fail(l bridge.StoredLetter, reason string) {
	r.res.FailedCount++
	if len(r.res.Failures) < maxListedFailures {
		r.res.Failures = append(r.res.Failures, Failure{Seq: l.Seq, Partition: l.Partition, Offset: l.Offset, Reason: reason})
	}
}

// write adds the mapped row to its partition's file, committing the batch
// first when it is full.
func (r *replay) write(ctx context.Context, l bridge.StoredLetter) error {
	f := r.files[string(r.row.Key)]
	if f == nil && len(r.files) == r.opts.MaxOpenFiles || len(r.written) == r.opts.BatchLetters || r.bytes+len(l.Value) > r.opts.BatchBytes && len(r.written) > 0 {
		if err := r.commit(ctx); err != nil {
			return err
		}
		r.start()
		f = nil
	}
	if f == nil {
		var err error
		if f, err = r.open(); err != nil {
			return err
		}
		r.files[string(r.row.Key)] = f
	}
	r.one = append(r.one[:0], r.row.Values)
	if _, err := f.w.WriteRows(r.one); err != nil {
		return fmt.Errorf("dlq letter %d: write its row: %w", l.Seq, err)
	}
	r.row.Arena.Reset() // the writer copied the row's bytes
	r.written = append(r.written, l.Seq)
	r.bytes += len(l.Value)
	return nil
}

// open starts the file of the current row's partition.
func (r *replay) open() (*openFile, error) {
	f := &openFile{values: map[string]*string{}}
	for i, c := range r.t.Mapper.PartitionColumns() {
		if v := r.row.PartitionValues[i]; v != nil {
			s := strings.Clone(*v)
			f.values[c] = &s
		} else {
			f.values[c] = nil
		}
	}
	w, err := delta.NewFileWriter(&f.buf, r.dataSchema, r.t.Writer.WithPartitionValues(delta.PhysicalPartitionValues(r.tableSchema, f.values)))
	if err != nil {
		return nil, err
	}
	f.w = w
	return f, nil
}

// commit uploads the batch's files, commits them with the replay's txn and
// the sequences they hold, then deletes those letters from the stream.
func (r *replay) commit(ctx context.Context) error {
	if r.opts.DryRun || len(r.written) == 0 && len(r.dups) == 0 {
		return nil
	}
	next := int64(0)
	if v, ok := r.t.Snapshot.TxnVersion(r.appID); ok {
		next = v + 1
	}
	parts := r.t.Mapper.PartitionColumns()
	var actions []delta.Action
	var rows, size int64
	for _, dir := range slices.Sorted(maps.Keys(r.files)) {
		f := r.files[dir]
		st, err := f.w.Close()
		if err != nil {
			return fmt.Errorf("finish the file of %s: %w", dir, err)
		}
		key := delta.NewDataFileKey(parts, f.values, r.t.Writer.Compression)
		if err := r.t.Table.Store().PutStream(ctx, key, bytes.NewReader(f.buf.Bytes()), int64(f.buf.Len())); err != nil {
			return fmt.Errorf("upload %s: %w", key, err)
		}
		actions = append(actions, delta.Action{Add: &delta.Add{
			Path: delta.EncodePath(key), PartitionValues: delta.PhysicalPartitionValues(r.tableSchema, f.values),
			Size: st.Size, ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: st.Stats,
		}})
		rows += st.NumRecords
		size += st.Size
	}
	r.files = nil
	actions = append(actions, delta.Action{Txn: &delta.Txn{AppID: r.appID, Version: next}})
	op := delta.Operation{Name: Operation,
		Parameters: map[string]any{"stream": r.src.Name(), "txnAppId": r.appID, "txnVersion": strconv.FormatInt(next, 10),
			"sequences": formatRanges(r.written)},
		Metrics: map[string]any{"numFiles": strconv.Itoa(len(actions) - 1), "numOutputRows": strconv.FormatInt(rows, 10),
			"numOutputBytes": strconv.FormatInt(size, 10), "numDuplicateLetters": strconv.Itoa(len(r.dups))},
	}
	v, err := r.t.Table.Commit(ctx, r.t.Snapshot, actions, op)
	var conflict *delta.ConflictError
	if errors.As(err, &conflict) && conflict.AppID == r.appID {
		return fmt.Errorf("another replay of %s committed meanwhile (version %d): run again once it ends", r.src.Name(), conflict.Version)
	}
	if err != nil {
		return fmt.Errorf("commit the replay of %d letters: %w", len(r.written), err)
	}
	r.res.Versions = append(r.res.Versions, v)
	r.res.Files += len(actions) - 1
	r.res.Bytes += size
	for _, seq := range slices.Concat(r.written, r.dups) {
		if err := r.src.Delete(ctx, seq); err != nil {
			return fmt.Errorf("committed as version %d, but: %w (the next replay deletes it)", v, err)
		}
	}
	return nil
}
