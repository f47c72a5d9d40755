package delta

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// planTable commits fake files of the given sizes, per partition value ("" is
// null), and returns the snapshot.
func planTable(t *testing.T, files map[string][]int64) *Snapshot {
	t.Helper()
	tbl, s := newTestTable(t, storage.NewMem())
	var actions []Action
	for part, sizes := range files {
		pv := str(part)
		if part == "" {
			pv = nil
		}
		for i, size := range sizes {
			a := fakeAdd(fmt.Sprintf("part=%s/f%d-%d.parquet", part, i, size), pv)
			a.Size = size
			actions = append(actions, Action{Add: a})
		}
	}
	// Files the store cannot read: not planned.
	for i, p := range []string{"file:///elsewhere/f.parquet", "part=b/bad%zz.parquet"} {
		a := fakeAdd(p, str("b"))
		a.Size = int64(60 + i)
		actions = append(actions, Action{Add: a})
	}
	dv := fakeAdd("part=a/with-dv.parquet", str("a"))
	dv.Size = 10
	dv.DeletionVector = &DeletionVector{StorageType: "i", PathOrInlineDv: "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{r", SizeInBytes: 40, Cardinality: 6}
	actions = append(actions, Action{Add: dv})
	if _, err := tbl.Commit(t.Context(), s, actions, Operation{Name: "WRITE"}); err != nil {
		t.Fatal(err)
	}
	return s
}

func binSizes(bins []OptimizeBin) map[string][][]int64 {
	out := map[string][][]int64{}
	for _, b := range bins {
		var sizes []int64
		for _, f := range b.Files {
			sizes = append(sizes, f.Size)
		}
		part := "null"
		if p := b.PartitionValues["part"]; p != nil {
			part = *p
		}
		out[part] = append(out[part], sizes)
	}
	return out
}

func TestPlanOptimize(t *testing.T) {
	s := planTable(t, map[string][]int64{
		"a": {500, 100, 400, 200, 300, 1000, 2000, 999},
		"b": {50},             // alone: nothing to compact it with (planTable adds two it cannot read)
		"c": {600, 700, 800},  // no two fit together
		"":  {20, 10},         // the null partition is a partition too
		"d": {1000, 1000, 30}, // at the target: left alone
	})
	const target = 1000
	bins := PlanOptimize(s, OptimizeOptions{TargetSize: target})
	got := binSizes(bins)
	want := map[string][][]int64{
		"a":    {{10, 100, 200, 300}, {400, 500}}, // the 10-byte file has a DV: rewritten with it applied
		"null": {{10, 20}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("bins %v, want %v", got, want)
	}
	seen := map[string]bool{}
	for _, b := range bins {
		var sum int64
		for _, f := range b.Files {
			sum += f.Size
			if seen[f.Path] || f.Size >= target {
				t.Errorf("%s planned wrongly (twice or big)", f.Path)
			}
			seen[f.Path] = true
			if PartitionDir([]string{"part"}, f.PartitionValues) != PartitionDir([]string{"part"}, b.PartitionValues) {
				t.Errorf("%s is not of its bin's partition", f.Path)
			}
		}
		if sum != b.Bytes || sum > target || len(b.Files) < 2 {
			t.Errorf("bin of %d files, %d bytes (says %d)", len(b.Files), sum, b.Bytes)
		}
	}
	// The default target swallows every small file of a partition.
	if got := binSizes(PlanOptimize(s, OptimizeOptions{}))["a"]; len(got) != 1 || len(got[0]) != 9 {
		t.Errorf("default target: bins of a %v", got)
	}
	// The filter limits the partitions.
	onlyA := func(pv map[string]*string) bool { return pv["part"] != nil && *pv["part"] == "a" }
	if got := binSizes(PlanOptimize(s, OptimizeOptions{TargetSize: target, Filter: onlyA})); fmt.Sprint(got) != fmt.Sprint(map[string][][]int64{"a": want["a"]}) {
		t.Errorf("filtered: %v", got)
	}
	// A dry run plans and changes nothing.
	res, err := NewTable(storage.NewMem()).Optimize(t.Context(), s, OptimizeOptions{TargetSize: target, DryRun: true})
	if err != nil || res.Version != -1 || len(res.Bins) != 3 || s.Version() != 1 {
		t.Fatalf("dry run: %+v %v", res, err)
	}
}

// writeRows writes one data file of ids [from, from+n) in partition part.
func writeRows(t *testing.T, store storage.Store, part string, from, n int) *Add {
	t.Helper()
	rows := make([]Row, n)
	for i := range rows {
		id := int64(from + i)
		rows[i] = Row{id, nil, float64(id) / 2}
	}
	add, err := WriteDataFile(t.Context(), store, testSchema(), []string{"part"}, map[string]*string{"part": str(part)}, rows, WriterOptions{})
	if err != nil {
		t.Error(err) // may run off the test goroutine
		return nil
	}
	return add
}

// rowsTable is a new local table of n files, one commit each, of 10 rows of
// partition "a" with ids 0 to 10n-1.
func rowsTable(t *testing.T, n int) (*storage.Local, *Table, *Snapshot) {
	t.Helper()
	store := localStore(t, t.TempDir())
	tbl, s := newTestTable(t, store)
	for i := range n {
		if _, err := tbl.Commit(t.Context(), s, []Action{{Add: writeRows(t, store, "a", i*10, 10)}}, Operation{Name: "WRITE"}); err != nil {
			t.Fatal(err)
		}
	}
	return store, tbl, s
}

// readCommit reads and parses the commit file of version v.
func readCommit(t *testing.T, store storage.Store, v int64) []Action {
	t.Helper()
	data, err := store.Get(t.Context(), CommitKey(v))
	if err != nil {
		t.Fatal(err)
	}
	actions, err := ParseActions(CommitKey(v), data)
	if err != nil {
		t.Fatal(err)
	}
	return actions
}

// countIDs reads every live file and counts each id.
func countIDs(t *testing.T, tbl *Table, s *Snapshot) map[int64]int {
	t.Helper()
	counts := map[int64]int{}
	for _, a := range s.Files() {
		rows, err := ReadDataFile(t.Context(), tbl.Store(), testSchema(), s.PartitionColumns(), a)
		if err != nil {
			t.Fatalf("read %s: %v", a.Path, err)
		}
		for _, r := range rows {
			counts[r[0].(int64)]++
		}
	}
	return counts
}

// TestOptimizeRacingAppends: OPTIMIZE commits past concurrent blind appends
// of real files; afterwards every row is there exactly once and the
// compacted files are gone from the live set.
// TestPlanOptimizePurgesDeletedRows: a file whose deletion vector deletes
// more than MaxDeletedRatio of its rows is rewritten whatever its size,
// alone if need be; one under the ratio is left as bin-packing says.
func TestPlanOptimizePurgesDeletedRows(t *testing.T) {
	tbl, s := newTestTable(t, storage.NewMem())
	withDV := func(path string, size, deleted int64) *Add {
		a := fakeAdd(path, str("a"))
		a.Size, a.Stats = size, `{"numRecords":100}`
		a.DeletionVector = &DeletionVector{StorageType: "u", PathOrInlineDv: "ab^-aqEH.-t@S}K{vb[*k^", SizeInBytes: 40, Cardinality: deleted}
		return a
	}
	actions := []Action{
		{Add: withDV("part=a/big-10pct.parquet", 5000, 10)},  // over the target, 10% deleted: purged alone
		{Add: withDV("part=a/big-2pct.parquet", 5000, 2)},    // 2%: left alone
		{Add: withDV("part=a/small-50pct.parquet", 200, 50)}, // alone in its bin, but purged
	}
	if _, err := tbl.Commit(t.Context(), s, actions, Operation{Name: "WRITE"}); err != nil {
		t.Fatal(err)
	}
	planned := func(opts OptimizeOptions) []string {
		var out []string
		for _, b := range PlanOptimize(s, opts) {
			var paths []string
			for _, f := range b.Files {
				paths = append(paths, f.Path)
			}
			out = append(out, strings.Join(paths, "+"))
		}
		slices.Sort(out)
		return out
	}
	want := []string{"part=a/big-10pct.parquet", "part=a/small-50pct.parquet"}
	if got := planned(OptimizeOptions{TargetSize: 1000}); !slices.Equal(got, want) {
		t.Errorf("bins %v, want %v", got, want)
	}
	if got := planned(OptimizeOptions{TargetSize: 1000, MaxDeletedRatio: 0.01}); len(got) != 3 {
		t.Errorf("at 1%%: bins %v, want each file alone", got)
	}
	if got := planned(OptimizeOptions{TargetSize: 1000, MaxDeletedRatio: 2}); len(got) != 0 {
		t.Errorf("never purging: bins %v, want none", got)
	}
}

func TestOptimizeRacingAppends(t *testing.T) {
	for name, newStore := range map[string]func(t *testing.T) (storage.Store, string){
		"local": func(t *testing.T) (storage.Store, string) {
			dir := t.TempDir()
			return localStore(t, dir), dir
		},
		"minio": func(t *testing.T) (storage.Store, string) {
			cfg := testenv.MinIO(t)
			s, err := storage.NewS3(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return s, "s3://" + cfg.Bucket
		},
	} {
		t.Run(name, func(t *testing.T) {
			store, uri := newStore(t)
			ctx := t.Context()
			tbl, s := newTestTable(t, store)
			const seedFiles, rowsPerFile, writers, commitsPerWriter = 12, 20, 4, 6
			id := 0
			for i := range seedFiles {
				add := writeRows(t, store, []string{"a", "b"}[i%2], id, rowsPerFile)
				id += rowsPerFile
				if _, err := tbl.Commit(ctx, s, []Action{{Add: add}}, Operation{Name: "WRITE"}); err != nil {
					t.Fatal(err)
				}
			}
			readVersion := s.Version()

			var wg sync.WaitGroup
			var landed atomic.Int64
			appended := make(chan struct{}) // closed once a few appends landed
			var once sync.Once
			for w := range writers {
				from := id + w*commitsPerWriter*rowsPerFile
				wg.Go(func() {
					ws, err := NewTable(store).Snapshot(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					for i := range commitsPerWriter {
						add := writeRows(t, store, []string{"a", "b", "c"}[i%3], from+i*rowsPerFile, rowsPerFile)
						if add == nil {
							return
						}
						if _, err := tbl.Commit(ctx, ws, []Action{{Add: add}, {Txn: &Txn{AppID: fmt.Sprintf("w%d", w), Version: int64(i)}}},
							Operation{Name: "STREAMING UPDATE"}); err != nil {
							t.Errorf("writer %d: %v", w, err)
							return
						}
						if landed.Add(1) == writers {
							once.Do(func() { close(appended) })
						}
					}
				})
			}
			total := id + writers*commitsPerWriter*rowsPerFile
			writersDone := make(chan struct{}) // in case writers fail early
			go func() { wg.Wait(); close(writersDone) }()

			// Hold the OPTIMIZE commit until appends have landed after its
			// read version, so that it must retry past them.
			res, err := tbl.Optimize(ctx, s, OptimizeOptions{Progress: func(done, bins int, _, _ int64) {
				if done == bins {
					select {
					case <-appended:
					case <-writersDone:
					}
				}
			}})
			wg.Wait()
			if err != nil {
				t.Fatalf("optimize: %v", err)
			}
			if res.Version <= readVersion+1 {
				t.Fatalf("optimize landed at %d right after its read version %d: no race", res.Version, readVersion)
			}
			if res.FilesRemoved != seedFiles || res.FilesAdded != 2 {
				t.Fatalf("optimize removed %d, added %d", res.FilesRemoved, res.FilesAdded)
			}

			final, err := NewTable(store).Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := readVersion + 1 + writers*commitsPerWriter; final.Version() != want {
				t.Fatalf("version %d, want %d", final.Version(), want)
			}
			for _, b := range res.Bins {
				for _, f := range b.Files {
					if final.File(f.Path) != nil {
						t.Errorf("compacted %s is still live", f.Path)
					}
				}
			}
			if n := final.NumFiles(); n != 2+writers*commitsPerWriter {
				t.Errorf("%d live files, want 2 compacted + %d appended", n, writers*commitsPerWriter)
			}
			counts := countIDs(t, tbl, final)
			for i := range int64(total) {
				if counts[i] != 1 {
					t.Errorf("id %d present %d times", i, counts[i])
				}
			}
			if len(counts) != total {
				t.Errorf("%d distinct ids, wrote %d", len(counts), total)
			}

			// The OPTIMIZE commit's shape (docs/delta-notes.md §7).
			var files int
			for _, a := range readCommit(t, store, res.Version) {
				switch {
				case a.CommitInfo != nil:
					ci := a.CommitInfo
					if ci.Operation != "OPTIMIZE" || ci.IsBlindAppend == nil || *ci.IsBlindAppend || ci.ReadVersion == nil || *ci.ReadVersion != readVersion {
						t.Errorf("commitInfo %+v", ci)
					}
				case a.Add != nil:
					files++
					if a.Add.DataChange {
						t.Errorf("add %s has dataChange=true", a.Add.Path)
					}
				case a.Remove != nil:
					files++
					if a.Remove.DataChange {
						t.Errorf("remove %s has dataChange=true", a.Remove.Path)
					}
				default:
					t.Errorf("unexpected action %+v", a)
				}
			}
			if files != res.FilesAdded+res.FilesRemoved {
				t.Errorf("%d file actions, want %d", files, res.FilesAdded+res.FilesRemoved)
			}
			compareWithDeltaRS(t, NewTable(store), uri, true, "w0", "w3")
		})
	}
}

// TestOptimizeTwiceFromOneSnapshot: of two OPTIMIZEs of the same files the
// second aborts with ConflictDelete and the table is as the first left it.
func TestOptimizeTwiceFromOneSnapshot(t *testing.T) {
	ctx := t.Context()
	store, tbl, _ := rowsTable(t, 6)
	s1, _ := tbl.Snapshot(ctx)
	s2, _ := tbl.Snapshot(ctx)
	first, err := tbl.Optimize(ctx, s1, OptimizeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := NewTable(store).Snapshot(ctx)
	want := snapshotView(t, after)

	_, err = tbl.Optimize(ctx, s2, OptimizeOptions{})
	if !IsConflict(err, ConflictDelete) {
		t.Fatalf("second optimize: got %v, want a ConflictDelete", err)
	}
	got, _ := NewTable(store).Snapshot(ctx)
	if got.Version() != first.Version || snapshotView(t, got) != want {
		t.Fatalf("after the conflict:\n%s\nwant:\n%s", snapshotView(t, got), want)
	}
	counts := countIDs(t, tbl, got)
	if len(counts) != 60 {
		t.Fatalf("%d ids", len(counts))
	}
	for id, n := range counts {
		if n != 1 {
			t.Errorf("id %d present %d times", id, n)
		}
	}
	if len(first.Bins) != 1 || len(first.Bins[0].Files) != 6 {
		t.Fatalf("first optimize planned %v", binSizes(first.Bins))
	}
}
