package delta

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

func testSchema() *StructType {
	return &StructType{Fields: []StructField{
		{Name: "id", Type: Long, Nullable: false},
		{Name: "part", Type: String, Nullable: true},
		{Name: "value", Type: Double, Nullable: true},
	}}
}

func newTestTable(t *testing.T, store storage.Store) (*Table, *Snapshot) {
	t.Helper()
	tbl := NewTable(store)
	s, err := tbl.Create(t.Context(), testSchema(), []string{"part"}, nil)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return tbl, s
}

func str(s string) *string { return &s }

func fakeAdd(path string, part *string) *Add {
	return &Add{Path: path, PartitionValues: map[string]*string{"part": part}, Size: 100,
		ModificationTime: 1, DataChange: true, Stats: `{"numRecords":1}`}
}

func appendCommit(t *testing.T, tbl *Table, s *Snapshot, path string, txn *Txn) int64 {
	t.Helper()
	actions := []Action{{Add: fakeAdd(path, str("a"))}}
	if txn != nil {
		actions = append(actions, Action{Txn: txn})
	}
	v, err := tbl.Commit(t.Context(), s, actions, Operation{Name: "WRITE"})
	if err != nil {
		t.Fatalf("commit %s: %v", path, err)
	}
	return v
}

func TestCreateCommitSnapshot(t *testing.T) {
	store := storage.NewMem()
	tbl, s := newTestTable(t, store)
	if _, err := tbl.Create(t.Context(), testSchema(), nil, nil); !errors.Is(err, ErrTableExists) {
		t.Fatalf("second create: got %v, want ErrTableExists", err)
	}
	for i := range 5 {
		v := appendCommit(t, tbl, s, fmt.Sprintf("part=a/f%d.parquet", i), &Txn{AppID: "app-t-0", Version: int64(i * 10)})
		if v != int64(i+1) {
			t.Fatalf("commit %d landed at version %d", i, v)
		}
	}
	rm := int64(1000)
	if _, err := tbl.Commit(t.Context(), s, []Action{{Remove: &Remove{Path: "part=a/f0.parquet", DeletionTimestamp: &rm, DataChange: true}}}, Operation{Name: "DELETE"}); err != nil {
		t.Fatal(err)
	}
	got, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got.Version() != 6 || got.NumFiles() != 4 || s.NumFiles() != 4 {
		t.Fatalf("version %d files %d (in-memory %d), want 6 and 4", got.Version(), got.NumFiles(), s.NumFiles())
	}
	if v, ok := got.TxnVersion("app-t-0"); !ok || v != 40 {
		t.Fatalf("txn = %d %v, want 40", v, ok)
	}
	if len(got.Tombstones()) != 1 || got.Tombstones()[0].Path != "part=a/f0.parquet" {
		t.Fatalf("tombstones %v", got.Tombstones())
	}
	st, _ := got.Schema()
	if st.SchemaString() != testSchema().SchemaString() {
		t.Fatalf("schema %s", st.SchemaString())
	}
	// Commit files start with commitInfo and carry Spark's fields.
	data, _ := store.Get(t.Context(), CommitKey(1))
	first, _, _ := strings.Cut(string(data), "\n")
	for _, want := range []string{`{"commitInfo":{"timestamp":`, `"operation":"WRITE"`, `"readVersion":0`, `"isBlindAppend":true`, `"txnId":`} {
		if !strings.Contains(first, want) {
			t.Errorf("commitInfo line %s lacks %s", first, want)
		}
	}
}

func TestTimeTravel(t *testing.T) {
	store := storage.NewMem()
	tbl, s := newTestTable(t, store)
	for i := range 4 {
		appendCommit(t, tbl, s, fmt.Sprintf("f%d.parquet", i), nil)
		time.Sleep(5 * time.Millisecond)
	}
	s2, err := tbl.SnapshotAt(t.Context(), 2)
	if err != nil || s2.Version() != 2 || s2.NumFiles() != 2 {
		t.Fatalf("version 2: %v, %+v", err, s2)
	}
	if _, err := tbl.SnapshotAt(t.Context(), 9); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("version 9: got %v", err)
	}
	info, _ := store.Stat(t.Context(), CommitKey(3))
	s3, err := tbl.SnapshotAtTime(t.Context(), info.ModTime)
	if err != nil || s3.Version() != 3 {
		t.Fatalf("at time of v3: %v %v", s3, err)
	}
	if _, err := tbl.SnapshotAtTime(t.Context(), time.Unix(0, 0)); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("before creation: got %v", err)
	}
	hist, err := tbl.History(t.Context(), 0)
	if err != nil || len(hist) != 5 || hist[0].Version != 4 || hist[4].Operation != "CREATE TABLE" {
		t.Fatalf("history %v %+v", err, hist)
	}
}

func TestUpdateFollowsOtherWriters(t *testing.T) {
	store := storage.NewMem()
	tbl, s := newTestTable(t, store)
	other, _ := tbl.Snapshot(t.Context())
	appendCommit(t, tbl, other, "x.parquet", &Txn{AppID: "other", Version: 7})
	if err := tbl.Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.TxnVersion("other"); s.Version() != 1 || s.NumFiles() != 1 || v != 7 {
		t.Fatalf("after update: version %d files %d txn %d", s.Version(), s.NumFiles(), v)
	}
}

// TestConcurrentBlindAppends: writers racing on one table each land every
// commit exactly once, at contiguous versions.
func TestConcurrentBlindAppends(t *testing.T) {
	stores := map[string]func(t *testing.T) storage.Store{
		"mem": func(*testing.T) storage.Store { return storage.NewMem() },
		"local": func(t *testing.T) storage.Store {
			l, err := storage.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		"minio": func(t *testing.T) storage.Store {
			s, err := storage.NewS3(testenv.MinIO(t))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			tbl, _ := newTestTable(t, store)
			const writers, commits = 4, 8
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s, err := NewTable(store).Snapshot(t.Context())
					if err != nil {
						errs <- err
						return
					}
					for i := range commits {
						app := fmt.Sprintf("writer-%d", w)
						_, err := tbl.Commit(t.Context(), s, []Action{
							{Add: fakeAdd(fmt.Sprintf("w%d-%d.parquet", w, i), str("a"))},
							{Txn: &Txn{AppID: app, Version: int64(i)}},
						}, Operation{Name: "STREAMING UPDATE"})
						if err != nil {
							errs <- fmt.Errorf("writer %d commit %d: %w", w, i, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			s, err := tbl.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if s.Version() != writers*commits || s.NumFiles() != writers*commits {
				t.Fatalf("version %d with %d files, want %d of each", s.Version(), s.NumFiles(), writers*commits)
			}
			for w := range writers {
				if v, ok := s.TxnVersion(fmt.Sprintf("writer-%d", w)); !ok || v != commits-1 {
					t.Errorf("writer %d txn %d", w, v)
				}
			}
		})
	}
}

func TestConflicts(t *testing.T) {
	ctx := t.Context()
	store := storage.NewMem()
	tbl, s1 := newTestTable(t, store)
	s2, _ := tbl.Snapshot(ctx)
	appendCommit(t, tbl, s1, "a.parquet", &Txn{AppID: "app-t-0", Version: 5})
	_, err := tbl.Commit(ctx, s2, []Action{{Add: fakeAdd("b.parquet", nil)}, {Txn: &Txn{AppID: "app-t-0", Version: 5}}}, Operation{Name: "WRITE"})
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Kind != ConflictTxn || ce.AppID != "app-t-0" || ce.Version != 1 {
		t.Fatalf("same appId: got %v", err)
	}
	// Metadata changed under us.
	s3, _ := tbl.Snapshot(ctx)
	meta := s1.Metadata()
	meta.Configuration = map[string]string{"delta.appendOnly": "false"}
	if _, err := tbl.Commit(ctx, s1, []Action{{MetaData: &meta}}, Operation{Name: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, s3, []Action{{Add: fakeAdd("c.parquet", nil)}}, Operation{Name: "WRITE"}); !IsConflict(err, ConflictMetadata) {
		t.Fatalf("metadata change: got %v", err)
	}
	// Two removes of the same file.
	s4, _ := tbl.Snapshot(ctx)
	s5, _ := tbl.Snapshot(ctx)
	rm := []Action{{Remove: &Remove{Path: "a.parquet", DataChange: false}}}
	if _, err := tbl.Commit(ctx, s4, rm, Operation{Name: "OPTIMIZE"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, s5, rm, Operation{Name: "OPTIMIZE"}); !IsConflict(err, ConflictDelete) {
		t.Fatalf("double remove: got %v", err)
	}
}

// TestCommitLostResponse: the commit file lands but the writer sees an
// error; reading the log resolves it as ours, without a second commit.
func TestCommitLostResponse(t *testing.T) {
	mem := storage.NewMem()
	f := storage.NewFaulty(mem)
	tbl, s := newTestTable(t, f)
	f.Fail(storage.Rule{Op: storage.OpPutIfAbsent, Prefix: LogDir, Times: 1, After: true})
	v := appendCommit(t, tbl, s, "a.parquet", nil)
	got, err := NewTable(mem).Snapshot(t.Context())
	if err != nil || v != 1 || got.Version() != 1 || got.NumFiles() != 1 {
		t.Fatalf("v=%d snapshot %v %v", v, got, err)
	}
	// A put that fails before landing is retried at the same version.
	f.Fail(storage.Rule{Op: storage.OpPutIfAbsent, Prefix: LogDir, Times: 1})
	if v := appendCommit(t, tbl, s, "b.parquet", nil); v != 2 {
		t.Fatalf("after a failed put: version %d", v)
	}
}

func TestBrokenLogs(t *testing.T) {
	ctx := context.Background()
	store := storage.NewMem()
	tbl, s := newTestTable(t, store)
	appendCommit(t, tbl, s, "a.parquet", nil)
	appendCommit(t, tbl, s, "b.parquet", nil)

	if _, err := NewTable(storage.NewMem()).Snapshot(ctx); !errors.Is(err, ErrTableNotFound) {
		t.Errorf("empty: got %v", err)
	}
	// Corrupt JSON line.
	good, _ := store.Get(ctx, CommitKey(2))
	store.Put(ctx, CommitKey(2), append(append([]byte{}, good...), []byte("{\"add\":{\"path\n")...))
	var cle *CorruptLogError
	if _, err := tbl.Snapshot(ctx); !errors.As(err, &cle) || cle.File != CommitKey(2) || cle.Line == 0 {
		t.Errorf("corrupt line: got %v", err)
	}
	store.Put(ctx, CommitKey(2), good)
	// Version gap.
	store.Put(ctx, CommitKey(4), good)
	if _, err := tbl.Snapshot(ctx); !errors.Is(err, ErrVersionGap) {
		t.Errorf("gap: got %v", err)
	}
	store.Delete(ctx, CommitKey(4))
	// Unsupported reader feature.
	p := &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"geospatial"}, WriterFeatures: []string{"geospatial"}}
	upgrade, _ := EncodeActions([]Action{{Protocol: p}})
	store.Put(ctx, CommitKey(3), upgrade)
	var ue *UnsupportedError
	if _, err := tbl.Snapshot(ctx); !errors.As(err, &ue) || ue.Features[0] != "geospatial" {
		t.Errorf("unsupported feature: got %v", err)
	}
}

func TestParseInterval(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"interval 7 days": 7 * 24 * time.Hour, "interval 1 week": 7 * 24 * time.Hour,
		"30 days": 30 * 24 * time.Hour, "168h": 168 * time.Hour, "interval 2 hours": 2 * time.Hour,
	} {
		if got, err := ParseInterval(in); err != nil || got != want {
			t.Errorf("ParseInterval(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseInterval("soon"); err == nil {
		t.Error("ParseInterval(soon) should fail")
	}
}

// localStore opens a local store at dir for a test.
func localStore(t testing.TB, dir string) *storage.Local {
	t.Helper()
	s, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Update follows a log whose commits after the snapshot were cleaned up
// behind a newer checkpoint, instead of stopping at the gap (a writer would
// then reuse a version), and reports a gap no checkpoint covers.
func TestUpdateAcrossCleanedUpCommits(t *testing.T) {
	store := storage.NewMem()
	tbl, s := newTestTable(t, store)
	other, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 { // versions 1–4
		appendCommit(t, tbl, other, fmt.Sprintf("f%d.parquet", i), &Txn{AppID: "other", Version: int64(i)})
		if other.Version() == 3 {
			if err := tbl.Checkpoint(t.Context(), other); err != nil {
				t.Fatal(err)
			}
		}
	}
	lagging, err := tbl.SnapshotAt(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(2); v <= 3; v++ {
		if err := store.Delete(t.Context(), CommitKey(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tbl.Update(t.Context(), lagging); err != nil {
		t.Fatalf("update across cleaned-up commits 2–3 (checkpoint at 3): %v", err)
	}
	if v, _ := lagging.TxnVersion("other"); lagging.Version() != 4 || lagging.NumFiles() != 4 || v != 3 {
		t.Fatalf("after update: version %d, %d files, txn %d; want 4, 4, 3", lagging.Version(), lagging.NumFiles(), v)
	}

	// Version 4's commit gone with no checkpoint at or after it: a real gap.
	if err := store.Delete(t.Context(), CommitKey(4)); err != nil {
		t.Fatal(err)
	}
	appendCommit(t, tbl, other, "f5.parquet", nil) // version 5
	if err := tbl.Update(t.Context(), s); !errors.Is(err, ErrVersionGap) {
		t.Fatalf("update over a missing version 4 without a checkpoint: got %v, want ErrVersionGap", err)
	}
}
