package actors

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/failpoint"
	"github.com/deltaflow/deltaflow/messages"
	"github.com/deltaflow/deltaflow/messages/keylog"
	"github.com/deltaflow/deltaflow/storage"
	"github.com/deltaflow/deltaflow/upsert"
)

// bufferConfig is what a buffer needs; shared by the buffers of a pipeline
// except for the partition.
type bufferConfig struct {
	store            storage.Store
	dataSchema       *delta.StructType // physical names under column mapping
	tableSchema      *delta.StructType // nil: partition values keyed as configured
	partitionColumns []string
	writer           delta.WriterOptions
	// upsert, for an upsert table, encodes the rows' keys, which each
	// file reports with its rows' sequences (upsert.Table.Resolve).
	upsert    *upsert.Table
	committer *actor.PID
	budget    *Budget
	// fileMemory is what an open file's writer holds besides its rows
	// (delta.FileWriter.FixedMemory), which the reader reserves in the
	// budget for each file it makes a buffer open.
	fileMemory int64
	health     *Health
	metrics    *Metrics
	retry      retryPolicy // uploads, before the epoch fails
	logger     *slog.Logger
	// beforeRows, if set, runs before a batch is written: tests inject
	// panics here.
	beforeRows func(key string)
}

// epochFile is the Parquet file a buffer is writing for one epoch. It is
// encoded into memory as rows arrive (row groups are compressed as they
// fill), and uploaded whole on Flush.
type epochFile struct {
	epoch  uint64
	out    chunkFile
	w      *delta.FileWriter
	fixed  int64 // the writer's fixed memory, while open
	rows   int64 // rows written
	mapped int64 // their mapped size (RowBatch.Bytes)
	budget int64 // bytes accounted in the Budget
	// keys are the rows' keys and sequences, for an upsert table.
	keys *keylog.Log
}

// footprint is what the file holds in memory: its encoded bytes (whole
// chunks), the rows of the open row group at their mapped size (the encoder
// holds them uncompressed until the group is full) and the writer's fixed
// memory, which a partition value's first row costs.
func (f *epochFile) footprint() int64 {
	open := int64(f.w.BufferedRows())
	if f.rows > 0 {
		open = open * f.mapped / f.rows
	}
	return int64(f.out.Cap()) + open + f.fixed + f.keys.Memory()
}

// bufferMemory is what a buffer costs while it lives, files aside: the
// actor, its mailbox and its entries in the registry and the readers'
// routes (measured: ~1.6 KiB), and its key.
func bufferMemory(key string) int64 { return 2<<10 + 3*int64(len(key)) }

// buffer holds the rows of one partition value (e.g.
// device_type=smart_plug/event_date=2026-06-22) until Flush.
type buffer struct {
	cfg    *bufferConfig
	gen    uint64
	id     string // unique per spawn; names the buffer in Flushed
	key    string // partition directory
	values map[string]*string
	files  []*epochFile // ascending epoch
	// scratch is where an upsert table's row keys are encoded.
	scratch []byte
	ctx     context.Context
	cancel  context.CancelFunc
}

func newBuffer(cfg *bufferConfig, gen uint64, key string, values map[string]*string) actor.Producer {
	return func() actor.Actor {
		return &buffer{cfg: cfg, gen: gen, key: key, values: values}
	}
}

func (b *buffer) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		b.id = c.Self().Id // the committer tracks flushes by PID id
		b.ctx, b.cancel = context.WithCancel(context.Background())
	case *messages.RowBatch:
		b.handleRows(m)
	case *messages.Flush:
		b.handleFlush(c, m)
	case *actor.Stopping:
		// Dropped rows (an aborted pipeline, or an idle buffer with none)
		// give their memory back; uploads in flight are cancelled.
		b.cancel()
		for _, f := range b.files {
			b.cfg.budget.Release(b.gen, f.budget)
		}
		b.files = nil
		b.cfg.budget.Release(b.gen, bufferMemory(b.key)) // counted by the pipeline at spawn
	}
}

func (b *buffer) handleRows(m *messages.RowBatch) {
	defer m.Release()
	if m.Gen != b.gen {
		b.cfg.budget.Release(m.Gen, m.Bytes+m.Reserved)
		return
	}
	if b.cfg.beforeRows != nil {
		b.cfg.beforeRows(b.key)
	}
	f := b.file(m.Epoch)
	if _, err := f.w.WriteRows(m.Rows); err != nil {
		// The mapper built a row the schema does not accept: a bug, which
		// the supervisor turns into a pipeline rebuild.
		panic(fmt.Errorf("buffer %s: write rows of epoch %d: %w", b.key, m.Epoch, err))
	}
	if b.cfg.upsert != nil {
		b.logKeys(f, m)
	}
	// The reader counted the rows at their mapped size, and reserved the
	// writer's fixed memory if they were its first of the epoch; once
	// encoded the rows cost what the file grew by, typically a fraction of
	// it, and the reservation is kept only by the file it opened.
	f.rows += int64(len(m.Rows))
	f.mapped += m.Bytes
	now := f.footprint()
	b.cfg.budget.Adjust(b.gen, now-f.budget-m.Bytes-m.Reserved)
	f.budget = now
}

// logKeys records the keys of rows just written to f, with their
// sequences and offsets. The reader sent no row with a null key or
// sequence column.
func (b *buffer) logKeys(f *epochFile, m *messages.RowBatch) {
	if f.keys == nil {
		f.keys = new(keylog.Log)
	}
	for i, row := range m.Rows {
		var err error
		if b.scratch, err = b.cfg.upsert.Keys.AppendRow(b.scratch[:0], row); err != nil {
			panic(fmt.Errorf("buffer %s: epoch %d: %w", b.key, m.Epoch, err))
		}
		seq := m.Offsets[i]
		if seqs := b.cfg.upsert.Sequence; seqs != nil {
			if seq, err = seqs.Row(row); err != nil {
				panic(fmt.Errorf("buffer %s: epoch %d: %w", b.key, m.Epoch, err))
			}
		}
		f.keys.Append(b.scratch, seq, m.Offsets[i])
	}
}

// file returns the open file of epoch, creating it.
func (b *buffer) file(epoch uint64) *epochFile {
	if n := len(b.files); n > 0 && b.files[n-1].epoch == epoch {
		return b.files[n-1]
	}
	f := &epochFile{epoch: epoch}
	w, err := delta.NewFileWriter(&f.out, b.cfg.dataSchema, b.cfg.writer.WithPartitionValues(b.physicalValues()))
	if err != nil {
		panic(fmt.Errorf("buffer %s: %w", b.key, err))
	}
	f.w = w
	f.fixed = w.FixedMemory()
	b.files = append(b.files, f)
	return f
}

// handleFlush finishes the files of epochs up to m.Epoch and uploads them in
// the background; the buffer goes on taking rows of later epochs meanwhile.
func (b *buffer) handleFlush(c actor.Context, m *messages.Flush) {
	if m.Gen != b.gen {
		return
	}
	var done []*epochFile
	for len(b.files) > 0 && b.files[0].epoch <= m.Epoch {
		done = append(done, b.files[0])
		b.files = b.files[1:]
	}
	reply := &messages.Flushed{Gen: b.gen, Epoch: m.Epoch, Buffer: b.id}
	if len(done) == 0 {
		reply.Idle = true
		c.Send(b.cfg.committer, reply)
		return
	}
	type encoded struct {
		data  *chunkFile
		stats delta.FileStats
		keys  *keylog.Log
	}
	var files []encoded
	var accounted int64
	for _, f := range done {
		st, err := f.w.Close()
		if err != nil {
			panic(fmt.Errorf("buffer %s: finish file of epoch %d: %w", b.key, f.epoch, err))
		}
		files = append(files, encoded{&f.out, st, f.keys})
		// Closed, the file holds its encoded chunks (and keys) only: the
		// writer's memory and the open rows' are given back now, the
		// chunks once uploaded.
		held := int64(f.out.Cap()) + f.keys.Memory()
		b.cfg.budget.Adjust(b.gen, held-f.budget)
		accounted += held
	}
	ctx, system, committer := b.ctx, c.ActorSystem(), b.cfg.committer
	go func() {
		defer b.cfg.budget.Release(b.gen, accounted)
		for _, f := range files {
			df, err := b.upload(ctx, f.data, f.stats)
			if err != nil {
				reply.Err = err
				break
			}
			df.Keys = f.keys
			reply.Files = append(reply.Files, df)
		}
		system.Root.Send(committer, reply)
	}()
}

// physicalValues are the buffer's partition values keyed by physical name,
// as add actions and materialized partition columns take them.
func (b *buffer) physicalValues() map[string]*string {
	if b.cfg.tableSchema == nil {
		return b.values
	}
	return delta.PhysicalPartitionValues(b.cfg.tableSchema, b.values)
}

// upload writes one finished file, retrying failures that are not permanent;
// the file stays invisible until the committer commits its add.
func (b *buffer) upload(ctx context.Context, data *chunkFile, st delta.FileStats) (messages.DataFile, error) {
	key := delta.NewDataFileKey(b.cfg.partitionColumns, b.values, b.cfg.writer.Compression)
	size := int64(data.Len())
	err := retry(ctx, b.cfg.retry, func() error {
		// Release builds pass data's reader through (it has ReadAt and Seek,
		// so minio-go sends parts without buffering a copy).
		body := failpoint.Reader(failpoint.Upload, data.Reader(), size/2)
		return b.cfg.store.PutStream(ctx, key, body, size)
	}, storageRetrying(b.cfg.metrics, b.cfg.health, b.cfg.logger, "upload", "file", key))
	if err != nil {
		return messages.DataFile{}, fmt.Errorf("upload %s: %w", key, err)
	}
	b.cfg.health.Recover("storage")
	return messages.DataFile{
		Path: delta.EncodePath(key), Size: size, PartitionValues: b.physicalValues(),
		ModificationTime: time.Now().UnixMilli(), Stats: st.Stats, Rows: st.NumRecords,
	}, nil
}
