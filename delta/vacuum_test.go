package delta

import (
	"errors"
	"slices"
	"testing"
	"time"

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
		"part=a/orphan.parquet", "part=a/.hidden.crc", "_tmp/x.parquet", "part=a%2Fb/live2.parquet"} {
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
	want := []string{"part=a/orphan.parquet", "part=a/removed-old.parquet"}
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
	} {
		if got := hiddenKey(key, cols); got != hidden {
			t.Errorf("hiddenKey(%q) = %v", key, got)
		}
	}
}
