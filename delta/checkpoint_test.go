package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/storage"
)

// ckStore is an in-memory store that records the order of Puts.
type ckStore struct {
	*storage.Mem
	mu   sync.Mutex
	puts []string // keys in Put order
}

func newCkStore() *ckStore { return &ckStore{Mem: storage.NewMem()} }

// loadCkStore copies a directory tree into a new ckStore.
func loadCkStore(t testing.TB, dir string) *ckStore {
	t.Helper()
	s := newCkStore()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		return s.Mem.Put(context.Background(), filepath.ToSlash(rel), data)
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *ckStore) Put(ctx context.Context, key string, data []byte) error {
	s.mu.Lock()
	s.puts = append(s.puts, key)
	s.mu.Unlock()
	return s.Mem.Put(ctx, key, data)
}

// object returns a stored object's bytes, nil when absent.
func (s *ckStore) object(key string) []byte {
	b, _ := s.Mem.Get(context.Background(), key)
	return b
}

// count is the number of stored objects.
func (s *ckStore) count() int {
	objs, _ := s.Mem.List(context.Background(), "", "")
	return len(objs)
}

func readAll(t testing.TB, store storage.Store, keys ...string) []Action {
	t.Helper()
	var out []Action
	err := ReadCheckpoint(context.Background(), store, keys, func(a *Action) error {
		out = append(out, *a)
		return nil
	})
	if err != nil {
		t.Fatalf("ReadCheckpoint(%v): %v", keys, err)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func TestParseLogFileName(t *testing.T) {
	tests := []struct {
		name        string
		version     int64
		kind        LogFileKind
		part, parts int
		ok          bool
	}{
		{"00000000000000000007.json", 7, LogFileCommit, 0, 0, true},
		{"_delta_log/00000000000000000007.json", 7, LogFileCommit, 0, 0, true},
		{"00000000000000000010.checkpoint.parquet", 10, LogFileCheckpoint, 1, 1, true},
		{"00000000000000000010.checkpoint.0000000002.0000000003.parquet", 10, LogFileMultiPartCheckpoint, 2, 3, true},
		{"00000000000000000010.checkpoint.0000000004.0000000003.parquet", 0, LogFileUnknown, 0, 0, false},
		{"00000000000000000010.checkpoint.0000000000.0000000003.parquet", 0, LogFileUnknown, 0, 0, false},
		{"00000000000000000010.crc", 10, LogFileCRC, 0, 0, true},
		{"_last_checkpoint", -1, LogFileLastCheckpoint, 0, 0, true},
		{"_delta_log/_last_checkpoint", -1, LogFileLastCheckpoint, 0, 0, true},
		{"00000000000000000002.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json", 2, LogFileUUIDCheckpoint, 0, 0, true},
		{"00000000000000000002.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.parquet", 2, LogFileUUIDCheckpoint, 0, 0, true},
		{"00000000000000000003.00000000000000000005.compacted.json", 3, LogFileCompacted, 0, 0, true},
		{".00000000000000000010.checkpoint.parquet.crc", 0, LogFileUnknown, 0, 0, false},
		{".00000000000000000000.json.crc", 0, LogFileUnknown, 0, 0, false},
		{"0000000000000000007.json", 0, LogFileUnknown, 0, 0, false},
		{"0000000000000000000a.json", 0, LogFileUnknown, 0, 0, false},
		{"00000000000000000007.json.tmp", 0, LogFileUnknown, 0, 0, false},
		{"_commits/00000000000000000007.json", 0, LogFileUnknown, 0, 0, false},
		{"00000000000000000007.checkpoint.parquet.tmp", 0, LogFileUnknown, 0, 0, false},
		{"00000000000000000002.checkpoint.not-a-uuid.json", 0, LogFileUnknown, 0, 0, false},
	}
	for _, tt := range tests {
		v, k, p, n, ok := ParseLogFileName(tt.name)
		if v != tt.version || k != tt.kind || p != tt.part || n != tt.parts || ok != tt.ok {
			t.Errorf("ParseLogFileName(%q) = %d, %v, %d, %d, %v; want %d, %v, %d, %d, %v",
				tt.name, v, k, p, n, ok, tt.version, tt.kind, tt.part, tt.parts, tt.ok)
		}
	}
	// The key helpers produce names the parser accepts.
	for _, key := range append(CheckpointKeys(12, 3), CommitKey(12), CheckpointKey(12)) {
		if v, _, _, _, ok := ParseLogFileName(key); !ok || v != 12 {
			t.Errorf("ParseLogFileName(%q) = %d, %v", key, v, ok)
		}
	}
	if got := CheckpointPartKey(5, 1, 2); got != "_delta_log/00000000000000000005.checkpoint.0000000001.0000000002.parquet" {
		t.Errorf("CheckpointPartKey = %s", got)
	}
	if got := CheckpointKeys(5, 1); !slices.Equal(got, []string{"_delta_log/00000000000000000005.checkpoint.parquet"}) {
		t.Errorf("CheckpointKeys(5, 1) = %v", got)
	}
}

func TestReadLastCheckpoint(t *testing.T) {
	ctx := context.Background()
	spark, err := os.ReadFile(filepath.Join(goldenDir, "spark-checkpoint/_delta_log/_last_checkpoint"))
	if err != nil {
		t.Skipf("golden table not available: %v", err)
	}
	tests := []struct {
		name, content string
		want          *LastCheckpoint
		keys          []string
		corrupt       bool
	}{
		{name: "spark with checkpointSchema and checksum", content: string(spark),
			want: &LastCheckpoint{Version: 10, Size: 13, SizeInBytes: 14800, NumOfAddFiles: 1},
			keys: []string{CheckpointKey(10)}},
		{name: "old delta-rs, size in bytes, parts null", content: `{"version":2,"size":15330,"parts":null}`,
			want: &LastCheckpoint{Version: 2, Size: 15330}, keys: []string{CheckpointKey(2)}},
		{name: "delta-rs snake case", content: `{"size":6,"size_in_bytes":23521,"version":1}`,
			want: &LastCheckpoint{Version: 1, Size: 6}, keys: []string{CheckpointKey(1)}},
		{name: "multi-part", content: `{"version":4,"size":9,"parts":2}`,
			want: &LastCheckpoint{Version: 4, Size: 9, Parts: ptr(2)}, keys: CheckpointKeys(4, 2)},
		{name: "truncated", content: `{"version":10,"si`, corrupt: true},
		{name: "empty", content: ``, corrupt: true},
		{name: "not an object", content: `[1]`, corrupt: true},
		{name: "no version", content: `{"size":3}`, corrupt: true},
		{name: "negative version", content: `{"version":-1,"size":3}`, corrupt: true},
		{name: "zero parts", content: `{"version":1,"size":3,"parts":0}`, corrupt: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newCkStore()
			store.Put(ctx, LastCheckpointKey, []byte(tt.content))
			lc, err := ReadLastCheckpoint(ctx, store)
			if tt.corrupt {
				var ce *CorruptLogError
				if !errors.As(err, &ce) || ce.File != LastCheckpointKey {
					t.Fatalf("got %v, %v; want CorruptLogError", lc, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(lc, tt.want) {
				t.Errorf("got %+v, want %+v", lc, tt.want)
			}
			if !slices.Equal(lc.Keys(), tt.keys) {
				t.Errorf("Keys() = %v, want %v", lc.Keys(), tt.keys)
			}
		})
	}
	_, err = ReadLastCheckpoint(ctx, newCkStore())
	if !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("absent: got %v, want ErrNotExist", err)
	}
}

// sampleActions covers every field the checkpoint schema carries.
func sampleActions() []Action {
	red, empty := "red", ""
	return []Action{
		{Protocol: &Protocol{MinReaderVersion: 3, MinWriterVersion: 7,
			ReaderFeatures: []string{"deletionVectors", "timestampNtz"},
			WriterFeatures: []string{"deletionVectors", "domainMetadata", "timestampNtz"}}},
		{MetaData: &Metadata{ID: "6a2b9c1e-0000-4000-8000-000000000001", Name: ptr("events"), Description: ptr(""),
			Format:           Format{Provider: "parquet", Options: map[string]string{"k": "v"}},
			SchemaString:     `{"type":"struct","fields":[{"name":"color","type":"string","nullable":true,"metadata":{}}]}`,
			PartitionColumns: []string{"color", "day"}, Configuration: map[string]string{"delta.checkpointInterval": "10"},
			CreatedTime: ptr(int64(1700000000000))}},
		{Add: &Add{Path: "color=red/day=__HIVE_DEFAULT_PARTITION__/part-0.parquet",
			PartitionValues: map[string]*string{"color": &red, "day": nil}, Size: 1234, ModificationTime: 1700000000001,
			DataChange: false, Stats: `{"numRecords":3}`, Tags: map[string]string{"INSERTION_TIME": "1700000000000000", "e": ""},
			DeletionVector: &DeletionVector{StorageType: "u", PathOrInlineDv: "ab^-aqEH.-t@S}K{vb[*k^", Offset: ptr(int32(4)),
				SizeInBytes: 40, Cardinality: 6, MaxRowIndex: ptr(int64(99))},
			BaseRowID: ptr(int64(10)), DefaultRowCommitVersion: ptr(int64(3))}},
		{Add: &Add{Path: "color=/part-1.parquet", PartitionValues: map[string]*string{"color": &empty, "day": nil},
			Size: 1, ModificationTime: 2,
			DeletionVector: &DeletionVector{StorageType: "i", PathOrInlineDv: "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", SizeInBytes: 40, Cardinality: 1}}},
		{Add: &Add{Path: "plain.parquet", PartitionValues: map[string]*string{}, Size: 0, ModificationTime: 0}},
		{Remove: &Remove{Path: "old.parquet", DeletionTimestamp: ptr(int64(1700000000002)), DataChange: true,
			ExtendedFileMetadata: ptr(true), PartitionValues: map[string]*string{"color": nil}, Size: ptr(int64(77)),
			DeletionVector: &DeletionVector{StorageType: "p", PathOrInlineDv: "s3://b/dv.bin", Offset: ptr(int32(1)), SizeInBytes: 2, Cardinality: 3},
			BaseRowID:      ptr(int64(1)), DefaultRowCommitVersion: ptr(int64(2))}},
		{Remove: &Remove{Path: "minimal.parquet"}},
		{Txn: &Txn{AppID: "deltaflow-topic-0", Version: 42, LastUpdated: ptr(int64(1700000000003))}},
		{Txn: &Txn{AppID: "no-last-updated", Version: 0}},
		{DomainMetadata: &DomainMetadata{Domain: "delta.rowTracking", Configuration: `{"rowIdHighWaterMark":9}`}},
		{DomainMetadata: &DomainMetadata{Domain: "gone", Configuration: "{}", Removed: true}},
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	ctx := context.Background()
	store := newCkStore()
	actions := sampleActions()
	// commitInfo and unknown actions never go into a checkpoint.
	in := append(slices.Clone(actions),
		Action{CommitInfo: &CommitInfo{Timestamp: 1, Operation: "WRITE"}},
		Action{Unknown: json.RawMessage(`{"cdc":{"path":"x"}}`)})
	lc, err := WriteCheckpoint(ctx, store, 7, in)
	if err != nil {
		t.Fatal(err)
	}
	data := store.object(CheckpointKey(7))
	want := &LastCheckpoint{Version: 7, Size: int64(len(actions)), SizeInBytes: int64(len(data)), NumOfAddFiles: 3}
	if !reflect.DeepEqual(lc, want) {
		t.Errorf("LastCheckpoint = %+v, want %+v", lc, want)
	}
	// The checkpoint is complete before the hint names it.
	if !slices.Equal(store.puts, []string{CheckpointKey(7), LastCheckpointKey}) {
		t.Errorf("puts = %v", store.puts)
	}
	hint := string(store.object(LastCheckpointKey))
	if wantHint := fmt.Sprintf(`{"version":7,"size":11,"sizeInBytes":%d,"numOfAddFiles":3}`, len(data)); hint != wantHint {
		t.Errorf("_last_checkpoint = %s, want %s", hint, wantHint)
	}
	got, err := ReadLastCheckpoint(ctx, store)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ReadLastCheckpoint = %+v, %v", got, err)
	}
	// A state without its protocol is refused, and nothing is written.
	empty := newCkStore()
	if _, err := WriteCheckpoint(ctx, empty, 8, actions[1:]); err == nil || empty.count() != 0 {
		t.Errorf("checkpoint without protocol: err %v, wrote %d objects", err, empty.count())
	}

	back := readAll(t, store, CheckpointKey(7))
	if len(back) != len(actions) {
		t.Fatalf("read %d actions, want %d", len(back), len(actions))
	}
	for i := range actions {
		if !reflect.DeepEqual(back[i], actions[i]) {
			g, _ := json.Marshal(back[i])
			w, _ := json.Marshal(actions[i])
			t.Errorf("action %d:\n got %s\nwant %s", i, g, w)
		}
	}
}

// TestLastCheckpointNeverMovesBack: a checkpoint of an older version written
// after a newer one (a slow writer) leaves the hint at the newer one.
func TestLastCheckpointNeverMovesBack(t *testing.T) {
	ctx := context.Background()
	store := newCkStore()
	actions := sampleActions()
	if _, err := WriteCheckpoint(ctx, store, 20, actions); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteCheckpoint(ctx, store, 10, actions); err != nil {
		t.Fatal(err)
	}
	if store.object(CheckpointKey(10)) == nil {
		t.Error("the older checkpoint file was not written")
	}
	lc, err := ReadLastCheckpoint(ctx, store)
	if err != nil || lc.Version != 20 {
		t.Fatalf("_last_checkpoint = %+v, %v; want version 20", lc, err)
	}
	// A corrupt hint is replaced.
	if err := store.Put(ctx, LastCheckpointKey, []byte("{")); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteCheckpoint(ctx, store, 10, actions); err != nil {
		t.Fatal(err)
	}
	if lc, err := ReadLastCheckpoint(ctx, store); err != nil || lc.Version != 10 {
		t.Fatalf("after a corrupt hint: %+v, %v; want version 10", lc, err)
	}
}

// TestCheckpointNullsAndRequiredFields pins how absent values are written:
// null partition values and protocol features stay null, while the fields
// the protocol requires are written empty, never null.
func TestCheckpointNullsAndRequiredFields(t *testing.T) {
	store := newCkStore()
	actions := []Action{
		{Protocol: &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}},
		{MetaData: &Metadata{ID: "id", Format: Format{Provider: "parquet"}, SchemaString: "{}"}},
		{Add: &Add{Path: "a", Size: 1}},
	}
	if _, err := WriteCheckpoint(context.Background(), store, 1, actions); err != nil {
		t.Fatal(err)
	}
	back := readAll(t, store, CheckpointKey(1))
	p, m, a := back[0].Protocol, back[1].MetaData, back[2].Add
	if p.ReaderFeatures != nil || p.WriterFeatures != nil {
		t.Errorf("features = %#v, %#v; want nil (null lists)", p.ReaderFeatures, p.WriterFeatures)
	}
	if m.Format.Options == nil || m.Configuration == nil || m.PartitionColumns == nil || a.PartitionValues == nil {
		t.Errorf("required maps/lists read back as null: %+v %+v", m, a)
	}
	if a.Tags != nil || a.DeletionVector != nil || a.BaseRowID != nil || a.Stats != "" {
		t.Errorf("optional add fields not null: %+v", a)
	}
}

// footerSchema renders a file's schema elements exactly as stored in the
// footer (repetition, physical type, type length, converted and logical
// types, child counts), one line per element. parquet-go's own Schema.String
// is not enough: it prints INT(64,true) for a plain INT64 column.
func footerSchema(t *testing.T, data []byte) string {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range f.Metadata().Schema {
		e.FieldID = 0
		fmt.Fprintf(&b, "%+v\n", e)
	}
	return b.String() + f.Schema().String()
}

func TestCheckpointSchemaMatchesSpark(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join(goldenDir, "spark-checkpoint/_delta_log/00000000000000000010.checkpoint.parquet"))
	if err != nil {
		t.Skipf("golden table not available: %v", err)
	}
	data, _, _, err := encodeCheckpoint(sampleActions())
	if err != nil {
		t.Fatal(err)
	}
	// Ours is Spark 3.5's plus add.clusteringProvider as delta-spark 4
	// writes it (TestSpark4 checks a clustered table's files keep it).
	got, want := footerSchema(t, data), footerSchema(t, golden)
	var kept []string
	for _, line := range strings.Split(got, "\n") {
		if !strings.Contains(line, "clusteringProvider") {
			kept = append(kept, line)
		}
	}
	got = strings.Replace(strings.Join(kept, "\n"), "Name:add NumChildren:{V:11 ", "Name:add NumChildren:{V:10 ", 1)
	if got != want {
		t.Errorf("schema differs from Spark's\n got: %s\nwant: %s", got, want)
	}
}

func TestReadGoldenCheckpoints(t *testing.T) {
	type counts struct{ protocol, metaData, add, remove, txn, domain int }
	tests := []struct {
		table      string
		version    int64
		want       counts
		metadataID string
		minReader  int32
		minWriter  int32
		check      func(t *testing.T, actions []Action)
	}{
		{table: "spark-checkpoint", version: 10, want: counts{1, 1, 1, 10, 0, 0}, metadataID: "testId", minReader: 1, minWriter: 2,
			check: func(t *testing.T, actions []Action) {
				for _, a := range actions {
					if a.Add != nil && (a.Add.Path != "11" || a.Add.Size != 1 || a.Add.DataChange || a.Add.PartitionValues == nil) {
						t.Errorf("add = %+v", a.Add)
					}
					if a.Remove != nil && (a.Remove.DeletionTimestamp == nil || a.Remove.PartitionValues != nil || a.Remove.Size != nil) {
						t.Errorf("remove = %+v", a.Remove)
					}
				}
			}},
		{table: "rs-simple_table_with_checkpoint", version: 10, want: counts{1, 1, 11, 0, 0, 0},
			metadataID: "cf3741a3-5f93-434f-99ac-9a4bebcdf06c", minReader: 1, minWriter: 2},
		{table: "rs-checkpoint_with_partitions", version: 2, want: counts{1, 1, 2, 0, 0, 0},
			metadataID: "94ba8468-c676-4468-b326-adde3ab9dcd2", minReader: 1, minWriter: 2,
			check: func(t *testing.T, actions []Action) {
				var adds []*Add
				for _, a := range actions {
					if md := a.MetaData; md != nil && (!slices.Equal(md.PartitionColumns, []string{"color"}) || md.Format.Provider != "parquet") {
						t.Errorf("metaData = %+v", md)
					}
					if a.Add != nil {
						adds = append(adds, a.Add)
					}
				}
				// The second file has a null partition value.
				if pv := adds[0].PartitionValues["color"]; pv == nil || *pv != "red" || adds[0].Tags != nil {
					t.Errorf("add 0 = %+v", adds[0])
				}
				if pv, ok := adds[1].PartitionValues["color"]; !ok || pv != nil {
					t.Errorf("add 1 = %+v", adds[1])
				}
			}},
		{table: "rs-with_checkpoint_no_last_checkpoint", version: 2, want: counts{1, 1, 1, 1, 0, 0},
			metadataID: "84b09beb-329c-4b5e-b493-f58c6c78b8fd", minReader: 1, minWriter: 2,
			check: func(t *testing.T, actions []Action) {
				for _, a := range actions {
					if r := a.Remove; r != nil && (r.Path != "part-00000-ad1a4bb7-07e8-4f40-b50b-49910d209e0c-c000.snappy.parquet" ||
						r.DeletionTime() != 1674611459307 || r.Size == nil || *r.Size != 965 || r.ExtendedFileMetadata == nil || !*r.ExtendedFileMetadata) {
						t.Errorf("remove = %+v", r)
					}
					if m := a.MetaData; m != nil && m.Configuration["delta.checkpointInterval"] != "2" {
						t.Errorf("configuration = %v", m.Configuration)
					}
					if ad := a.Add; ad != nil && !strings.HasPrefix(ad.Stats, `{"numRecords":5,`) {
						t.Errorf("stats = %q", ad.Stats)
					}
				}
			}},
		{table: "rs-latest_not_checkpointed", version: 2, want: counts{1, 1, 1, 1, 0, 0},
			metadataID: "84b09beb-329c-4b5e-b493-f58c6c78b8fd", minReader: 1, minWriter: 2},
		{table: "rs-table_failed_last_checkpoint_update", version: 1, want: counts{1, 1, 2, 0, 0, 0},
			metadataID: "98c9faeb-7940-43eb-9898-50b2a99c0a7e", minReader: 1, minWriter: 2},
		{table: "rs-table_failed_last_checkpoint_update", version: 3, want: counts{1, 1, 4, 0, 0, 0},
			metadataID: "98c9faeb-7940-43eb-9898-50b2a99c0a7e", minReader: 1, minWriter: 2,
			check: func(t *testing.T, actions []Action) {
				for _, a := range actions {
					// delta-rs writes an empty tags map and a null deletionVector
					// whose fields are required.
					if ad := a.Add; ad != nil && (ad.Tags == nil || len(ad.Tags) != 0 || ad.DeletionVector != nil || ad.Size != 1432) {
						t.Errorf("add = %+v", ad)
					}
				}
			}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s@%d", tt.table, tt.version), func(t *testing.T) {
			store := loadCkStore(t, filepath.Join(goldenDir, tt.table))
			actions := readAll(t, store, CheckpointKey(tt.version))
			var got counts
			for _, a := range actions {
				switch {
				case a.Protocol != nil:
					got.protocol++
					if a.Protocol.MinReaderVersion != tt.minReader || a.Protocol.MinWriterVersion != tt.minWriter {
						t.Errorf("protocol = %+v", a.Protocol)
					}
				case a.MetaData != nil:
					got.metaData++
					if a.MetaData.ID != tt.metadataID {
						t.Errorf("metaData.id = %q, want %q", a.MetaData.ID, tt.metadataID)
					}
					if _, err := a.MetaData.Schema(); err != nil {
						t.Errorf("schemaString: %v", err)
					}
				case a.Add != nil:
					got.add++
				case a.Remove != nil:
					got.remove++
				case a.Txn != nil:
					got.txn++
				case a.DomainMetadata != nil:
					got.domain++
				}
			}
			if got != tt.want {
				t.Errorf("counts = %+v, want %+v", got, tt.want)
			}
			if tt.check != nil {
				tt.check(t, actions)
			}
		})
	}
}

// TestReadGoldenCheckpointsAll reads every checkpoint file in the golden set,
// whatever table it belongs to, so a new table cannot be silently skipped.
func TestReadGoldenCheckpointsAll(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*", "_delta_log", "*.checkpoint*.parquet"))
	if len(files) == 0 {
		t.Skip("golden tables not available")
	}
	for _, f := range files {
		table := filepath.Dir(filepath.Dir(f))
		store := loadCkStore(t, table)
		actions := readAll(t, store, LogDir+filepath.Base(f))
		if len(actions) == 0 {
			t.Errorf("%s: no actions", f)
		}
	}
}

func TestReadMultiPartCheckpoint(t *testing.T) {
	ctx := context.Background()
	store := newCkStore()
	actions := sampleActions()
	split := 4
	for i, part := range [][]Action{actions[:split], actions[split:]} {
		data, _, _, err := encodeCheckpoint(part)
		if err != nil {
			t.Fatal(err)
		}
		store.Put(ctx, CheckpointPartKey(5, i+1, 2), data)
	}
	store.Put(ctx, LastCheckpointKey, []byte(`{"version":5,"size":11,"parts":2}`))
	lc, err := ReadLastCheckpoint(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	back := readAll(t, store, lc.Keys()...)
	if !reflect.DeepEqual(back, actions) {
		t.Errorf("multi-part read back %d actions, differing from the %d written", len(back), len(actions))
	}
	// A missing part is an error, not fewer actions.
	store.Delete(ctx, CheckpointPartKey(5, 2, 2))
	err = ReadCheckpoint(ctx, store, lc.Keys(), func(*Action) error { return nil })
	if !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("missing part: got %v, want ErrNotExist", err)
	}
}

func TestReadCheckpointCorrupt(t *testing.T) {
	ctx := context.Background()
	data, _, _, err := encodeCheckpoint(sampleActions())
	if err != nil {
		t.Fatal(err)
	}
	key := CheckpointKey(3)
	garbled := bytes.Clone(data)
	for i := 4; i < len(garbled)/2; i++ { // page headers and data, magic intact
		garbled[i] ^= 0x5a
	}
	cases := map[string][]byte{
		"empty":         {},
		"magic only":    data[:4],
		"half":          data[:len(data)/2],
		"last byte cut": data[:len(data)-1],
		"footer cut":    data[:len(data)-8],
		"garbled pages": garbled,
		"not parquet":   []byte(`{"add":{"path":"x"}}`),
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			store := newCkStore()
			store.Put(ctx, key, content)
			n := 0
			err := ReadCheckpoint(ctx, store, []string{key}, func(*Action) error { n++; return nil })
			var ce *CorruptLogError
			if !errors.As(err, &ce) || ce.File != key {
				t.Fatalf("got %v after %d actions; want CorruptLogError for %s", err, n, key)
			}
		})
	}

	// Errors from fn are returned as they are, not as corruption.
	store := newCkStore()
	store.Put(ctx, key, data)
	stop := errors.New("stop")
	err = ReadCheckpoint(ctx, store, []string{key}, func(*Action) error { return stop })
	if err != stop {
		t.Errorf("fn error: got %v", err)
	}
	_, err = store.Open(ctx, CheckpointKey(4))
	if err = ReadCheckpoint(ctx, store, []string{CheckpointKey(4)}, func(*Action) error { return nil }); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("absent: got %v", err)
	}
}

// TestDeltaRSReadsOurCheckpoint: a table whose log starts at our
// checkpoint (the JSON before it deleted) reads in delta-rs with the same
// version, files, null partition value and txn.
func TestDeltaRSReadsOurCheckpoint(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := localStore(t, dir)
	schema := `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"color","type":"string","nullable":true,"metadata":{}}]}`
	state := []Action{
		{Protocol: &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}},
		{MetaData: &Metadata{ID: "5f0a2a9e-1f6e-4b3a-9c1e-2d3b4c5d6e7f", Format: Format{Provider: "parquet"},
			SchemaString: schema, PartitionColumns: []string{"color"}, CreatedTime: ptr(int64(1700000000000))}},
	}
	commit := func(v int64, actions ...Action) {
		data, err := EncodeActions(append([]Action{{CommitInfo: &CommitInfo{Timestamp: 1700000000000 + v, Operation: "WRITE"}}}, actions...))
		if err != nil {
			t.Fatal(err)
		}
		store.Put(ctx, CommitKey(v), data)
	}
	commit(0, state...)
	red := "red"
	live := map[string]*Add{}
	const n = 5
	for v := int64(1); v <= n; v++ {
		pv := map[string]*string{"color": &red}
		dirName := "color=red"
		if v%2 == 0 {
			pv = map[string]*string{"color": nil}
			dirName = "color=__HIVE_DEFAULT_PARTITION__"
		}
		add := &Add{Path: fmt.Sprintf("%s/part-%05d.parquet", dirName, v), PartitionValues: pv, Size: 100 + v,
			ModificationTime: 1700000000000 + v, DataChange: true, Stats: fmt.Sprintf(`{"numRecords":%d}`, v)}
		actions := []Action{{Add: add}, {Txn: &Txn{AppID: "deltaflow-0", Version: v, LastUpdated: ptr(1700000000000 + v)}}}
		if v == 3 { // remove the file of version 1
			rm := live["color=red/part-00001.parquet"]
			delete(live, rm.Path)
			actions = append(actions, Action{Remove: &Remove{Path: rm.Path, DeletionTimestamp: ptr(time.Now().UnixMilli()),
				DataChange: true, ExtendedFileMetadata: ptr(true), PartitionValues: rm.PartitionValues, Size: ptr(rm.Size)}})
		}
		live[add.Path] = add
		commit(v, actions...)
	}
	// The checkpoint at n: protocol, metaData, live adds, the tombstone, txn.
	paths := slices.Sorted(func(yield func(string) bool) {
		for p := range live {
			if !yield(p) {
				return
			}
		}
	})
	for _, p := range paths {
		a := *live[p]
		a.DataChange = false
		state = append(state, Action{Add: &a})
	}
	state = append(state,
		Action{Remove: &Remove{Path: "color=red/part-00001.parquet", DeletionTimestamp: ptr(time.Now().UnixMilli()),
			ExtendedFileMetadata: ptr(true), PartitionValues: map[string]*string{"color": &red}, Size: ptr(int64(101))}},
		Action{Txn: &Txn{AppID: "deltaflow-0", Version: n, LastUpdated: ptr(int64(1700000000000 + n))}})
	if _, err := WriteCheckpoint(ctx, store, n, state); err != nil {
		t.Fatal(err)
	}
	// Only the checkpoint can describe the table now.
	for v := int64(0); v < n; v++ {
		store.Delete(ctx, CommitKey(v))
	}
	compareWithDeltaRS(t, NewTable(store), dir, false, "deltaflow-0")
}

// TestReadDeltaRSKernelCheckpoint reads a checkpoint written by deltalake
// 1.6.6 (delta-kernel): required leaf fields, a sidecar column, and a null
// partition value. Table: three appends of {id, color} partitioned by color
// (color null in one row each), then DELETE id = 1, then create_checkpoint.
func TestReadDeltaRSKernelCheckpoint(t *testing.T) {
	ctx := context.Background()
	store := loadCkStore(t, "testdata/deltars-1.6.6-checkpoint")
	lc, err := ReadLastCheckpoint(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if lc.Version != 3 || lc.Size != 8 || lc.NumOfAddFiles != 5 || lc.Parts != nil {
		t.Errorf("_last_checkpoint = %+v", lc)
	}
	var adds, removes, nullColor int
	for _, a := range readAll(t, store, lc.Keys()...) {
		switch {
		case a.Add != nil:
			adds++
			if v, ok := a.Add.PartitionValues["color"]; ok && v == nil {
				nullColor++
			}
			if !strings.HasPrefix(a.Add.Stats, `{"numRecords":1,`) {
				t.Errorf("stats = %q", a.Add.Stats)
			}
		case a.Remove != nil:
			removes++
		case a.MetaData != nil:
			if a.MetaData.ID != "0305d98a-2c12-4af4-b110-fa27c4ed72f6" || !slices.Equal(a.MetaData.PartitionColumns, []string{"color"}) {
				t.Errorf("metaData = %+v", a.MetaData)
			}
		case a.Protocol != nil:
			if !reflect.DeepEqual(*a.Protocol, Protocol{MinReaderVersion: 1, MinWriterVersion: 2}) {
				t.Errorf("protocol = %+v", a.Protocol)
			}
		}
	}
	if adds != 5 || removes != 1 || nullColor != 3 {
		t.Errorf("adds %d (null color %d), removes %d; want 5 (3), 1", adds, nullColor, removes)
	}
}

// benchActions is a snapshot of n adds with stats and two partition values.
func benchActions(n int) []Action {
	actions := []Action{
		{Protocol: &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}},
		{MetaData: &Metadata{ID: "bench", Format: Format{Provider: "parquet", Options: map[string]string{}},
			SchemaString: "{}", PartitionColumns: []string{"topic", "date"}, Configuration: map[string]string{}}},
	}
	topics := []string{"sensors", "events", "audit", "metrics"}
	for i := range n {
		topic, date := topics[i%len(topics)], fmt.Sprintf("2024-06-%02d", 1+i%30)
		actions = append(actions, Action{Add: &Add{
			Path:             fmt.Sprintf("topic=%s/date=%s/part-%05d-6f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f%d.c000.zstd.parquet", topic, date, i, i%10),
			PartitionValues:  map[string]*string{"topic": &topic, "date": &date},
			Size:             int64(1<<20 + i),
			ModificationTime: 1700000000000 + int64(i),
			Stats: fmt.Sprintf(`{"numRecords":%d,"minValues":{"device":"dev-%05d","ts":"2024-06-01T00:00:00.000Z","power":0.5},`+
				`"maxValues":{"device":"dev-%05d","ts":"2024-06-01T23:59:59.999Z","power":99.5},"nullCount":{"device":0,"ts":0,"power":%d}}`,
				10000+i, i, i+100, i%7),
		}})
	}
	return actions
}

const benchAdds = 50_000

func BenchmarkWriteCheckpoint(b *testing.B) {
	actions := benchActions(benchAdds)
	ctx := context.Background()
	b.ReportAllocs()
	var size int64
	for b.Loop() {
		lc, err := WriteCheckpoint(ctx, newCkStore(), 1, actions)
		if err != nil {
			b.Fatal(err)
		}
		size = lc.SizeInBytes
	}
	b.ReportMetric(float64(size)/1e6, "file-MB")
}

func BenchmarkReadCheckpoint(b *testing.B) {
	store := newCkStore()
	ctx := context.Background()
	lc, err := WriteCheckpoint(ctx, store, 1, benchActions(benchAdds))
	if err != nil {
		b.Fatal(err)
	}
	keys := lc.Keys()
	b.ReportAllocs()
	b.SetBytes(lc.SizeInBytes)
	for b.Loop() {
		n := 0
		err := ReadCheckpoint(ctx, store, keys, func(a *Action) error {
			n++
			return nil
		})
		if err != nil || n != benchAdds+2 {
			b.Fatal(n, err)
		}
	}
	b.ReportMetric(float64(lc.SizeInBytes)/1e6, "file-MB")
}

// TestCheckpointRoundTripLarge spans many pages per column, with maps of
// varying size, so rows cross page and batch boundaries.
func TestCheckpointRoundTripLarge(t *testing.T) {
	actions := benchActions(20_000)
	for i := range actions {
		if a := actions[i].Add; a != nil {
			switch i % 4 {
			case 0:
				a.PartitionValues = map[string]*string{}
			case 1:
				a.PartitionValues["extra"] = nil
				a.Tags = map[string]string{"a": strings.Repeat("x", i%50), "b": ""}
			}
		}
	}
	store := newCkStore()
	if _, err := WriteCheckpoint(context.Background(), store, 9, actions); err != nil {
		t.Fatal(err)
	}
	back := readAll(t, store, CheckpointKey(9))
	if len(back) != len(actions) {
		t.Fatalf("read %d actions, want %d", len(back), len(actions))
	}
	for i := range actions {
		if !reflect.DeepEqual(back[i], actions[i]) {
			t.Fatalf("action %d differs:\n got %+v\nwant %+v", i, back[i].Add, actions[i].Add)
		}
	}
}

// Other writers' shapes: INT64 where Spark has INT32 and the reverse,
// required fields, a commitInfo column, no txn/remove/metaData columns.
type (
	altProtocol struct {
		MinReaderVersion int64    `parquet:"minReaderVersion"`
		MinWriterVersion int64    `parquet:"minWriterVersion"`
		ReaderFeatures   []string `parquet:"readerFeatures,list"`
	}
	altDV struct {
		StorageType    string `parquet:"storageType"`
		PathOrInlineDv string `parquet:"pathOrInlineDv"`
		Offset         *int64 `parquet:"offset"`
		SizeInBytes    int64  `parquet:"sizeInBytes"`
		Cardinality    int32  `parquet:"cardinality"`
	}
	altAdd struct {
		Path            string             `parquet:"path"`
		Size            *int32             `parquet:"size"`
		PartitionValues map[string]*string `parquet:"partitionValues"`
		DeletionVector  *altDV             `parquet:"deletionVector"`
	}
	altCommitInfo struct {
		Timestamp int64 `parquet:"timestamp"`
	}
	altRow struct {
		CommitInfo *altCommitInfo `parquet:"commitInfo"`
		Protocol   *altProtocol   `parquet:"protocol"`
		Add        *altAdd        `parquet:"add"`
	}
	badRow struct {
		Add *struct {
			Path int64 `parquet:"path"`
		} `parquet:"add"`
	}
)

func writeParquet[T any](t *testing.T, rows []T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadCheckpointOtherShapes(t *testing.T) {
	ctx := context.Background()
	store := newCkStore()
	red := "red"
	store.Put(ctx, CheckpointKey(1), writeParquet(t, []altRow{
		{CommitInfo: &altCommitInfo{Timestamp: 5}},
		{Protocol: &altProtocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}}},
		{Add: &altAdd{Path: "a", Size: ptr(int32(12)), PartitionValues: map[string]*string{"c": &red, "d": nil},
			DeletionVector: &altDV{StorageType: "u", PathOrInlineDv: "x", Offset: ptr(int64(1)), SizeInBytes: 2, Cardinality: 3}}},
		{Add: &altAdd{Path: "b"}},
	}))
	got := readAll(t, store, CheckpointKey(1))
	want := []Action{
		{Protocol: &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}}},
		{Add: &Add{Path: "a", Size: 12, PartitionValues: map[string]*string{"c": &red, "d": nil},
			DeletionVector: &DeletionVector{StorageType: "u", PathOrInlineDv: "x", Offset: ptr(int32(1)), SizeInBytes: 2, Cardinality: 3}}},
		{Add: &Add{Path: "b", PartitionValues: map[string]*string{}}},
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Errorf("got  %s\nwant %s", g, w)
	}

	// A known field of the wrong type is corruption, not a silent null.
	store.Put(ctx, CheckpointKey(2), writeParquet(t, []badRow{{}}))
	err := ReadCheckpoint(ctx, store, []string{CheckpointKey(2)}, func(*Action) error { return nil })
	var ce *CorruptLogError
	if !errors.As(err, &ce) || ce.File != CheckpointKey(2) {
		t.Errorf("wrong type: got %v", err)
	}
}
