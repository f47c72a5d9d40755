package actors

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/sim"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/messages"
	"github.com/deltaflow/deltaflow/storage"
)

// TestBufferAccountsEncodedBytes: rows count against the budget at their
// mapped size until the buffer has encoded them, then at what the encoded
// file holds, so the budget follows the memory really in use.
func TestBufferAccountsEncodedBytes(t *testing.T) {
	m, err := mapping.New(mapping.DefaultConfig(), mapping.DefaultPartitionColumns)
	if err != nil {
		t.Fatal(err)
	}
	const n = 10_000
	s := sim.New(sim.Config{Seed: 1, Events: n, Span: time.Hour})
	var row mapping.Row
	rows := make([]parquet.Row, 0, n)
	var mapped int64
	for range n {
		key, value, _ := s.Next(nil)
		if err := m.Map(&mapping.Record{Topic: topic, Key: key, Value: value}, &row); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row.Values.Clone())
		mapped += int64(row.Size)
	}
	budget := NewBudget(1<<40, 2)
	cfg := &bufferConfig{store: storage.NewMem(), dataSchema: m.DataSchema(), partitionColumns: mapping.DefaultPartitionColumns,
		writer: delta.WriterOptions{RowGroupRows: 1000, PageBufferSize: streamPageSize}, budget: budget,
		health: NewHealth(), logger: slog.New(slog.DiscardHandler)}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return cfg.logger }))
	defer system.Shutdown()
	pid := system.Root.Spawn(actor.PropsFromProducer(newBuffer(cfg, 0, "k", nil)))
	defer system.Root.Stop(pid)

	budget.Add(0, mapped) // as the reader does before sending
	written := make(chan struct{})
	system.Root.Send(pid, &messages.RowBatch{Rows: rows, Bytes: mapped, Release: func() { close(written) }})
	<-written
	// All but the open row group's 0..999 rows are encoded: a fraction of
	// their mapped size, but not nothing.
	if got := budget.Bytes(); got <= 0 || got > mapped/3 {
		t.Fatalf("after writing %d rows of %d mapped bytes the budget holds %d", n, mapped, got)
	}
}
