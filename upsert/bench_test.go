package upsert

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/messages/keylog"
	"github.com/deltaflow/deltaflow/storage"
)

// BenchmarkResolve measures resolving one epoch of 10,000 changes to
// random keys (80% updates, 10% inserts, 10% deletes) against a table of
// keys rows in files data files, each holding random keys (as a stream
// of random changes leaves them: every file's key range spans the table).
// Each iteration resolves the same epoch against the same snapshot.
func BenchmarkResolve(b *testing.B) {
	for _, size := range []struct{ keys, files int }{{100_000, 10}, {1_000_000, 50}} {
		b.Run(fmt.Sprintf("keys=%d/files=%d", size.keys, size.files), func(b *testing.B) {
			bt := newBenchTable(b, size.keys, size.files)
			rng := rand.New(rand.NewPCG(3, 4))
			ch := bt.epoch(b, 10_000, func() (int64, int) {
				id := bt.ids[rng.IntN(len(bt.ids))]
				switch r := rng.IntN(10); {
				case r == 0:
					return -1 - id, benchUpsert // an insert
				case r == 1:
					return id, benchDelete
				}
				return id, benchUpsert
			})
			b.ResetTimer()
			var res Result
			var err error
			for b.Loop() {
				if res, err = (&Table{Keys: bt.keys}).Resolve(b.Context(), bt.store, bt.snap, ch, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.FilesRead), "files-read")
			b.ReportMetric(float64(res.Replaced), "rows-replaced")
			b.ReportMetric(10_000/(b.Elapsed().Seconds()/float64(b.N)), "changes/s")
		})
	}
}

// BenchmarkResolveKeyIndex measures the key index (KeyIndex): one epoch
// of changes to random keys (hashed ids: every file's key range spans the
// table) against a table of keys rows in files files: without an index,
// with a cold one (built by the resolution's reads, as after a restart)
// and with a warm one holding every file. "new" epochs are all new keys
// (event ids), "inserts" 90% new keys and 10% updates, "updates" all
// updates; of 100, 1,000 and 10,000 changes. It reports the files whose
// keys are read, changes/s, and the index's bytes per key of the table.
func BenchmarkResolveKeyIndex(b *testing.B) {
	const keys, files = 1_000_000, 200
	bt := newBenchTable(b, keys, files)
	for _, n := range []int{100, 1_000, 10_000} {
		for _, mix := range []string{"new", "inserts", "updates"} {
			rng := rand.New(rand.NewPCG(5, uint64(n)))
			ch := bt.epoch(b, n, func() (int64, int) {
				id := bt.ids[rng.IntN(len(bt.ids))]
				if mix == "new" || mix == "inserts" && rng.IntN(10) > 0 {
					return rng.Int64(), benchUpsert // a new key (a 1-in-10^13 chance of an old one)
				}
				return id, benchUpsert
			})
			for _, index := range []string{"none", "cold", "warm"} {
				b.Run(fmt.Sprintf("keys=%d/files=%d/changes=%d/%s/index=%s", keys, files, n, mix, index), func(b *testing.B) {
					up := &Table{Keys: bt.keys}
					if index == "warm" {
						up.Index = NewKeyIndex(64 << 20)
						if _, err := up.Resolve(b.Context(), bt.store, bt.snap, ch, time.Now()); err != nil { // fills it
							b.Fatal(err)
						}
					}
					var res Result
					var err error
					for b.Loop() {
						if index == "cold" { // built by this resolution's reads, as after a restart
							up.Index = NewKeyIndex(64 << 20)
						}
						if res, err = up.Resolve(b.Context(), bt.store, bt.snap, ch, time.Now()); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(res.FilesRead), "files-read")
					b.ReportMetric(float64(n)/(b.Elapsed().Seconds()/float64(b.N)), "changes/s")
					if up.Index != nil {
						b.ReportMetric(float64(up.Index.memory())/keys, "index-B/key")
					}
				})
			}
		}
	}
}

// benchTable is a local upsert table (id long key, name, balance) of
// random ids spread over its files, for benchmarks.
type benchTable struct {
	store storage.Store
	snap  *delta.Snapshot
	data  *delta.StructType
	keys  *Keys
	ids   []int64 // the table's keys
}

// newBenchTable writes a table of keys random ids in files files.
func newBenchTable(b *testing.B, keys, files int) *benchTable {
	store, err := storage.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	data := &delta.StructType{Fields: []delta.StructField{{Name: "id", Type: delta.Long, Nullable: true},
		{Name: "name", Type: delta.String, Nullable: true}, {Name: "balance", Type: delta.Long, Nullable: true}}}
	table := delta.NewTable(store)
	snap, _, err := table.EnsureSchema(b.Context(), data, nil, map[string]string{"delta.enableDeletionVectors": "true"})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	bt := &benchTable{store: store, data: data, ids: make([]int64, keys)}
	per := keys / files
	var adds []delta.Action
	for f := range files {
		rows := make([]delta.Row, per)
		for i := range rows {
			id := rng.Int64N(1 << 62) // a hashed id
			bt.ids[f*per+i] = id
			rows[i] = delta.Row{id, fmt.Sprintf("name-%d", id), id % 1000}
		}
		add, err := delta.WriteDataFile(b.Context(), store, data, nil, nil, rows, delta.WriterOptions{})
		if err != nil {
			b.Fatal(err)
		}
		adds = append(adds, delta.Action{Add: add})
	}
	if _, err := table.Commit(b.Context(), snap, adds, delta.Operation{Name: "WRITE"}); err != nil {
		b.Fatal(err)
	}
	if bt.keys, err = NewKeys(data, []string{"id"}); err != nil {
		b.Fatal(err)
	}
	bt.snap = snap
	return bt
}

// What a benchmark epoch's change is.
const (
	benchUpsert = iota
	benchDelete
)

// epoch is n changes, each next's: the upserts written as one data file.
func (bt *benchTable) epoch(b *testing.B, n int, next func() (id int64, kind int)) Changes {
	var ch Changes
	var fileKeys keylog.Log
	var rows []delta.Row
	for i := range int64(n) {
		id, kind := next()
		key, err := bt.keys.AppendColumns(nil, []parquet.Value{parquet.Int64Value(id)})
		if err != nil {
			b.Fatal(err)
		}
		if kind == benchDelete {
			ch.Deletes.Append(key, i, i)
			continue
		}
		fileKeys.Append(key, i, i)
		rows = append(rows, delta.Row{id, "new", i})
	}
	add, err := delta.WriteDataFile(b.Context(), bt.store, bt.data, nil, nil, rows, delta.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ch.Files = []NewFile{{Add: add, Rows: &fileKeys}}
	return ch
}
