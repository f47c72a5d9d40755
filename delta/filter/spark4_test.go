package filter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/storage"
)

// TestSparkQueriesSkipNoMatchingRow: on the delta-spark 4 fixtures whose
// stats mislead a naive reader (delta/testdata/spark4-features: columns
// dropped and added again under column mapping; types widened, FLOAT→DOUBLE
// among them), every query counts the rows Spark counts without data
// skipping, and no file skipped by its stats holds a matching row.
func TestSparkQueriesSkipNoMatchingRow(t *testing.T) {
	for _, name := range []string{"colmap-readd", "typewidening"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "testdata", "spark4-features", name)
			data, err := os.ReadFile(filepath.Join(dir, "expected.json"))
			if err != nil {
				t.Fatal(err)
			}
			var exp struct {
				Queries []struct {
					Where string `json:"where"`
					Count int    `json:"count"`
				} `json:"queries"`
			}
			if err := json.Unmarshal(data, &exp); err != nil || len(exp.Queries) == 0 {
				t.Fatalf("expected.json: %v, %d queries", err, len(exp.Queries))
			}
			store, err := storage.NewLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			tbl := delta.NewTable(store)
			s, err := tbl.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			schema, err := s.Schema()
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range exp.Queries {
				e, err := Parse(q.Where)
				if err != nil {
					t.Fatal(err)
				}
				b, err := Bind(e, schema, s.PartitionColumns())
				if err != nil {
					t.Fatal(err)
				}
				got := 0
				for _, a := range s.Files() {
					st, err := s.FileStats(a)
					if err != nil {
						t.Fatalf("%s: %v", a.Path, err)
					}
					skipped := !b.MayMatch(st)
					rows, err := delta.ReadDataFile(t.Context(), store, schema, s.PartitionColumns(), a)
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range rows {
						if ok, _ := b.MatchPartition(s.PartitionValues(a)); ok && b.Match(r) {
							if skipped {
								t.Errorf("%s: stats skip %s, which holds the matching row %v (stats %s)", q.Where, a.Path, r, a.Stats)
								continue
							}
							got++
						}
					}
				}
				if got != q.Count {
					t.Errorf("%s: %d rows, Spark counts %d", q.Where, got, q.Count)
				}
			}
		})
	}
}
