package delta

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

func TestVacuum(t *testing.T) {
	ctx := t.Context()
	store := storage.NewMem()
	tbl, s := newTestTable(t, store)
	put := func(key string) {
		if err := store.Put(ctx, key, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"part=a/live.parquet", "part=a/removed-old.parquet", "part=a/removed-new.parquet",
		"part=a/orphan.parquet", "part=a/.hidden.crc", "_tmp/x.parquet", "part=a%2Fb/live2.parquet",
		"_change_data/cdc-1.snappy.parquet", "_change_data/part=a/cdc-2.snappy.parquet"} {
		put(k)
	}
	appendCommit(t, tbl, s, "part=a/live.parquet", nil)
	appendCommit(t, tbl, s, "part=a/removed-old.parquet", nil)
	appendCommit(t, tbl, s, "part=a/removed-new.parquet", nil)
	appendCommit(t, tbl, s, "part=a%252Fb/live2.parquet", nil)
	now := time.Now()
	old, recent := now.Add(-10*24*time.Hour).UnixMilli(), now.Add(2*time.Hour).UnixMilli() // recent: not yet expired at the cutoff
	if _, err := tbl.Commit(ctx, s, []Action{
		{Remove: &Remove{Path: "part=a/removed-old.parquet", DeletionTimestamp: &old, DataChange: true}},
		{Remove: &Remove{Path: "part=a/removed-new.parquet", DeletionTimestamp: &recent, DataChange: true}},
	}, Operation{Name: "DELETE"}); err != nil {
		t.Fatal(err)
	}
	tbl.now = func() time.Time { return now.Add(time.Minute) }

	if _, err := tbl.Vacuum(ctx, s, VacuumOptions{Retention: time.Hour / 2}); !errors.Is(err, ErrRetentionTooShort) {
		t.Fatalf("short retention without force: %v", err)
	}
	dry, err := tbl.Vacuum(ctx, s, VacuumOptions{Retention: time.Second, Force: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	// Change data files are in no snapshot: they go with the retention.
	want := []string{"_change_data/cdc-1.snappy.parquet", "_change_data/part=a/cdc-2.snappy.parquet",
		"part=a/orphan.parquet", "part=a/removed-old.parquet"}
	if !slices.Equal(dry.Files, want) {
		t.Fatalf("dry run would delete %v, want %v", dry.Files, want)
	}
	if _, err := store.Stat(ctx, "part=a/orphan.parquet"); err != nil {
		t.Fatal("dry run deleted a file")
	}
	// Default retention (7 days) keeps everything written a minute ago.
	if res, err := tbl.Vacuum(ctx, s, VacuumOptions{}); err != nil || len(res.Files) != 0 {
		t.Fatalf("default retention: %v %v", res, err)
	}
	res, err := tbl.Vacuum(ctx, s, VacuumOptions{Retention: time.Second, Force: true})
	if err != nil || !slices.Equal(res.Files, want) {
		t.Fatalf("vacuum: %v %v", res, err)
	}
	left, _ := store.List(ctx, "", "")
	var keys []string
	for _, o := range left {
		if _, _, _, _, ok := ParseLogFileName(o.Key); !ok {
			keys = append(keys, o.Key)
		}
	}
	wantLeft := []string{"_tmp/x.parquet", "part=a%2Fb/live2.parquet", "part=a/.hidden.crc", "part=a/live.parquet", "part=a/removed-new.parquet"}
	if !slices.Equal(keys, wantLeft) {
		t.Fatalf("left %v, want %v", keys, wantLeft)
	}
	hist, _ := tbl.History(ctx, 2)
	if hist[0].Operation != "VACUUM END" || hist[1].Operation != "VACUUM START" {
		t.Fatalf("history %+v", hist)
	}
}

func TestHiddenKey(t *testing.T) {
	cols := []string{"_p", "q"}
	for key, hidden := range map[string]bool{
		"_delta_log/0.json": true, "_p=1/q=2/f.parquet": false, "_x=1/f.parquet": true,
		".tmp/f": true, "q=1/_SUCCESS": true, "q=1/f.parquet": false, "f.parquet": false,
		"_change_data/cdc-0.parquet": false, "_change_data/q=1/cdc-0.parquet": false, "_change_data": true,
		"_change_data/_x/f": true, "q=1/_change_data/f": true,
	} {
		if got := hiddenKey(key, cols); got != hidden {
			t.Errorf("hiddenKey(%q) = %v", key, got)
		}
	}
}

// TestVacuumKeepsEveryPathForm: VACUUM keeps the files of live adds and
// unexpired tombstones whatever form their paths take (absolute file:/,
// file:///, bare /abs, unencoded), and their deletion vector files (relative
// with and without a random prefix, absolute); it deletes only what no
// version in retention references, and nothing outside the table root.
func TestVacuumKeepsEveryPathForm(t *testing.T) {
	ctx := t.Context()
	store := localStore(t, t.TempDir())
	fileSlash, fileTriple, bare := rootURIs(store)
	tbl, s := newTestTable(t, store)
	other := t.TempDir() // a directory beside the table
	otherURI := "file://" + EncodePath(filepath.ToSlash(other))
	for _, f := range []string{"outside.parquet", "orphan.parquet"} {
		if err := os.WriteFile(filepath.Join(other, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const (
		dvUUID       = "deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin" // Z85 ^-aqEH.-t@S}K{vb[*k^
		dvNoPrefix   = "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin" // Z85 vBn[lx{q8@P<9BNH/isA
		liveDVPrefix = "ab/" + dvUUID
		tombDV       = "cd/" + dvUUID
		expiredDV    = "ef/" + dvUUID
	)
	for _, k := range []string{"part=a/rel.parquet", "part=a/abs3.parquet", "part=a/abs1.parquet", "part=a/bare.parquet",
		"part=a/sp ace.parquet", "part=a/gone.parquet", "part=a/old.parquet", "part=a/orphan.parquet",
		liveDVPrefix, dvNoPrefix, "dvp.bin", tombDV, expiredDV} {
		if err := store.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	withDV := func(a *Add, storageType, p string) *Add {
		a.DeletionVector = &DeletionVector{StorageType: storageType, PathOrInlineDv: p, SizeInBytes: 40, Cardinality: 6}
		if storageType != "i" {
			a.DeletionVector.Offset = ptr(int32(1))
		}
		return a
	}
	gone := withDV(fakeAdd("part=a/gone.parquet", str("a")), "u", "cd^-aqEH.-t@S}K{vb[*k^")
	old := withDV(fakeAdd("part=a/old.parquet", str("a")), "u", "ef^-aqEH.-t@S}K{vb[*k^")
	if _, err := tbl.Commit(ctx, s, []Action{
		{Add: withDV(fakeAdd("part=a/rel.parquet", str("a")), "u", "ab^-aqEH.-t@S}K{vb[*k^")},
		{Add: withDV(fakeAdd(fileTriple+"/part=a/abs3.parquet", str("a")), "u", "vBn[lx{q8@P<9BNH/isA")},
		{Add: withDV(fakeAdd(fileSlash+"/part=a/abs1.parquet", str("a")), "p", fileTriple+"/dvp.bin")},
		{Add: withDV(fakeAdd(bare+"/part=a/bare.parquet", str("a")), "i", "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L")},
		{Add: fakeAdd("part=a/sp ace.parquet", str("a"))},
		{Add: fakeAdd(otherURI+"/outside.parquet", str("a"))},
		{Add: gone}, {Add: old},
	}, Operation{Name: "WRITE"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := tbl.Commit(ctx, s, []Action{
		{Remove: &Remove{Path: fileSlash + "/part=a/gone.parquet", DeletionVector: gone.DeletionVector,
			DeletionTimestamp: ptr(now.Add(time.Hour).UnixMilli()), DataChange: true}},
		{Remove: &Remove{Path: "part=a/old.parquet", DeletionVector: old.DeletionVector,
			DeletionTimestamp: ptr(now.Add(-time.Hour).UnixMilli()), DataChange: true}},
	}, Operation{Name: "DELETE"}); err != nil {
		t.Fatal(err)
	}
	tbl.now = func() time.Time { return now.Add(time.Minute) }
	res, err := tbl.Vacuum(ctx, s, VacuumOptions{Retention: time.Second, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{expiredDV, "part=a/old.parquet", "part=a/orphan.parquet"}; !slices.Equal(res.Files, want) {
		t.Fatalf("vacuum deleted %q, want %q", res.Files, want)
	}
	for _, f := range []string{"outside.parquet", "orphan.parquet"} {
		if _, err := os.Stat(filepath.Join(other, f)); err != nil {
			t.Errorf("outside the table root: %v", err)
		}
	}
}

// TestVacuumAbortsOnPathItCannotPlace: a live or unexpired path VACUUM
// cannot decode aborts it before anything is deleted or committed, naming
// the path and what references it; an expired tombstone's does not matter.
func TestVacuumAbortsOnPathItCannotPlace(t *testing.T) {
	now := time.Now()
	recent, expired := ptr(now.Add(time.Hour).UnixMilli()), ptr(now.Add(-time.Hour).UnixMilli())
	for name, tc := range map[string]struct {
		actions []Action
		want    string // in the error; "" for no error
	}{
		"live add, bad escape": {actions: []Action{{Add: fakeAdd("part=a/x%zz.parquet", str("a"))}},
			want: `live add at version 1: delta: undecodable file path "part=a/x%zz.parquet"`},
		"live add, dot-dot": {actions: []Action{{Add: fakeAdd("../t2/x.parquet", str("a"))}},
			want: `live add at version 1: delta: undecodable file path "../t2/x.parquet"`},
		"live add, opaque URI": {actions: []Action{{Add: fakeAdd("file:x.parquet", str("a"))}},
			want: `live add at version 1: delta: undecodable file path "file:x.parquet"`},
		"unexpired tombstone": {actions: []Action{{Remove: &Remove{Path: "x%zz.parquet", DeletionTimestamp: recent}}},
			want: `unexpired tombstone at version 1: delta: undecodable file path "x%zz.parquet"`},
		"deletion vector not Z85": {actions: []Action{{Add: &Add{Path: "x.parquet", DeletionVector: &DeletionVector{StorageType: "u", PathOrInlineDv: "~~~~~~~~~~~~~~~~~~~~"}}}},
			want: `deletion vector of live add "x.parquet" at version 1`},
		"deletion vector storage type": {actions: []Action{{Add: &Add{Path: "x.parquet", DeletionVector: &DeletionVector{StorageType: "q", PathOrInlineDv: "x"}}}},
			want: `deletion vector of live add "x.parquet" at version 1: delta: undecodable file path: deletion vector storage type "q"`},
		"expired tombstone": {actions: []Action{{Remove: &Remove{Path: "x%zz.parquet", DeletionTimestamp: expired}}}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			store := storage.NewMem()
			tbl, s := newTestTable(t, store)
			if _, err := tbl.Commit(ctx, s, tc.actions, Operation{Name: "WRITE"}); err != nil {
				t.Fatal(err)
			}
			if err := store.Put(ctx, "orphan.parquet", []byte("x")); err != nil {
				t.Fatal(err)
			}
			tbl.now = func() time.Time { return now.Add(time.Minute) }
			_, err := tbl.Vacuum(ctx, s, VacuumOptions{Retention: time.Second, Force: true})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("vacuum: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrBadPath) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("vacuum: %v\nwant ErrBadPath with %s", err, tc.want)
			}
			if _, err := store.Stat(ctx, "orphan.parquet"); err != nil {
				t.Errorf("the aborted vacuum deleted a file: %v", err)
			}
			if s.Version() != 1 {
				t.Errorf("the aborted vacuum committed (version %d)", s.Version())
			}
		})
	}
}

// TestVacuumKeepsS3PathSpellings: on S3, live files named by s3a://,
// upper-case S3:// or a bare /prefix path, and their deletion vector files,
// survive VACUUM; only the orphan goes.
func TestVacuumKeepsS3PathSpellings(t *testing.T) {
	ctx := t.Context()
	cfg := testenv.MinIO(t)
	cfg.Prefix = "tables/vacuum"
	store, err := storage.NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tbl, s := newTestTable(t, store)
	for _, k := range []string{"part=a/s3a.parquet", "part=a/upper.parquet", "part=a/bare.parquet", "part=a/orphan.parquet",
		"ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"} {
		if err := store.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	s3a := fakeAdd("s3a://"+cfg.Bucket+"/"+cfg.Prefix+"/part=a/s3a.parquet", str("a"))
	s3a.DeletionVector = &DeletionVector{StorageType: "u", PathOrInlineDv: "ab^-aqEH.-t@S}K{vb[*k^", Offset: ptr(int32(1)), SizeInBytes: 40, Cardinality: 6}
	if _, err := tbl.Commit(ctx, s, []Action{
		{Add: s3a},
		{Add: fakeAdd("S3://"+strings.ToUpper(cfg.Bucket)+"/"+cfg.Prefix+"/part=a/upper.parquet", str("a"))},
		{Add: fakeAdd("/"+cfg.Prefix+"/part=a/bare.parquet", str("a"))},
	}, Operation{Name: "WRITE"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tbl.now = func() time.Time { return now.Add(time.Minute) }
	res, err := tbl.Vacuum(ctx, s, VacuumOptions{Retention: time.Second, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"part=a/orphan.parquet"}; !slices.Equal(res.Files, want) {
		t.Fatalf("vacuum deleted %q, want %q", res.Files, want)
	}
}
