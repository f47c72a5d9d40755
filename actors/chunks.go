package actors

import "io"

// chunkSize is the unit an encoded data file is held in: small enough that
// a partition's file wastes little, large enough to be few.
const chunkSize = 64 << 10

// chunkFile is an encoded data file held in memory in fixed-size chunks:
// growing it never copies what was written (a bytes.Buffer doubles and
// copies, and so needs up to three times the file while it grows). The
// chunks are not pooled: an HTTP transport may still read an upload's body
// after a failed request returns. Not safe for concurrent use.
type chunkFile struct {
	chunks []*[chunkSize]byte
	n      int
}

func (c *chunkFile) Write(p []byte) (int, error) {
	written := len(p)
	for len(p) > 0 {
		off := c.n % chunkSize
		if off == 0 && c.n/chunkSize == len(c.chunks) {
			c.chunks = append(c.chunks, new([chunkSize]byte))
		}
		k := copy(c.chunks[c.n/chunkSize][off:], p)
		c.n += k
		p = p[k:]
	}
	return written, nil
}

// Len is the file's size.
func (c *chunkFile) Len() int { return c.n }

// Reader reads the file from the start; each call returns a new reader, so
// an upload can be retried.
func (c *chunkFile) Reader() io.Reader {
	return &chunkReader{f: c}
}

type chunkReader struct {
	f   *chunkFile
	off int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.off >= r.f.n {
		return 0, io.EOF
	}
	ch := r.f.chunks[r.off/chunkSize]
	end := min(r.f.n-r.off/chunkSize*chunkSize, chunkSize)
	k := copy(p, ch[r.off%chunkSize:end])
	r.off += k
	return k, nil
}
