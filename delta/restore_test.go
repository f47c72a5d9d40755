package delta

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/storage"
)

// restoreTable writes, into a store that holds the data files too:
//
//	1: a, b (txn app 1)      2: OPTIMIZE a, b into c; property keep.x=2, other=2
//	3: d (txn app 5), and e with deletion vector dv1
//	4: e's deletion vector becomes dv2
func restoreTable(t *testing.T) (*Table, *storage.Mem) {
	t.Helper()
	store := storage.NewMem()
	tbl, s := newTestTable(t, store)
	ctx := t.Context()
	commit := func(actions ...Action) {
		t.Helper()
		for _, a := range actions {
			if a.Add != nil {
				if err := store.Put(ctx, a.Add.Path, []byte("data")); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := tbl.Commit(ctx, s, actions, Operation{Name: "WRITE"}); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c, d := fakeAdd("part=a/a.parquet", str("a")), fakeAdd("part=b/b.parquet", str("b")), fakeAdd("part=a/c.parquet", str("a")), fakeAdd("d.parquet", nil)
	b.Tags = map[string]string{"k": "v"}
	commit(Action{Add: a}, Action{Add: b}, Action{Txn: &Txn{AppID: "app", Version: 1}})
	now := int64(5)
	commit(Action{Remove: a.removeAt(now, false)}, Action{Remove: b.removeAt(now, false)}, Action{Add: c},
		Action{MetaData: s.Metadata().WithProperty("keep.x", "2").WithProperty("other", "2")})
	dv := func(name string) *DeletionVector {
		return &DeletionVector{StorageType: "p", PathOrInlineDv: name, SizeInBytes: 4, Cardinality: 1}
	}
	e1, e2 := fakeAdd("e.parquet", nil), fakeAdd("e.parquet", nil)
	e1.DeletionVector, e2.DeletionVector = dv("dv1.bin"), dv("dv2.bin")
	for _, k := range []string{"dv1.bin", "dv2.bin"} {
		if err := store.Put(ctx, k, []byte("dv")); err != nil {
			t.Fatal(err)
		}
	}
	commit(Action{Add: d}, Action{Add: e1}, Action{Txn: &Txn{AppID: "app", Version: 5}})
	commit(Action{Remove: e1.removeAt(now, true)}, Action{Add: e2})
	return tbl, store
}

func paths(files []*Add) string {
	var out []string
	for _, f := range files {
		p := f.Path
		if f.DeletionVector != nil {
			p += "+" + f.DeletionVector.PathOrInlineDv
		}
		out = append(out, p)
	}
	return strings.Join(out, " ")
}

func TestRestore(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		to                int64
		restored, removed string
		props             map[string]string
	}{
		{1, "part=a/a.parquet part=b/b.parquet", "d.parquet e.parquet+dv2.bin part=a/c.parquet", map[string]string{"keep.x": "2"}},
		{3, "e.parquet+dv1.bin", "e.parquet+dv2.bin", map[string]string{"keep.x": "2", "other": "2"}},
	} {
		t.Run(fmt.Sprint(tc.to), func(t *testing.T) {
			tbl, _ := restoreTable(t)
			latest, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			to, err := tbl.SnapshotAt(ctx, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			keep := func(k string) bool { return strings.HasPrefix(k, "keep.") }
			dry, err := tbl.Restore(ctx, latest, to, RestoreOptions{DryRun: true, KeepProperty: keep})
			if err != nil {
				t.Fatal(err)
			}
			if dry.Version != -1 || paths(dry.Restored) != tc.restored || paths(dry.Removed) != tc.removed {
				t.Fatalf("dry run: version %d, restored %q, removed %q; want -1, %q, %q", dry.Version, paths(dry.Restored), paths(dry.Removed), tc.restored, tc.removed)
			}
			if v, _ := tbl.Snapshot(ctx); v.Version() != latest.Version() {
				t.Fatalf("dry run committed version %d", v.Version())
			}
			res, err := tbl.Restore(ctx, latest, to, RestoreOptions{KeepProperty: keep})
			if err != nil {
				t.Fatal(err)
			}
			after, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if after.Version() != res.Version || paths(after.Files()) != paths(to.Files()) {
				t.Fatalf("after restore: version %d files %q, want %d and %q", after.Version(), paths(after.Files()), res.Version, paths(to.Files()))
			}
			if fmt.Sprint(after.Metadata().Configuration) != fmt.Sprint(tc.props) {
				t.Fatalf("properties %v, want %v", after.Metadata().Configuration, tc.props)
			}
			if v, _ := after.TxnVersion("app"); v != 5 {
				t.Fatalf("txn app = %d, want 5: RESTORE keeps txn actions", v)
			}
			for _, f := range after.Files() {
				if f.Path == "part=b/b.parquet" && f.Tags["k"] != "v" {
					t.Fatalf("restored %s lost its tags: %v", f.Path, f.Tags)
				}
			}
			commits, err := tbl.readCommits(ctx, []storage.ObjectInfo{{Key: CommitKey(res.Version), Size: -1}})
			if err != nil {
				t.Fatal(err)
			}
			var info *CommitInfo
			var metas, protos, adds, removes int
			for _, a := range commits[0] {
				switch {
				case a.CommitInfo != nil:
					info = a.CommitInfo
				case a.MetaData != nil:
					metas++
				case a.Protocol != nil:
					protos++
				case a.Add != nil:
					adds++
					if !a.Add.DataChange {
						t.Errorf("re-added %s with dataChange=false", a.Add.Path)
					}
				case a.Remove != nil:
					removes++
					r := a.Remove
					if !r.DataChange || r.DeletionTimestamp == nil || r.Size == nil || r.ExtendedFileMetadata == nil || r.Stats == "" {
						t.Errorf("remove %+v: want dataChange, deletionTimestamp, size, extendedFileMetadata and stats as Spark writes them", r)
					}
				case a.Txn != nil:
					t.Errorf("RESTORE wrote a txn action %+v", a.Txn)
				}
			}
			if info.Operation != "RESTORE" || fmt.Sprint(info.OperationParameters) != fmt.Sprintf("map[timestamp:<nil> version:%d]", tc.to) ||
				metas != 1 || protos != 1 || adds != len(res.Restored) || removes != len(res.Removed) {
				t.Fatalf("commit %+v: %d metaData, %d protocol, %d adds, %d removes", info, metas, protos, adds, removes)
			}
			want := map[string]any{"numRestoredFiles": fmt.Sprint(len(res.Restored)), "numRemovedFiles": fmt.Sprint(len(res.Removed)),
				"restoredFilesSize": fmt.Sprint(100 * len(res.Restored)), "removedFilesSize": fmt.Sprint(100 * len(res.Removed)),
				"numOfFilesAfterRestore": fmt.Sprint(to.NumFiles()), "tableSizeAfterRestore": fmt.Sprint(100 * to.NumFiles())}
			if fmt.Sprint(info.OperationMetrics) != fmt.Sprint(want) {
				t.Fatalf("metrics %v, want %v", info.OperationMetrics, want)
			}
		})
	}
}

func TestRestoreRefusals(t *testing.T) {
	ctx := t.Context()
	tbl, store := restoreTable(t)
	latest, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	at := func(v int64) *Snapshot {
		s, err := tbl.SnapshotAt(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if _, err := tbl.Restore(ctx, latest, at(4), RestoreOptions{DryRun: true}); !errors.Is(err, ErrNothingToRestore) {
		t.Fatalf("restore to the latest version: %v, want ErrNothingToRestore", err)
	}
	// Vacuumed: a data file and a deletion vector file of the version.
	if err := store.Delete(ctx, "part=b/b.parquet", "dv1.bin"); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []bool{true, false} {
		_, err := tbl.Restore(ctx, latest, at(1), RestoreOptions{DryRun: dry})
		var me *MissingFilesError
		if !errors.As(err, &me) || !errors.Is(err, ErrRestoreFilesMissing) || fmt.Sprint(me.Paths) != "[part=b/b.parquet]" ||
			!strings.Contains(err.Error(), "part=b/b.parquet") {
			t.Fatalf("dry run %v: %v, want a MissingFilesError naming part=b/b.parquet", dry, err)
		}
		_, err = tbl.Restore(ctx, latest, at(3), RestoreOptions{DryRun: dry})
		if !errors.As(err, &me) || fmt.Sprint(me.Paths) != "[dv1.bin (deletion vector of e.parquet)]" {
			t.Fatalf("dry run %v: %v, want a MissingFilesError naming dv1.bin", dry, err)
		}
	}
	// A concurrent commit aborts the restore: no retry, as Spark's commitLarge.
	stale := at(4)
	appendCommit(t, tbl, latest, "late.parquet", nil)
	_, err = tbl.Restore(ctx, stale, at(2), RestoreOptions{})
	if !IsConflict(err) {
		t.Fatalf("restore over a concurrent commit: %v, want a conflict", err)
	}
	if s, _ := tbl.Snapshot(ctx); s.Version() != 5 {
		t.Fatalf("version %d after a refused restore, want 5", s.Version())
	}
	// Append-only tables refuse the removes.
	s := at(5)
	if _, err := tbl.Commit(ctx, s, []Action{{MetaData: s.Metadata().WithProperty("delta.appendOnly", "true")}}, Operation{Name: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Restore(ctx, s, at(2), RestoreOptions{DryRun: true}); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("restore of an append-only table: %v", err)
	}
	// Clustering columns set since: Spark would restore them; refused.
	if _, err := tbl.Commit(ctx, s, []Action{{DomainMetadata: &DomainMetadata{Domain: clusteringDomain, Configuration: `{"clusteringColumns":[["id"]]}`}}}, Operation{Name: "CLUSTER BY"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Restore(ctx, s, at(2), RestoreOptions{DryRun: true}); err == nil || !strings.Contains(err.Error(), "clustering columns changed") {
		t.Fatalf("restore across a clustering change: %v", err)
	}
}

func TestMergeProtocols(t *testing.T) {
	legacy := &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	dv := &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}, WriterFeatures: []string{"deletionVectors"}}
	ntz := &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz"}, WriterFeatures: []string{"timestampNtz"}}
	for _, tc := range []struct {
		a, b *Protocol
		want string
	}{
		{legacy, legacy, "{1 2 [] []}"},
		{legacy, &Protocol{MinReaderVersion: 1, MinWriterVersion: 4}, "{1 4 [] []}"},
		{dv, dv, fmt.Sprint(*dv)},
		// Writer 7 lists the features the legacy writer 2 implied, either way round.
		{legacy, dv, "{3 7 [deletionVectors] [appendOnly deletionVectors invariants]}"},
		{dv, legacy, "{3 7 [deletionVectors] [appendOnly deletionVectors invariants]}"},
		{dv, ntz, "{3 7 [deletionVectors timestampNtz] [deletionVectors timestampNtz]}"},
	} {
		got := *mergeProtocols(tc.a, tc.b)
		got.ReaderFeatures, got.WriterFeatures = slices.Clip(got.ReaderFeatures), slices.Clip(got.WriterFeatures)
		if s := fmt.Sprint(got); s != tc.want {
			t.Errorf("merge(%v, %v) = %s, want %s", *tc.a, *tc.b, s, tc.want)
		}
	}
}
