package upsert

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta"
)

// A filter holds every key put in it, whichever way its hash is taken
// (the epoch's keys are strings, a file's keys bytes), over random files
// of random long and string keys; and it rules out most keys it lacks.
func TestKeyIndexHoldsEveryKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	longs, _ := NewKeys(&delta.StructType{Fields: []delta.StructField{{Name: "id", Type: delta.Long}}}, []string{"id"})
	strs, _ := NewKeys(&delta.StructType{Fields: []delta.StructField{{Name: "id", Type: delta.String}}}, []string{"id"})
	var absent, falsePositives int
	for trial := range 200 {
		files := make([][][]byte, 1+rng.IntN(8))
		for f := range files {
			for range rng.IntN(2000) {
				v := parquet.Int64Value(rng.Int64())
				keys := longs
				if trial%2 == 1 {
					v, keys = parquet.ByteArrayValue(fmt.Appendf(nil, "%x", rng.Uint64())), strs
				}
				key, err := keys.AppendColumns(nil, []parquet.Value{v})
				if err != nil {
					t.Fatal(err)
				}
				files[f] = append(files[f], key)
			}
		}
		filters := make([]bloom, len(files))
		for f, keys := range files {
			filters[f] = newBloom(len(keys))
			for _, key := range keys {
				filters[f].add(keyHash(key))
			}
		}
		for f, keys := range files {
			for _, key := range keys {
				if h := maphash.String(indexSeed, string(key)); !filters[f].mayHoldAny([]uint64{h}) {
					t.Fatalf("trial %d: file %d's filter rules out its key %q", trial, f, key)
				}
			}
			for _, other := range files[(f+1)%len(files)] {
				if len(files) > 1 {
					absent++
					if filters[f].mayHold(keyHash(other)) {
						falsePositives++
					}
				}
			}
		}
	}
	if rate := float64(falsePositives) / float64(absent); rate > 1e-3 {
		t.Errorf("false positives: %d of %d keys absent (%.5f), want about 1 in 15,000", falsePositives, absent, rate)
	}
}

// indexedPair is an upsert table with a key index of limit bytes, and
// one without, given the same epochs.
func indexedPair(t *testing.T, cow bool, limit int64) (with, without *upsertTable) {
	with, without = newUpsertTable(t, cow), newUpsertTable(t, cow)
	with.up.Index = NewKeyIndex(limit)
	return with, without
}

// The key index changes no answer: random epochs of updates, inserts and
// deletes of random keys leave the same table with it as without it
// (deletion vectors and copy-on-write, an index that holds every file and
// one that holds a few), while it leaves out files; every live file it
// indexes holds each of its keys in its filter.
func TestKeyIndexSameTable(t *testing.T) {
	for _, cow := range []bool{false, true} {
		for _, limit := range []int64{64 << 20, 3000} {
			t.Run(fmt.Sprintf("cow=%v/limit=%d", cow, limit), func(t *testing.T) {
				with, without := indexedPair(t, cow, limit)
				rng := rand.New(rand.NewPCG(uint64(limit), 3))
				var skipped int
				for e := range 30 {
					var changes []change
					for i := range 1 + rng.IntN(40) {
						c := change{id: rng.Int64N(2000), name: fmt.Sprintf("e%d-%d", e, i)}
						if rng.IntN(5) == 0 {
							c.name = ""
						}
						changes = append(changes, c)
					}
					res := with.epoch(changes...)
					without.epoch(changes...)
					skipped += res.FilesSkipped
					want := without.state()
					with.check(want)
					checkFilters(t, with)
				}
				if skipped == 0 {
					t.Error("the index left out no file")
				}
				if m := with.up.Index.memory(); m > limit {
					t.Errorf("index holds %d bytes, limit %d", m, limit)
				}
			})
		}
	}
}

// checkFilters fails unless every live file of u the index knows has each
// of its keys in its filter, and the index knows no other file.
func checkFilters(t *testing.T, u *upsertTable) {
	t.Helper()
	x := u.up.Index
	live := map[string]bool{}
	for _, f := range u.snap.Files() {
		live[f.Path] = true
		x.mu.Lock()
		ff := x.files[f.Path]
		x.mu.Unlock()
		if ff == nil {
			continue
		}
		rows, err := delta.ReadDataFile(t.Context(), u.store, u.data, nil, &delta.Add{Path: f.Path, Size: f.Size})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			key, _ := u.keys.AppendColumns(nil, []parquet.Value{parquet.Int64Value(r[0].(int64))})
			if !ff.bloom.mayHold(keyHash(key)) {
				t.Fatalf("the filter of %s rules out its key %d", f.Path, r[0])
			}
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for path := range x.files {
		if !live[path] {
			t.Errorf("the index holds %s, not a live file", path)
		}
	}
}

// Files past the index's limit are not indexed, and are read: their keys
// are still replaced.
func TestKeyIndexLimit(t *testing.T) {
	u := newUpsertTable(t, false)
	for f := range 6 {
		var changes []change
		for i := range int64(100) {
			changes = append(changes, change{id: int64(f) + 6*i, name: "a"}) // every file spans the keys
		}
		u.epoch(changes...)
	}
	one := filterMemory(u.snap.Files()[0].Path, newBloom(100))
	u.up.Index = NewKeyIndex(2*one + one/2) // two files' filters
	res := u.epoch(change{id: 5, name: "b"})
	// Two of the six table files, and the epoch's new file of one key.
	if x := u.up.Index; x.memory() > 2*one+one/2 || x.count() != 3 {
		t.Errorf("index of %d files, %d bytes, want 3 files within %d", x.count(), x.memory(), 2*one+one/2)
	}
	if res.FilesRead != 6 {
		t.Errorf("first epoch read %d files, want 6", res.FilesRead)
	}
	res = u.epoch(change{id: 6*50 + 5, name: "b"})
	if res.FilesRead < 4 || res.Replaced != 1 {
		t.Errorf("second epoch read %d files and replaced %d rows, want the 4 not indexed read and 1 replaced", res.FilesRead, res.Replaced)
	}
	want := map[int64]string{}
	for f := range int64(6) {
		for i := range int64(100) {
			want[f+6*i] = "a"
		}
	}
	want[5], want[6*50+5] = "b", "b"
	u.check(want)
}

// The files a commit removes leave the index; a file given a deletion
// vector keeps its filter, an epoch's new file enters it without being
// read; a file another writer removes leaves it at the next Resolve.
func TestKeyIndexRemovedFiles(t *testing.T) {
	u := newUpsertTable(t, false)
	u.up.Index = NewKeyIndex(1 << 20)
	x := u.up.Index
	u.epoch(change{id: 1, name: "a"}, change{id: 2, name: "a"})
	first := u.snap.Files()[0].Path
	if x.count() != 1 || x.files[first] == nil {
		t.Fatalf("the epoch's new file %s is not indexed: %v", first, len(x.files))
	}
	res := u.epoch(change{id: 1, name: "b"}, change{id: 3, name: "c"})
	if res.FilesRead != 1 || x.files[first] == nil || x.count() != 2 {
		t.Errorf("after a replace: %d files read, %d indexed (the first's with its vector: %v)", res.FilesRead, x.count(), x.files[first] != nil)
	}
	u.epoch(change{id: 2}) // the first file's last row: it leaves the table
	if x.files[first] != nil || x.count() != 1 {
		t.Errorf("the removed file %s is still indexed (%d files)", first, x.count())
	}
	// Another writer removes the remaining file: the next Resolve drops it.
	if err := u.table.Update(t.Context(), u.snap); err != nil {
		t.Fatal(err)
	}
	gone := u.snap.Files()[0]
	if _, err := u.table.Commit(t.Context(), u.snap, []delta.Action{{Remove: gone.Remove(time.Now())}}, delta.Operation{Name: "DELETE"}); err != nil {
		t.Fatal(err)
	}
	u.epoch(change{id: 9, name: "z"})
	if x.files[gone.Path] != nil {
		t.Errorf("the file another writer removed, %s, is still indexed", gone.Path)
	}
	u.check(map[int64]string{9: "z"})
}

// A file the index does not know (another writer's) is a candidate: its
// row of a changed key is replaced, even though every known file's filter
// rules the key out.
func TestKeyIndexUnknownFiles(t *testing.T) {
	u := newUpsertTable(t, false)
	u.up.Index = NewKeyIndex(1 << 20)
	u.epoch(change{id: 1, name: "a"}, change{id: 10, name: "a"}) // its statistics span 7
	add, err := delta.WriteDataFile(t.Context(), u.store, u.data, nil, nil, []delta.Row{{int64(7), "other"}}, delta.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := u.table.Update(t.Context(), u.snap); err != nil {
		t.Fatal(err)
	}
	if _, err := u.table.Commit(t.Context(), u.snap, []delta.Action{{Add: add}}, delta.Operation{Name: "WRITE"}); err != nil {
		t.Fatal(err)
	}
	res := u.epoch(change{id: 7, name: "mine"})
	if res.Replaced != 1 || res.FilesRead != 1 || res.FilesSkipped != 1 {
		t.Errorf("%+v: want the unknown file read and its row replaced, the known one skipped", res)
	}
	u.check(map[int64]string{1: "a", 10: "a", 7: "mine"})
}

// Observe sees the bytes the index holds after every change (the
// deltaflow_key_index_bytes gauge): files entering with a commit, filters
// built from files read, files a commit removes, files gone from the
// table, and 0 once empty.
func TestKeyIndexObserved(t *testing.T) {
	u := newUpsertTable(t, false)
	u.up.Index = NewKeyIndex(1 << 20)
	x := u.up.Index
	var seen []int64
	x.Observe(func(bytes int64) { seen = append(seen, bytes) })
	check := func(when string) {
		t.Helper()
		if len(seen) == 0 || seen[len(seen)-1] != x.memory() {
			t.Errorf("%s: observed %v, the index holds %d bytes", when, seen, x.memory())
		}
	}
	check("at first")
	u.epoch(change{id: 1, name: "a"}, change{id: 2, name: "a"})
	if x.memory() == 0 {
		t.Fatal("the epoch's new file is not indexed")
	}
	check("after a file entered")
	u.epoch(change{id: 1, name: "b"}, change{id: 3, name: "c"})
	check("after a replace")
	u.epoch(change{id: 1}, change{id: 2}, change{id: 3})
	check("after every key's delete")
	if x.memory() != 0 {
		t.Errorf("the table has no file, the index holds %d bytes", x.memory())
	}
}

// memory is the bytes the index holds, at most its limit.
func (x *KeyIndex) memory() int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.used
}

// count is the number of files indexed.
func (x *KeyIndex) count() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.files)
}
