package sparkcheckpoint

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/storage"
)

// The files below are small fixtures in the shape Spark 3.5 writes them; the
// integration tests in internal/tests/takeover read checkpoints real Spark wrote.
const (
	meta       = `{"id":"6a4d2e5c-0f3b-4a57-9d0e-1b2c3d4e5f60"}` + "\n"
	batchMeta  = `{"batchWatermarkMs":0,"batchTimestampMs":1764748800000,"conf":{"spark.sql.shuffle.partitions":"2"}}`
	commitBody = "v1\n{\"nextBatchWatermarkMs\":0}"
)

func offsets(kafka string) string { return "v1\n" + batchMeta + "\n" + kafka }

func store(t *testing.T, files map[string]string) storage.Store {
	t.Helper()
	s := storage.NewMem()
	for k, v := range files {
		if err := s.Put(context.Background(), k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// healthy is a checkpoint whose batch 1 is committed, plus the checksum
// and temporary files Hadoop's local file system leaves beside them.
func healthy() map[string]string {
	return map[string]string{
		"metadata":                  meta,
		"offsets/0":                 offsets(`{"sensor-events":{"1":10,"0":7,"2":0}}`),
		"offsets/1":                 offsets(`{"sensor-events":{"1":25,"0":30,"2":4}}`),
		"offsets/.1.crc":            "garbage",
		"offsets/.2.1f0c.tmp":       "v1\n",
		"commits/0":                 commitBody,
		"commits/1":                 commitBody,
		"commits/.1.crc":            "garbage",
		"sources/0/0":               "\x00v1\n{\"sensor-events\":{\"0\":0}}",
		"state/irrelevant/1.delta":  "x",
		"offsets/not-a-batch-id.js": "x",
	}
}

func TestReadAndResolve(t *testing.T) {
	ctx := context.Background()
	c, err := Read(ctx, store(t, healthy()))
	if err != nil {
		t.Fatal(err)
	}
	if c.QueryID != "6a4d2e5c-0f3b-4a57-9d0e-1b2c3d4e5f60" || c.Latest.ID != 1 || c.Committed != 1 || c.Latest.Topic != "sensor-events" {
		t.Fatalf("read %+v", c)
	}
	end, err := c.Resolve(ctx, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int32]int64{0: 30, 1: 25, 2: 4}; !maps.Equal(end.Batch.End, want) {
		t.Fatalf("end %v, want %v", end.Batch.End, want)
	}
}

// TestResolveUncommitted covers offsets/N without commits/N: the table's
// txn for the query id decides, as Spark's Delta sink does.
func TestResolveUncommitted(t *testing.T) {
	ctx := context.Background()
	files := healthy()
	delete(files, "commits/1")
	c, err := Read(ctx, store(t, files))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		txn    int64
		hasTxn bool
		batch  int64
		p0     int64
	}{
		{"txn reached batch 1", 1, true, 1, 30},
		{"txn ahead", 5, true, 1, 30},
		{"txn at batch 0", 0, true, 0, 7},
		{"no txn but commits/0", 0, false, 0, 7},
	} {
		end, err := c.Resolve(ctx, tc.txn, tc.hasTxn)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if end.Batch.ID != tc.batch || end.Batch.End[0] != tc.p0 {
			t.Errorf("%s: batch %d p0 %d, want batch %d p0 %d (%s)", tc.name, end.Batch.ID, end.Batch.End[0], tc.batch, tc.p0, end.Why)
		}
	}
}

func TestResolveNothing(t *testing.T) {
	ctx := context.Background()
	c, err := Read(ctx, store(t, map[string]string{"metadata": meta, "offsets/0": offsets(`{"t":{"0":5}}`)}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resolve(ctx, 0, false); !errors.Is(err, ErrNothingCommitted) {
		t.Fatalf("got %v, want ErrNothingCommitted", err)
	}
	if end, err := c.Resolve(ctx, 0, true); err != nil || end.Batch.End[0] != 5 {
		t.Fatalf("txn 0 should settle batch 0: %+v %v", end, err)
	}
}

// TestResolveGap: commits/ two batches behind and no txn to vouch for the
// batch in between is refused, not guessed.
func TestResolveGap(t *testing.T) {
	ctx := context.Background()
	files := healthy()
	files["offsets/2"] = offsets(`{"sensor-events":{"0":40}}`)
	delete(files, "commits/1")
	c, err := Read(ctx, store(t, files))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resolve(ctx, 0, true); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
	if end, err := c.Resolve(ctx, 1, true); err != nil || end.Batch.ID != 1 {
		t.Fatalf("txn 1 should settle batch 1: %+v %v", end, err)
	}
}

// TestBadCheckpoints: each bad input is a clear error, matched by its
// sentinel and naming the file.
func TestBadCheckpoints(t *testing.T) {
	with := func(k, v string) map[string]string {
		f := healthy()
		if v == "" {
			delete(f, k)
		} else {
			f[k] = v
		}
		return f
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  error
		msg   string
	}{
		{"empty dir", map[string]string{}, ErrNotCheckpoint, "no metadata file"},
		{"not spark", map[string]string{"notes.txt": "hello", "data/x.parquet": "PAR1"}, ErrNotCheckpoint, "no metadata file"},
		{"no offsets", map[string]string{"metadata": meta}, ErrNotCheckpoint, "no offsets/"},
		{"metadata not json", with("metadata", "{id:"), ErrCorrupt, "metadata"},
		{"truncated offsets after header", with("offsets/1", "v1\n"), ErrCorrupt, "offsets/1"},
		{"truncated offsets after metadata", with("offsets/1", "v1\n"+batchMeta+"\n"), ErrCorrupt, "truncated"},
		{"truncated offsets json", with("offsets/1", offsets(`{"sensor-events":{"0":3`)), ErrCorrupt, "offsets/1"},
		{"empty offsets", with("offsets/1", " "), ErrCorrupt, "version line"},
		{"v2 offsets", with("offsets/1", "v2\n"+batchMeta+"\n{}"), ErrUnsupportedVersion, "v2"},
		{"v2 commits", with("commits/1", "v2\n{}"), ErrUnsupportedVersion, "commits/1"},
		{"truncated commits", with("commits/1", "v1\n"), ErrCorrupt, "commits/1"},
		{"two sources", with("offsets/1", offsets("{\"a\":{\"0\":1}}\n{\"b\":{\"0\":1}}")), ErrCorrupt, "2 sources"},
		{"two topics", with("offsets/1", offsets(`{"a":{"0":1},"b":{"0":2}}`)), ErrCorrupt, "2 topics"},
		{"bad partition", with("offsets/1", offsets(`{"a":{"x":1}}`)), ErrCorrupt, "partition"},
	} {
		_, err := Read(context.Background(), store(t, tc.files))
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want %v mentioning %q", tc.name, err, tc.want, tc.msg)
		}
	}
}

// TestOtherTopic: the checkpoint names its topic; the caller compares it.
func TestOtherTopic(t *testing.T) {
	files := healthy()
	files["offsets/1"] = offsets(`{"other-events":{"0":3}}`)
	c, err := Read(context.Background(), store(t, files))
	if err != nil {
		t.Fatal(err)
	}
	if c.Latest.Topic != "other-events" {
		t.Fatalf("topic %q", c.Latest.Topic)
	}
}
