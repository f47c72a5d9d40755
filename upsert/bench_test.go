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
			ids := rng.Perm(size.keys)
			per := size.keys / size.files
			var adds []delta.Action
			for f := range size.files {
				rows := make([]delta.Row, per)
				for i := range rows {
					id := int64(ids[f*per+i])
					rows[i] = delta.Row{id, fmt.Sprintf("name-%d", id), id * 7}
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
			keys, _ := NewKeys(data, []string{"id"})
			var ch Changes
			var fileKeys keylog.Log
			var rows []delta.Row
			for i := range int64(10_000) {
				id := rng.Int64N(int64(size.keys))
				switch r := rng.IntN(10); {
				case r == 0:
					id += int64(size.keys) // an insert
				case r == 1:
					key, _ := keys.AppendColumns(nil, []parquet.Value{parquet.Int64Value(id)})
					ch.Deletes.Append(key, i, i)
					continue
				}
				key, _ := keys.AppendColumns(nil, []parquet.Value{parquet.Int64Value(id)})
				fileKeys.Append(key, i, i)
				rows = append(rows, delta.Row{id, "new", i})
			}
			add, err := delta.WriteDataFile(b.Context(), store, data, nil, nil, rows, delta.WriterOptions{})
			if err != nil {
				b.Fatal(err)
			}
			ch.Files = []NewFile{{Add: add, Rows: &fileKeys}}
			b.ResetTimer()
			var res Result
			for b.Loop() {
				if res, err = (&Table{Keys: keys}).Resolve(b.Context(), store, snap, ch, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.FilesRead), "files-read")
			b.ReportMetric(float64(res.Replaced), "rows-replaced")
			b.ReportMetric(10_000/(b.Elapsed().Seconds()/float64(b.N)), "changes/s")
		})
	}
}
