package actors

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
)

// TestChunkFile: what is written in pieces of any size reads back the
// same, as often as asked (uploads are retried).
func TestChunkFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, chunkSize - 1, chunkSize, chunkSize + 1, 3*chunkSize + 17} {
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(rng.IntN(256))
		}
		var f chunkFile
		for rest := want; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(2*chunkSize))
			if k, err := f.Write(rest[:n]); k != n || err != nil {
				t.Fatalf("write %d: %d, %v", n, k, err)
			}
			rest = rest[n:]
		}
		if f.Len() != size {
			t.Fatalf("size %d: Len %d", size, f.Len())
		}
		for range 2 {
			got, err := io.ReadAll(f.Reader())
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("size %d: read back %d bytes (%v), differ", size, len(got), err)
			}
		}
		// As minio-go reads it: a section at an offset, after seeking.
		r := f.Reader()
		off := int64(size / 3)
		if pos, err := r.Seek(off, io.SeekStart); pos != off || err != nil {
			t.Fatalf("size %d: seek to %d: %d, %v", size, off, pos, err)
		}
		if end, _ := r.Seek(0, io.SeekEnd); end != int64(size) {
			t.Fatalf("size %d: end at %d", size, end)
		}
		got, err := io.ReadAll(io.NewSectionReader(r.(io.ReaderAt), off, int64(size)-off))
		if err != nil || !bytes.Equal(got, want[off:]) {
			t.Fatalf("size %d: section from %d: %d bytes (%v), differ", size, off, len(got), err)
		}
	}
}
