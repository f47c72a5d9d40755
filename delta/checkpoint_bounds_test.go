package delta

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/deltaflow/deltaflow/delta/internal/pqguard"
)

// withFooter returns a Parquet file made of the magic bytes and footer.
func withFooter(footer []byte) []byte {
	out := append([]byte("PAR1"), footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	return append(out, "PAR1"...)
}

// inflatePages overwrites the first page header of every column chunk of
// data with one that claims to decode to 1 GiB of 2^30 values, keeping the
// page inside its chunk.
func inflatePages(t *testing.T, data []byte) []byte {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.Clone(data)
	for _, rg := range f.Metadata().RowGroups {
		for _, cc := range rg.Columns {
			cm := cc.MetaData
			start := cm.DataPageOffset
			if cm.DictionaryPageOffset != 0 {
				start = cm.DictionaryPageOffset
			}
			h := format.PageHeader{Type: format.DataPage, UncompressedPageSize: 1 << 30}
			h.DataPageHeader.Valid = true
			h.DataPageHeader.V = format.DataPageHeader{NumValues: 1 << 30, Encoding: format.Plain,
				DefinitionLevelEncoding: format.RLE, RepetitionLevelEncoding: format.RLE}
			// The header's length depends on the page size it names: settle it.
			var enc []byte
			for range 3 {
				if enc, err = thrift.Marshal(&thrift.CompactProtocol{}, &h); err != nil {
					t.Fatal(err)
				}
				h.CompressedPageSize = int32(cm.TotalCompressedSize) - int32(len(enc))
			}
			if int64(len(enc)) > cm.TotalCompressedSize {
				continue // a chunk too small to hold the header
			}
			copy(out[start:], enc)
		}
	}
	return out
}

// TestCorruptCheckpointAllocationBounded: checkpoints whose footer or page
// headers claim gigabytes are refused as corrupt, naming the file, without
// allocating what they claim (parquet-go would size its buffers from them).
func TestCorruptCheckpointAllocationBounded(t *testing.T) {
	data, _, _, err := encodeCheckpoint(sampleActions())
	if err != nil {
		t.Fatal(err)
	}
	hugeFooterLen := bytes.Clone(data)
	binary.LittleEndian.PutUint32(hugeFooterLen[len(data)-8:], 0x7fffff00)
	// FileMetaData{version: 1, schema: list of 2^31-1 SchemaElements}.
	hugeList := withFooter([]byte{0x15, 0x02, 0x19, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00, 0x00, 0x00})
	// FileMetaData{version: 1, created_by: a 2 GiB string}.
	hugeString := withFooter([]byte{0x15, 0x02, 0x68, 0xff, 0xff, 0xff, 0xff, 0x07, 'x', 0x00})
	deep := withFooter(append(bytes.Repeat([]byte{0x1c}, 10000), 0x00)) // structs in structs

	for name, content := range map[string][]byte{
		"footer length": hugeFooterLen,
		"list length":   hugeList,
		"string length": hugeString,
		"nesting":       deep,
		"page sizes":    inflatePages(t, data),
	} {
		t.Run(name, func(t *testing.T) {
			store := newCkStore()
			key := CheckpointKey(5)
			if err := store.Put(context.Background(), key, content); err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			err := ReadCheckpoint(context.Background(), store, []string{key}, func(*Action) error { return nil })
			runtime.ReadMemStats(&after)
			var ce *CorruptLogError
			if !errors.As(err, &ce) || ce.File != key || !strings.Contains(err.Error(), key) {
				t.Fatalf("err = %v, want a CorruptLogError naming %s", err, key)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(pqguard.ClaimBudget(int64(len(content)))) {
				t.Errorf("allocated %d bytes reading a %d-byte file", alloc, len(content))
			}
			t.Logf("%s: %v", name, err)
		})
	}
}

// A valid checkpoint passes the checks with every page walked.
func TestCheckPagesAcceptsValid(t *testing.T) {
	data, _, _, err := encodeCheckpoint(sampleActions())
	if err != nil {
		t.Fatal(err)
	}
	r := bytes.NewReader(data)
	if err := pqguard.CheckFooter(r, r.Size()); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(r, r.Size())
	if err != nil {
		t.Fatal(err)
	}
	all := make([]int, len(f.Schema().Columns()))
	for i := range all {
		all[i] = i
	}
	if err := pqguard.CheckPages(r, r.Size(), f.Metadata(), all); err != nil {
		t.Fatal(err)
	}
}
