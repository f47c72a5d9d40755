package upsert

import (
	"hash/maphash"
	"math/bits"
	"sync"

	"github.com/deltaflow/deltaflow/delta"
)

// KeyIndex is an optional key → file index of an upsert table, held in
// memory within a limit: a Bloom filter of each indexed live data file's
// encoded keys (Keys). Resolve reads only the key columns of the files
// whose filter may hold one of the epoch's keys, or that have none: a
// file the index does not know (over the limit, another writer's,
// OPTIMIZE's) is a candidate as without an index, so it narrows the
// candidates and never changes an answer. A Bloom filter's "no" is
// certain, and a file's keys never grow (a data file is immutable; a
// deletion vector only hides rows), so a filter stays right for as long as
// its path is live. The index fills itself from the table: the key
// columns Resolve reads for a file not indexed yet make its filter, and
// the files an epoch's commit adds (its own rows' keys are known) enter
// it once the commit lands (IndexUpdate.Committed). Each Resolve keeps
// only the filters of files its snapshot holds: removed files, by this
// process or another writer, leave it.
type KeyIndex struct {
	mu    sync.Mutex
	limit int64 // bytes the filters may hold, with their entries
	used  int64
	files map[string]*fileFilter
	gen   uint64 // the Resolve whose snapshot the filters' seen refer to
	// observe, if set, sees used after every change: the memory the
	// index holds is watched as the buffers' is (deltaflow_key_index_bytes).
	observe func(bytes int64)
}

// fileFilter is an indexed file's Bloom filter, and the last Resolve whose
// snapshot listed the file.
type fileFilter struct {
	bloom bloom
	seen  uint64
}

// Bloom filter parameters: 20 bits and 14 probes per key (the optimal
// count, 20·ln 2) give one false positive in about 15,000 keys that a
// file does not hold, so an epoch of 1,000 new keys still leaves out
// about 94% of the files that hold none of them.
const (
	bloomBitsPerKey = 20
	bloomProbes     = 14
	// filterEntryMemory is what an indexed file costs besides its filter's
	// bits and path: its map entry and headers.
	filterEntryMemory = 96
)

// indexSeed seeds the key hashes: an index lives in one process's memory,
// so any seed works.
var indexSeed = maphash.MakeSeed()

// keyHash is the hash of an encoded key that the filters probe by.
func keyHash(key []byte) uint64 { return maphash.Bytes(indexSeed, key) }

// bloom is a Bloom filter of key hashes: probe i of hash h is bit
// h + i·h' (h' an odd rotation of h), mapped onto the filter's bits by
// multiplication.
type bloom []uint64

// newBloom is an empty filter sized for n keys.
func newBloom(n int) bloom { return make(bloom, bloomWords(n)) }

// bloomWords is the size in words of a filter of n keys.
func bloomWords(n int) int { return max(1, (n*bloomBitsPerKey+63)/64) }

// add puts the key of hash h in the filter.
func (b bloom) add(h uint64) {
	m := uint64(len(b)) * 64
	step := bits.RotateLeft64(h, 32) | 1
	for range bloomProbes {
		i, _ := bits.Mul64(h, m)
		b[i>>6] |= 1 << (i & 63)
		h += step
	}
}

// mayHold reports whether the filter may hold the key of hash h: false
// only when it certainly does not.
func (b bloom) mayHold(h uint64) bool {
	m := uint64(len(b)) * 64
	step := bits.RotateLeft64(h, 32) | 1
	for range bloomProbes {
		i, _ := bits.Mul64(h, m)
		if b[i>>6]&(1<<(i&63)) == 0 {
			return false
		}
		h += step
	}
	return true
}

// mayHoldAny reports whether the filter may hold one of the keys of
// hashes.
func (b bloom) mayHoldAny(hashes []uint64) bool {
	for _, h := range hashes {
		if b.mayHold(h) {
			return true
		}
	}
	return false
}

// filterMemory is what indexing a file at path with filter b costs.
func filterMemory(path string, b bloom) int64 {
	return int64(len(b))*8 + int64(len(path)) + filterEntryMemory
}

// NewKeyIndex returns an empty index whose filters hold at most limit
// bytes; nil (no index) when limit is not positive.
func NewKeyIndex(limit int64) *KeyIndex {
	if limit <= 0 {
		return nil
	}
	return &KeyIndex{limit: limit, files: map[string]*fileFilter{}}
}

// Observe makes f see the bytes the index holds now and after every
// change. f runs under the index's lock: it must be quick and must not
// call back.
func (x *KeyIndex) Observe(f func(bytes int64)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.observe = f
	x.account(0)
}

// account adds n (negative: frees) to the bytes the index holds; x.mu
// held.
func (x *KeyIndex) account(n int64) {
	x.used += n
	if x.observe != nil {
		x.observe(x.used)
	}
}

// dropLocked takes the file at path, if indexed, out of the index; x.mu
// held.
func (x *KeyIndex) dropLocked(path string) {
	if f := x.files[path]; f != nil {
		delete(x.files, path)
		x.account(-filterMemory(path, f.bloom))
	}
}

// begin starts a Resolve: the files it marks live (filter) are kept by
// end.
func (x *KeyIndex) begin() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.gen++
}

// filter is the filter of the live file at path, nil when it is not
// indexed; the file is marked live.
func (x *KeyIndex) filter(path string) bloom {
	x.mu.Lock()
	defer x.mu.Unlock()
	f := x.files[path]
	if f == nil {
		return nil
	}
	f.seen = x.gen
	return f.bloom
}

// end drops the filters of files the Resolve begun last did not mark live:
// the table no longer holds them.
func (x *KeyIndex) end() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for path, f := range x.files {
		if f.seen != x.gen {
			x.dropLocked(path)
		}
	}
}

// room reports whether a filter of n keys for the file at path fits in
// the index now.
func (x *KeyIndex) room(path string, n int) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.used+filterMemory(path, nil)+int64(bloomWords(n))*8 <= x.limit
}

// put indexes the live file at path with filter b, if it fits (a file
// left out stays a candidate).
func (x *KeyIndex) put(path string, b bloom) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.putLocked(path, b)
}

func (x *KeyIndex) putLocked(path string, b bloom) {
	x.dropLocked(path)
	if n := filterMemory(path, b); x.used+n <= x.limit {
		x.files[path] = &fileFilter{bloom: b, seen: x.gen}
		x.account(n)
	}
}

// IndexUpdate is what a resolved epoch's commit changes in its table's
// key index: the files it removes leave it, and those it adds with known
// keys enter it. The zero IndexUpdate changes nothing.
type IndexUpdate struct {
	index   *KeyIndex
	removed []string
	added   map[string]bloom
}

// Committed applies the update once its commit has landed. A commit that
// did not land leaves the index as it was: the files it would have added
// are unknown to it, candidates.
func (u IndexUpdate) Committed() {
	if u.index == nil {
		return
	}
	u.index.mu.Lock()
	defer u.index.mu.Unlock()
	for _, path := range u.removed {
		u.index.dropLocked(path)
	}
	for path, b := range u.added {
		u.index.putLocked(path, b)
	}
}

// add records that the commit adds a file at path whose keys are those
// of filter b.
func (u *IndexUpdate) add(path string, b bloom) {
	if u.added == nil {
		u.added = map[string]bloom{}
	}
	u.added[path] = b
}

// track records in u what actions, leaving rows out of the table file
// old, do: when they replace it by a file of another path (a rewrite,
// whose keys are some of old's), that file inherits old's filter, and old
// leaves; a file given a deletion vector keeps its path and filter.
func (u *IndexUpdate) track(old *delta.Add, acts []delta.Action) {
	if u.index == nil {
		return
	}
	kept := false
	for _, a := range acts {
		if a.Add == nil {
			continue
		}
		if a.Add.Path == old.Path {
			kept = true
		} else if b := u.index.filter(old.Path); b != nil {
			u.add(a.Add.Path, b)
		}
	}
	if !kept {
		u.removed = append(u.removed, old.Path)
	}
}

// newFilter is an empty filter for the keys of table file add when the
// index has room for it, nil when not or when its statistics do not say
// how many rows it has.
func (x *KeyIndex) newFilter(add *delta.Add) bloom {
	st, err := delta.ParseStats(add.Stats)
	if err != nil || add.Stats == "" || st.NumRecords < 0 || !x.room(add.Path, int(st.NumRecords)) {
		return nil
	}
	return newBloom(int(st.NumRecords))
}

// addNew records that actions add epoch file f (as written, or with a
// deletion vector or rewritten without its superseded rows: some of its
// keys), when the index has room for its filter.
func (u *IndexUpdate) addNew(f NewFile, acts []delta.Action) {
	if u.index == nil || !u.index.room(f.Add.Path, f.Rows.Len()) {
		return
	}
	b := newBloom(f.Rows.Len())
	for j := range f.Rows.Len() {
		key, _, _ := f.Rows.At(j)
		b.add(keyHash(key))
	}
	for _, a := range acts {
		if a.Add != nil {
			u.add(a.Add.Path, b)
		}
	}
}
