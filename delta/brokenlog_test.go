package delta

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// copyGolden copies a reference table into a temp dir, so that tests can
// break it without touching the originals, and returns the copy's directory.
func copyGolden(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(goldenDir, name))); err != nil {
		t.Fatal(err)
	}
	return dst
}

// snapshotView is what a reader sees of a snapshot: version, protocol,
// metadata, live files and txns. Tombstones are left out: a checkpoint may
// drop expired ones that a JSON replay still has.
func snapshotView(t *testing.T, s *Snapshot) string {
	t.Helper()
	var b strings.Builder
	p, _ := json.Marshal(s.Protocol())
	fmt.Fprintf(&b, "version %d\nprotocol %s\nmetadata %s %s %v\n", s.Version(), p, s.Metadata().ID,
		s.Metadata().SchemaString, s.Metadata().Configuration)
	for _, a := range s.Files() {
		pv, _ := json.Marshal(a.PartitionValues) // sorted keys, values not pointers
		fmt.Fprintf(&b, "file %s size=%d pv=%s stats=%s\n", a.Path, a.Size, pv, a.Stats)
	}
	txns := s.Txns()
	for _, id := range slices.Sorted(maps.Keys(txns)) {
		fmt.Fprintf(&b, "txn %s=%d\n", id, txns[id])
	}
	return b.String()
}

func openDir(t *testing.T, dir string) (*Snapshot, error) {
	t.Helper()
	return NewTable(localStore(t, dir)).Snapshot(t.Context())
}

func mustView(t *testing.T, dir string) string {
	t.Helper()
	s, err := openDir(t, dir)
	if err != nil {
		t.Fatalf("snapshot of %s: %v", dir, err)
	}
	return snapshotView(t, s)
}

func logPath(dir, name string) string { return filepath.Join(dir, "_delta_log", name) }

// checkpointedTables make fresh copies of tables with a checkpoint at 10,
// later commits and txns: Spark's golden table (plus a txn commit, as it
// has none) and one this library writes (txns in the checkpoint too).
var checkpointedTables = map[string]func(t *testing.T) string{
	"spark": func(t *testing.T) string {
		dir := copyGolden(t, "spark-checkpoint")
		data, _ := EncodeActions([]Action{{Txn: &Txn{AppID: "app-15", Version: 15}}})
		if err := os.WriteFile(logPath(dir, "00000000000000000015.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	},
	"ours": func(t *testing.T) string {
		dir := t.TempDir()
		tbl, s := newTestTable(t, localStore(t, dir))
		for i := range 12 {
			appendCommit(t, tbl, s, fmt.Sprintf("part=a/f%d.parquet", i), &Txn{AppID: fmt.Sprintf("app-%d", i%3), Version: int64(i)})
			if s.CheckpointDue() {
				if err := tbl.Checkpoint(t.Context(), s); err != nil {
					t.Fatal(err)
				}
			}
		}
		return dir
	},
}

// TestTruncatedCheckpoint: a checkpoint cut short (or claiming more than
// it holds) is never read as fewer actions. With the commits before it still there the snapshot is rebuilt
// from JSON; without them the read fails naming the checkpoint.
func TestTruncatedCheckpoint(t *testing.T) {
	const cpName = "00000000000000000010.checkpoint.parquet"
	for table, build := range checkpointedTables {
		for _, cut := range []string{"empty", "half", "last byte", "inflated pages"} {
			for _, hint := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/hint=%v", table, cut, hint), func(t *testing.T) {
					dir := build(t)
					want := mustView(t, dir)
					if !strings.Contains(want, "\ntxn ") {
						t.Fatal("no txns; the test would not check them")
					}
					fi, err := os.Stat(logPath(dir, cpName))
					if err != nil {
						t.Fatal(err)
					}
					if cut == "inflated pages" {
						// Page headers claiming a gigabyte (internal/pqguard).
						data, err := os.ReadFile(logPath(dir, cpName))
						if err != nil {
							t.Fatal(err)
						}
						if err := os.WriteFile(logPath(dir, cpName), inflatePages(t, data), 0o644); err != nil {
							t.Fatal(err)
						}
					} else {
						n := map[string]int64{"empty": 0, "half": fi.Size() / 2, "last byte": fi.Size() - 1}[cut]
						if err := os.Truncate(logPath(dir, cpName), n); err != nil {
							t.Fatal(err)
						}
					}
					if !hint {
						os.Remove(logPath(dir, "_last_checkpoint"))
					}
					s, err := openDir(t, dir)
					if err != nil {
						t.Fatalf("all commits are there, yet: %v", err)
					}
					if got := snapshotView(t, s); got != want {
						t.Fatalf("JSON replay differs:\n%s\nwant:\n%s", got, want)
					}
					if s.CheckpointVersion() != -1 {
						t.Errorf("snapshot claims checkpoint %d", s.CheckpointVersion())
					}
					// Without the commits the checkpoint replaced, nothing can
					// stand in for it.
					for v := range 10 {
						if err := os.Remove(logPath(dir, fmt.Sprintf("%020d.json", v))); err != nil {
							t.Fatal(err)
						}
					}
					_, err = openDir(t, dir)
					var ce *CorruptLogError
					if !errors.As(err, &ce) || ce.File != LogDir+cpName {
						t.Fatalf("without commits 0-9: got %v, want a *CorruptLogError for %s", err, cpName)
					}
				})
			}
		}
	}
}

// TestCorruptCheckpointReported: a table read around a corrupt checkpoint
// reports the file once (OnCorruptCheckpoint), however often it is read;
// a read that cannot get around it reports nothing (its error names the
// file).
func TestCorruptCheckpointReported(t *testing.T) {
	const cpName = "00000000000000000010.checkpoint.parquet"
	dir := checkpointedTables["ours"](t)
	if err := os.Truncate(logPath(dir, cpName), 100); err != nil {
		t.Fatal(err)
	}
	var reports []string
	tbl := NewTable(localStore(t, dir), OnCorruptCheckpoint(func(file string, err error) {
		if !isCorrupt(err) {
			t.Errorf("reported %v, not a *CorruptLogError", err)
		}
		reports = append(reports, file)
	}))
	for range 2 {
		if _, err := tbl.Snapshot(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tbl.SnapshotAt(t.Context(), 11); err != nil {
		t.Fatal(err)
	}
	if want := []string{LogDir + cpName}; !slices.Equal(reports, want) {
		t.Fatalf("reports %q; want %q once", reports, want)
	}

	reports = nil
	if err := os.Remove(logPath(dir, "00000000000000000003.json")); err != nil {
		t.Fatal(err)
	}
	silent := NewTable(localStore(t, dir), OnCorruptCheckpoint(func(file string, _ error) { reports = append(reports, file) }))
	if _, err := silent.Snapshot(t.Context()); !isCorrupt(err) || len(reports) != 0 {
		t.Fatalf("with no way around the checkpoint: %v, reports %q; want its error and no report", err, reports)
	}
}

// TestBadLastCheckpoint: _last_checkpoint is only a hint; a wrong or corrupt
// one falls back to listing the log.
func TestBadLastCheckpoint(t *testing.T) {
	want := mustView(t, filepath.Join(goldenDir, "spark-checkpoint"))
	for name, hint := range map[string]string{
		"missing checkpoint 12":   `{"version":12,"size":13}`,
		"missing checkpoint 5":    `{"version":5,"size":13}`,
		"past the end":            `{"version":100,"size":13}`,
		"multi-part that is gone": `{"version":10,"size":13,"parts":3}`,
		"truncated JSON":          `{"version":10,"si`,
		"not JSON":                "\x00\x01garbage",
		"no version":              `{"size":13}`,
		"negative version":        `{"version":-3}`,
		"empty":                   "",
	} {
		t.Run(name, func(t *testing.T) {
			dir := copyGolden(t, "spark-checkpoint")
			if err := os.WriteFile(logPath(dir, "_last_checkpoint"), []byte(hint), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := mustView(t, dir); got != want {
				t.Fatalf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestLogGaps: missing commits are errors, never a silently shorter history.
func TestLogGaps(t *testing.T) {
	t.Run("gap without checkpoint", func(t *testing.T) {
		dir := copyGolden(t, "rs-simple_table")
		os.Remove(logPath(dir, "00000000000000000002.json"))
		if _, err := openDir(t, dir); !errors.Is(err, ErrVersionGap) {
			t.Fatalf("got %v, want ErrVersionGap", err)
		}
		// Time travel to before the gap still works.
		if s, err := NewTable(localStore(t, dir)).SnapshotAt(t.Context(), 1); err != nil || s.Version() != 1 {
			t.Fatalf("version 1: %v", err)
		}
	})
	t.Run("gap after checkpoint", func(t *testing.T) {
		dir := copyGolden(t, "spark-checkpoint")
		os.Remove(logPath(dir, "00000000000000000012.json"))
		if _, err := openDir(t, dir); !errors.Is(err, ErrVersionGap) {
			t.Fatalf("got %v, want ErrVersionGap", err)
		}
	})
	t.Run("gap covered by checkpoint", func(t *testing.T) {
		want := mustView(t, filepath.Join(goldenDir, "spark-checkpoint"))
		dir := copyGolden(t, "spark-checkpoint")
		os.Remove(logPath(dir, "00000000000000000004.json"))
		if got := mustView(t, dir); got != want {
			t.Fatalf("got\n%s\nwant\n%s", got, want)
		}
		if _, err := NewTable(localStore(t, dir)).SnapshotAt(t.Context(), 6); !errors.Is(err, ErrVersionGap) {
			t.Fatalf("time travel across the gap: got %v, want ErrVersionGap", err)
		}
	})
	t.Run("no first commit", func(t *testing.T) {
		dir := copyGolden(t, "rs-simple_table")
		os.Remove(logPath(dir, "00000000000000000000.json"))
		if _, err := openDir(t, dir); !errors.Is(err, ErrVersionNotFound) {
			t.Fatalf("got %v, want ErrVersionNotFound", err)
		}
	})
	t.Run("no first commit, checkpoint gone", func(t *testing.T) {
		dir := copyGolden(t, "rs-with_checkpoint_no_last_checkpoint")
		os.Remove(logPath(dir, "00000000000000000000.json"))
		os.Remove(logPath(dir, "00000000000000000002.checkpoint.parquet"))
		if _, err := openDir(t, dir); !errors.Is(err, ErrVersionNotFound) {
			t.Fatalf("got %v, want ErrVersionNotFound", err)
		}
	})
}

// appendProtocol commits a protocol change as the next version of a copied
// golden table.
func appendProtocol(t *testing.T, dir string, p *Protocol) {
	t.Helper()
	s, err := openDir(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := EncodeActions([]Action{{Protocol: p}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logPath(dir, fmt.Sprintf("%020d.json", s.Version()+1)), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestUnsupportedProtocol: tables needing reader features this library lacks
// are refused, not misread; unknown writer features refuse writes only;
// supported features that are not active refuse nothing.
func TestUnsupportedProtocol(t *testing.T) {
	for name, p := range map[string]*Protocol{
		"unknown feature": {MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"geospatial"}, WriterFeatures: []string{"geospatial"}},
		"reader v4":       {MinReaderVersion: 4, MinWriterVersion: 7},
		"catalogManaged":  {MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz", "catalogManaged"}, WriterFeatures: []string{"catalogManaged"}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := copyGolden(t, "spark-checkpoint")
			appendProtocol(t, dir, p)
			_, err := openDir(t, dir)
			var ue *UnsupportedError
			if !errors.As(err, &ue) || ue.Write {
				t.Fatalf("got %v, want a read *UnsupportedError", err)
			}
			if len(p.ReaderFeatures) > 0 && !slices.Contains(ue.Features, p.ReaderFeatures[len(p.ReaderFeatures)-1]) {
				t.Errorf("error names %v", ue.Features)
			}
			// The versions before the upgrade stay readable.
			if s, err := NewTable(localStore(t, dir)).SnapshotAt(t.Context(), 14); err != nil || s.Version() != 14 {
				t.Fatalf("version 14: %v", err)
			}
		})
	}
	t.Run("unknown writer feature", func(t *testing.T) {
		dir := copyGolden(t, "spark-checkpoint")
		appendProtocol(t, dir, &Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "fancyNewThing"}})
		tbl := NewTable(localStore(t, dir))
		s, err := tbl.Snapshot(t.Context())
		if err != nil {
			t.Fatalf("reading needs no writer feature: %v", err)
		}
		var ue *UnsupportedError
		if err := s.CheckWrite(); !errors.As(err, &ue) || !ue.Write || !slices.Equal(ue.Features, []string{"fancyNewThing"}) {
			t.Fatalf("CheckWrite: got %v", err)
		}
		if _, err := tbl.Commit(t.Context(), s, []Action{{Add: fakeAdd("x.parquet", nil)}}, Operation{Name: "WRITE"}); !errors.As(err, &ue) {
			t.Fatalf("Commit: got %v", err)
		}
		if _, err := os.Stat(logPath(dir, "00000000000000000016.json")); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("a refused commit was written")
		}
	})
	t.Run("supported, not active", func(t *testing.T) {
		dir := copyGolden(t, "spark-checkpoint")
		appendProtocol(t, dir, &Protocol{MinReaderVersion: 3, MinWriterVersion: 7,
			ReaderFeatures: []string{"deletionVectors", "columnMapping"},
			WriterFeatures: []string{"deletionVectors", "columnMapping", "generatedColumns", "checkConstraints"}})
		s, err := openDir(t, dir)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		for _, op := range []Op{OpAppend, OpOptimize, OpVacuum} {
			if err := s.Check(op); err != nil {
				t.Errorf("%s: %v", op, err)
			}
		}
	})
}

// TestTimeTravelMatchesDeltaRS: every version of a table reads as delta-rs
// reads that version.
func TestTimeTravelMatchesDeltaRS(t *testing.T) {
	dir, _ := filepath.Abs(copyGolden(t, "spark-time-travel-start-start20-start40"))
	tbl := NewTable(localStore(t, dir))
	prev := -1
	for v := range int64(3) {
		s, err := tbl.SnapshotAt(t.Context(), v)
		if err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		want := deltaRS(t, dir, "--version", fmt.Sprint(v))
		if s.Version() != v || want.Version != v {
			t.Fatalf("asked for %d: ours %d, delta-rs %d", v, s.Version(), want.Version)
		}
		var ours, theirs []string
		for _, a := range s.Files() {
			n := "?" // this table has no stats
			if st, err := ParseStats(a.Stats); err == nil && a.Stats != "" {
				n = fmt.Sprint(st.NumRecords)
			}
			ours = append(ours, fmt.Sprintf("%s size=%d n=%s", a.Path, a.Size, n))
		}
		for _, f := range want.Files {
			n := "?"
			if f.NumRecords != nil {
				n = fmt.Sprint(*f.NumRecords)
			}
			theirs = append(theirs, fmt.Sprintf("%s size=%d n=%s", f.Path, f.Size, n))
		}
		if !slices.Equal(ours, theirs) {
			t.Errorf("version %d:\nours     %v\ndelta-rs %v", v, ours, theirs)
		}
		if len(ours) <= prev {
			t.Errorf("version %d has %d files, version %d had %d: not a history of appends", v, len(ours), v-1, prev)
		}
		prev = len(ours)
	}
}

// TestTruncatedCheckpointOlderOne: a corrupt newest checkpoint falls back to
// the previous checkpoint, not all the way to version 0.
func TestTruncatedCheckpointOlderOne(t *testing.T) {
	dir := t.TempDir()
	tbl, s := newTestTable(t, localStore(t, dir))
	for i := range 23 {
		appendCommit(t, tbl, s, fmt.Sprintf("part=a/f%d.parquet", i), &Txn{AppID: "app", Version: int64(i)})
		if s.CheckpointDue() {
			if err := tbl.Checkpoint(t.Context(), s); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := mustView(t, dir)
	if err := os.Truncate(logPath(dir, "00000000000000000020.checkpoint.parquet"), 100); err != nil {
		t.Fatal(err)
	}
	for v := range 5 { // commits the fallback must not need
		os.Remove(logPath(dir, fmt.Sprintf("%020d.json", v)))
	}
	got, err := openDir(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.CheckpointVersion() != 10 || snapshotView(t, got) != want {
		t.Fatalf("checkpoint %d:\n%s\nwant:\n%s", got.CheckpointVersion(), snapshotView(t, got), want)
	}
}
