package actors

import (
	"errors"
	"io"
)

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

// Cap is the memory the file holds: whole chunks, however little of the
// last is written.
func (c *chunkFile) Cap() int { return len(c.chunks) * chunkSize }

// Reader reads the file from the start; each call returns a new reader, so
// an upload can be retried. It is an io.ReaderAt and io.Seeker too, which
// lets minio-go re-read it (its own retries, multipart parts) without
// buffering a copy.
func (c *chunkFile) Reader() io.ReadSeeker {
	return &chunkReader{f: c}
}

type chunkReader struct {
	f   *chunkFile
	off int64
}

func (r *chunkReader) Read(p []byte) (int, error) {
	n, err := r.ReadAt(p, r.off)
	r.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (r *chunkReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("chunk file: negative offset")
	}
	n := 0
	for at := int(min(off, int64(r.f.n))); n < len(p) && at < r.f.n; {
		ch := r.f.chunks[at/chunkSize]
		end := min(r.f.n-at/chunkSize*chunkSize, chunkSize)
		k := copy(p[n:], ch[at%chunkSize:end])
		n += k
		at += k
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (r *chunkReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += int64(r.f.n)
	}
	if offset < 0 {
		return 0, errors.New("chunk file: seek before the start")
	}
	r.off = offset
	return offset, nil
}
