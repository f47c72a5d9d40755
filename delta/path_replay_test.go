package delta

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/storage"
)

// rootURIs returns the spellings of the local store's root that other
// writers put in front of a relative path: file:/abs, file:///abs and the
// bare /abs, each percent-encoded as a URI path is.
func rootURIs(store *storage.Local) (fileSlash, fileTriple, bare string) {
	root := EncodePath(filepath.ToSlash(store.Root()))
	return "file:" + root, "file://" + root, root
}

// TestReplayMatchesPathSpellings: a remove tombstones its add however each
// spells the path, as Spark (which compares parsed URIs) replays it, in
// commits and through a checkpoint. Byte-for-byte comparison leaves the
// file live, so readers see deleted rows and the file's later VACUUM loses
// data of whoever still reads it.
func TestReplayMatchesPathSpellings(t *testing.T) {
	for name, tc := range map[string]struct {
		add, remove string // "{file:}", "{file://}", "{/}" stand for the root spelled so
	}{
		"file:/ remove":                 {add: "a%20b/x.parquet", remove: "{file:}/a%20b/x.parquet"},
		"file:/// remove":               {add: "a%20b/x.parquet", remove: "{file://}/a%20b/x.parquet"},
		"bare absolute remove":          {add: "a%20b/x.parquet", remove: "{/}/a%20b/x.parquet"},
		"unencoded remove":              {add: "a%20b/x.parquet", remove: "a b/x.parquet"},
		"unencoded add":                 {add: "a b/x.parquet", remove: "a%20b/x.parquet"},
		"absolute add, relative remove": {add: "{file://}/p=a%253Ab/x.parquet", remove: "p=a%253Ab/x.parquet"},
		"lower-case escape":             {add: "caf%C3%A9/x.parquet", remove: "caf%c3%a9/x.parquet"},
		"raw non-ASCII add":             {add: "café/x.parquet", remove: "{file:}/caf%C3%A9/x.parquet"},
	} {
		for _, viaCheckpoint := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "", true: " via checkpoint"}[viaCheckpoint], func(t *testing.T) {
				ctx := t.Context()
				store := localStore(t, t.TempDir())
				fileSlash, fileTriple, bare := rootURIs(store)
				spell := strings.NewReplacer("{file:}", fileSlash, "{file://}", fileTriple, "{/}", bare).Replace
				tbl, s := newTestTable(t, store)
				appendCommit(t, tbl, s, "keep.parquet", nil)
				appendCommit(t, tbl, s, spell(tc.add), nil)
				if viaCheckpoint {
					if err := tbl.Checkpoint(ctx, s); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := tbl.Commit(ctx, s, []Action{{Remove: &Remove{Path: spell(tc.remove),
					DeletionTimestamp: ptr(time.Now().UnixMilli()), DataChange: true}}}, Operation{Name: "DELETE"}); err != nil {
					t.Fatal(err)
				}
				fresh, err := NewTable(store).Snapshot(ctx)
				if err != nil {
					t.Fatal(err)
				}
				// Once more from a checkpoint written after the remove.
				if err := tbl.Checkpoint(ctx, fresh); err != nil {
					t.Fatal(err)
				}
				again, err := NewTable(store).Snapshot(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for what, snap := range map[string]*Snapshot{"committed": s, "replayed": fresh, "from the last checkpoint": again} {
					var live []string
					for _, a := range snap.Files() {
						live = append(live, a.Path)
					}
					if !slices.Equal(live, []string{"keep.parquet"}) {
						t.Errorf("%s: live %q, want only keep.parquet", what, live)
					}
					if ts := snap.Tombstones(); len(ts) != 1 || ts[0].Path != spell(tc.remove) {
						t.Errorf("%s: tombstones %+v", what, ts)
					}
					if snap.File(spell(tc.add)) != nil || snap.File(spell(tc.remove)) != nil {
						t.Errorf("%s: File finds the removed file", what)
					}
				}
			})
		}
	}
}

// TestOptimizeConflictAcrossPathSpellings: a concurrent commit that removed
// the files OPTIMIZE compacts, spelling their paths as absolute URIs, is a
// ConflictDelete. Missed, OPTIMIZE commits the compacted copy and the
// deleted rows come back.
func TestOptimizeConflictAcrossPathSpellings(t *testing.T) {
	ctx := t.Context()
	store, tbl, s := rowsTable(t, 4)
	stale, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, fileTriple, _ := rootURIs(store)
	var removes []Action
	for _, a := range s.Files() {
		removes = append(removes, Action{Remove: &Remove{Path: fileTriple + "/" + a.Path, DeletionTimestamp: ptr(time.Now().UnixMilli()), DataChange: true}})
	}
	if _, err := tbl.Commit(ctx, s, removes, Operation{Name: "DELETE"}); err != nil {
		t.Fatal(err)
	}
	_, err = tbl.Optimize(ctx, stale, OptimizeOptions{})
	if !IsConflict(err, ConflictDelete) {
		t.Fatalf("optimize after a concurrent delete: %v, want a ConflictDelete", err)
	}
	final, err := NewTable(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := final.NumFiles(); n != 0 {
		t.Fatalf("%d live files after deleting all", n)
	}
}

// TestReadAbsolutePaths: files whose add.path is an absolute URI under the
// table root read and compact, the OPTIMIZE removes copying each add's
// path byte for byte; a file outside the root fails naming it.
func TestReadAbsolutePaths(t *testing.T) {
	ctx := t.Context()
	store := localStore(t, t.TempDir())
	fileSlash, fileTriple, bare := rootURIs(store)
	tbl, s := newTestTable(t, store)
	var paths []string
	for i, root := range []string{fileSlash, fileTriple, bare} {
		add := writeRows(t, store, "a", i*10, 10)
		add.Path = root + "/" + add.Path
		paths = append(paths, add.Path)
		if _, err := tbl.Commit(ctx, s, []Action{{Add: add}}, Operation{Name: "WRITE"}); err != nil {
			t.Fatal(err)
		}
	}
	if counts := countIDs(t, tbl, s); len(counts) != 30 {
		t.Fatalf("read %d ids, want 30", len(counts))
	}
	res, err := tbl.Optimize(ctx, s, OptimizeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesRemoved != 3 {
		t.Fatalf("optimize removed %d files", res.FilesRemoved)
	}
	var removed []string
	for _, a := range readCommit(t, store, res.Version) {
		if a.Remove != nil {
			removed = append(removed, a.Remove.Path)
		}
	}
	slices.Sort(removed)
	slices.Sort(paths)
	if !slices.Equal(removed, paths) {
		t.Fatalf("removes %q, want the adds' paths %q", removed, paths)
	}
	if counts := countIDs(t, tbl, s); len(counts) != 30 {
		t.Fatalf("after optimize: %d ids, want 30", len(counts))
	}

	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "x.parquet"), []byte("PAR1"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := &Add{Path: "file://" + EncodePath(filepath.ToSlash(other)) + "/x.parquet"}
	_, err = ReadDataFile(ctx, store, testSchema(), []string{"part"}, outside)
	if !errors.Is(err, ErrOutsideTable) || !strings.Contains(err.Error(), outside.Path) {
		t.Fatalf("reading a file outside the table: %v, want ErrOutsideTable naming %s", err, outside.Path)
	}
}

// TestDeltaRSReadsAbsolutePaths: delta-rs reads a table whose adds spell
// their paths as absolute URIs under the root (file:/, file:///, bare /abs,
// with an encoded space) as this library does: the same files, and every
// row once. (delta-rs's to_pyarrow_table cannot; its query engine can.)
func TestDeltaRSReadsAbsolutePaths(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	store := localStore(t, dir)
	fileSlash, fileTriple, bare := rootURIs(store)
	tbl, s := newTestTable(t, store)
	for i, root := range []string{fileSlash, fileTriple, bare, ""} {
		add := writeRows(t, store, "a b", i*10, 10) // directory "part=a b", path "part=a%20b/..."
		if root != "" {
			add.Path = root + "/" + add.Path
		}
		if _, err := tbl.Commit(ctx, s, []Action{{Add: add}}, Operation{Name: "WRITE"}); err != nil {
			t.Fatal(err)
		}
	}
	compareWithDeltaRS(t, tbl, dir, false)
	v := deltaRS(t, dir, "--rows", "--query")
	if v.RowsError != "" {
		t.Fatalf("delta-rs: %s", v.RowsError)
	}
	theirs := map[int64]int{}
	for _, r := range v.Rows {
		id, err := r["id"].(json.Number).Int64()
		if err != nil {
			t.Fatalf("delta-rs row %v: %v", r, err)
		}
		theirs[id]++
	}
	if ours := countIDs(t, tbl, s); !maps.Equal(ours, theirs) || len(ours) != 40 {
		t.Fatalf("ids: ours %v, delta-rs %v", ours, theirs)
	}
}
