package delta

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// Benchmarks of the log: opening a long table and committing. They need
// real storage (local disk, MinIO when configured) and are not run in CI:
//
//	go test ./delta -run '^$' -bench 'OpenTable|CommitLatency' -benchtime 20x

const benchCommits = 10_000

// buildLongLog writes versions 1..n after Create, each one small fake add
// and a txn, checkpointing every 10 versions as the engine does.
func buildLongLog(b *testing.B, store storage.Store, n int) {
	b.Helper()
	start := time.Now()
	tbl := NewTable(store)
	s, err := tbl.Create(b.Context(), testSchema(), []string{"part"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if _, err := tbl.Commit(b.Context(), s, []Action{
			{Add: fakeAdd(fmt.Sprintf("part=a/f%06d.parquet", i), str("a"))},
			{Txn: &Txn{AppID: "bench", Version: int64(i)}},
		}, Operation{Name: "STREAMING UPDATE"}); err != nil {
			b.Fatal(err)
		}
		if s.CheckpointDue() {
			if err := tbl.Checkpoint(b.Context(), s); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Logf("built %d commits on %s in %s", n, store.URI(), time.Since(start).Round(time.Millisecond))
}

// copyStore copies every object of src into dst, a few at a time.
func copyStore(b *testing.B, src, dst storage.Store) {
	b.Helper()
	objs, err := src.List(b.Context(), "", "")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for _, o := range objs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			data, err := src.Get(b.Context(), o.Key)
			if err == nil {
				err = dst.Put(b.Context(), o.Key, data)
			}
			if err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
}

func benchOpen(b *testing.B, store storage.Store) {
	for b.Loop() {
		s, err := NewTable(store).Snapshot(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if s.Version() != benchCommits || s.NumFiles() != benchCommits || s.CheckpointVersion() != benchCommits {
			b.Fatalf("version %d, %d files, checkpoint %d", s.Version(), s.NumFiles(), s.CheckpointVersion())
		}
	}
}

// BenchmarkOpenTable10kCommits: load the latest snapshot of a table of 10,000
// commits (one add and a txn each) with a checkpoint every 10 versions.
// Goal: well under a second.
func BenchmarkOpenTable10kCommits(b *testing.B) {
	dir := b.TempDir() // b.Loop runs this function once, so it is built once
	local := localStore(b, dir)
	buildLongLog(b, local, benchCommits)
	b.Run("local", func(b *testing.B) { benchOpen(b, local) })
	b.Run("minio", func(b *testing.B) {
		cfg := testenv.MinIO(b)
		s3, err := storage.NewS3(cfg)
		if err != nil {
			b.Fatal(err)
		}
		copyStore(b, local, s3) // same log, built at disk speed
		benchOpen(b, s3)
	})
}

func benchCommit(b *testing.B, store storage.Store) {
	tbl := NewTable(store)
	s, err := tbl.Create(b.Context(), testSchema(), []string{"part"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	start := time.Now()
	for b.Loop() {
		i++
		if _, err := tbl.Commit(b.Context(), s, []Action{
			{Add: fakeAdd(fmt.Sprintf("part=a/f%06d.parquet", i), str("a"))},
			{Txn: &Txn{AppID: "bench", Version: int64(i)}},
		}, Operation{Name: "STREAMING UPDATE"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(i), "ms/op")
}

// BenchmarkCommitLatencyMinIO: one commit (add + txn) on MinIO.
func BenchmarkCommitLatencyMinIO(b *testing.B) {
	s3, err := storage.NewS3(testenv.MinIO(b))
	if err != nil {
		b.Fatal(err)
	}
	benchCommit(b, s3)
}

// BenchmarkCommitLatencyLocal: one commit (add + txn) on local disk.
func BenchmarkCommitLatencyLocal(b *testing.B) {
	benchCommit(b, localStore(b, b.TempDir()))
}
