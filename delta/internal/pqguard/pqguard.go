// Package pqguard checks what a Parquet file claims before parquet-go
// trusts it: the footer, and every page header of the column chunks a
// reader will decode, each within the bytes present and a budget
// proportional to the file's size.
package pqguard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// parquet-go sizes its buffers from what a file claims (the footer length,
// thrift list lengths, page sizes and value counts) before it reads the
// bytes, so a corrupt checkpoint could make it allocate gigabytes. The
// checks here run first and refuse any claim the file cannot back: every
// thrift list, string and footer must fit in the bytes present, every page
// in its column chunk, and what a page decodes to in a budget proportional to
// the file's size (ClaimBudget). A real checkpoint never comes near it: each
// of its rows names a distinct file or app id, and one page never inflates
// to 64 times the whole file.

// ClaimBudget bounds a page's uncompressed size, its value counts and a row
// group's rows, for a file of size bytes.
func ClaimBudget(size int64) int64 { return 1<<20 + 64*size }

// CheckFooter checks the Parquet footer of r: magic bytes, a length that
// fits in the file, and a thrift encoding whose every length fits in it.
func CheckFooter(r io.ReaderAt, size int64) error {
	const magic = "PAR1"
	if size < 12 {
		return fmt.Errorf("%d bytes is too short for a Parquet file", size)
	}
	var tail [8]byte
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return fmt.Errorf("read footer length: %w", err)
	}
	if string(tail[4:]) != magic {
		return fmt.Errorf("no Parquet magic at the end (%q)", tail[4:])
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n > size-12 {
		return fmt.Errorf("footer length %d does not fit in a %d-byte file", n, size)
	}
	footer := make([]byte, n)
	if _, err := r.ReadAt(footer, size-8-n); err != nil {
		return fmt.Errorf("read footer: %w", err)
	}
	if _, err := walkThrift(footer); err != nil {
		return fmt.Errorf("footer: %w", err)
	}
	return nil
}

// CheckPages checks the row groups of md and the page headers of the leaf
// columns cols (those that will be read): each chunk lies inside the file,
// each page inside its chunk, and no count or size exceeds ClaimBudget.
func CheckPages(r io.ReaderAt, size int64, md *format.FileMetaData, cols []int) error {
	budget := ClaimBudget(size)
	if md.NumRows < 0 || md.NumRows > budget {
		return fmt.Errorf("footer claims %d rows in a %d-byte file", md.NumRows, size)
	}
	var window []byte
	for g := range md.RowGroups {
		rg := &md.RowGroups[g]
		if rg.NumRows < 0 || rg.NumRows > budget {
			return fmt.Errorf("row group %d claims %d rows in a %d-byte file", g, rg.NumRows, size)
		}
		for _, c := range cols {
			if c >= len(rg.Columns) {
				return fmt.Errorf("row group %d has %d column chunks, want more than %d", g, len(rg.Columns), c)
			}
			var err error
			if window, err = checkChunk(r, size, budget, &rg.Columns[c].MetaData, window); err != nil {
				return fmt.Errorf("row group %d column %d: %w", g, c, err)
			}
		}
	}
	return nil
}

// checkChunk walks the page headers of one column chunk, where parquet-go
// will read them (from the dictionary page offset when set, else the data
// page offset, for total_compressed_size bytes). window is a reusable read
// buffer, returned possibly grown.
func checkChunk(r io.ReaderAt, size, budget int64, cm *format.ColumnMetaData, window []byte) ([]byte, error) {
	start := cm.DataPageOffset
	if cm.DictionaryPageOffset != 0 {
		start = cm.DictionaryPageOffset
	}
	end := start + cm.TotalCompressedSize
	if start < 0 || cm.TotalCompressedSize < 0 || end > size || end < start {
		return window, fmt.Errorf("chunk [%d, +%d) is not inside the %d-byte file", start, cm.TotalCompressedSize, size)
	}
	for pos := start; pos < end; {
		// A header is usually tens of bytes; read more only when its
		// statistics are larger.
		want := min(end-pos, 512)
		var hdrLen int
		for {
			if int64(cap(window)) < want {
				window = make([]byte, want)
			}
			buf := window[:want]
			if _, err := r.ReadAt(buf, pos); err != nil {
				return window, fmt.Errorf("read page header at %d: %w", pos, err)
			}
			n, err := walkThrift(buf)
			if errors.Is(err, errThriftShort) && want < end-pos {
				want = min(end-pos, 4*want)
				continue
			}
			if err != nil {
				return window, fmt.Errorf("page header at %d: %w", pos, err)
			}
			hdrLen = n
			break
		}
		var h format.PageHeader
		if err := thrift.Unmarshal(&thrift.CompactProtocol{}, window[:hdrLen], &h); err != nil {
			return window, fmt.Errorf("page header at %d: %w", pos, err)
		}
		body := pos + int64(hdrLen)
		if err := checkPageHeader(&h, end-body, budget); err != nil {
			return window, fmt.Errorf("page at %d: %w", pos, err)
		}
		pos = body + int64(h.CompressedPageSize)
	}
	return window, nil
}

// checkPageHeader checks one page's claims against the room left in its
// chunk and the budget.
func checkPageHeader(h *format.PageHeader, room, budget int64) error {
	if h.CompressedPageSize < 0 || int64(h.CompressedPageSize) > room {
		return fmt.Errorf("compressed size %d does not fit in the %d bytes left in the chunk", h.CompressedPageSize, room)
	}
	if h.UncompressedPageSize < 0 || int64(h.UncompressedPageSize) > budget {
		return fmt.Errorf("uncompressed size %d out of bounds (0–%d)", h.UncompressedPageSize, budget)
	}
	counts := []int32{}
	if h.DataPageHeader.Valid {
		counts = append(counts, h.DataPageHeader.V.NumValues)
	}
	if h.DictionaryPageHeader.Valid {
		counts = append(counts, h.DictionaryPageHeader.V.NumValues)
	}
	if v := h.DataPageHeaderV2; v.Valid {
		counts = append(counts, v.V.NumValues, v.V.NumNulls, v.V.NumRows)
		if v.V.DefinitionLevelsByteLength < 0 || v.V.RepetitionLevelsByteLength < 0 ||
			int64(v.V.DefinitionLevelsByteLength)+int64(v.V.RepetitionLevelsByteLength) > int64(h.CompressedPageSize) {
			return fmt.Errorf("level lengths %d+%d exceed the page's %d bytes",
				v.V.RepetitionLevelsByteLength, v.V.DefinitionLevelsByteLength, h.CompressedPageSize)
		}
	}
	for _, n := range counts {
		if n < 0 || int64(n) > budget {
			return fmt.Errorf("value count %d out of bounds (0–%d)", n, budget)
		}
	}
	return nil
}

// Thrift compact protocol types (the low nibble of a field header).
const (
	tcTrue = iota + 1
	tcFalse
	tcByte
	tcI16
	tcI32
	tcI64
	tcDouble
	tcBinary
	tcList
	tcSet
	tcMap
	tcStruct
	tcUUID
)

// errThriftShort is walkThrift's error when the input ends inside the
// struct: more bytes may complete it.
var errThriftShort = errors.New("thrift: truncated")

// maxThriftDepth bounds nesting; Parquet's own structs nest a few levels.
const maxThriftDepth = 64

// walkThrift checks that b starts with one thrift compact struct whose
// every list, set, map and string length fits in the bytes that follow it,
// and returns the struct's length. Decoding such a struct allocates in
// proportion to its length.
func walkThrift(b []byte) (int, error) {
	w := thriftWalker{b: b}
	if err := w.value(tcStruct, 0); err != nil {
		return 0, err
	}
	return w.pos, nil
}

type thriftWalker struct {
	b   []byte
	pos int
}

func (w *thriftWalker) byte() (byte, error) {
	if w.pos >= len(w.b) {
		return 0, errThriftShort
	}
	c := w.b[w.pos]
	w.pos++
	return c, nil
}

func (w *thriftWalker) uvarint() (uint64, error) {
	v, n := binary.Uvarint(w.b[w.pos:])
	switch {
	case n == 0:
		return 0, errThriftShort
	case n < 0:
		return 0, errors.New("thrift: varint overflows 64 bits")
	}
	w.pos += n
	return v, nil
}

func (w *thriftWalker) skip(n uint64) error {
	if n > uint64(len(w.b)-w.pos) {
		return fmt.Errorf("%w: %d bytes claimed, %d left", errThriftShort, n, len(w.b)-w.pos)
	}
	w.pos += int(n)
	return nil
}

// count reads a collection length, which must not exceed the bytes left:
// every element takes at least one.
func (w *thriftWalker) count(n uint64) (int, error) {
	if n > uint64(len(w.b)-w.pos) {
		return 0, fmt.Errorf("%w: %d elements claimed, %d bytes left", errThriftShort, n, len(w.b)-w.pos)
	}
	return int(n), nil
}

func (w *thriftWalker) value(t byte, depth int) error {
	if depth > maxThriftDepth {
		return errors.New("thrift: nested too deep")
	}
	switch t {
	case tcTrue, tcFalse, tcByte:
		// Booleans take a byte inside collections; struct fields carry
		// them in the header, and value is not called for those.
		_, err := w.byte()
		return err
	case tcI16, tcI32, tcI64:
		_, err := w.uvarint()
		return err
	case tcDouble:
		return w.skip(8)
	case tcUUID:
		return w.skip(16)
	case tcBinary:
		n, err := w.uvarint()
		if err != nil {
			return err
		}
		return w.skip(n)
	case tcList, tcSet:
		h, err := w.byte()
		if err != nil {
			return err
		}
		size := uint64(h >> 4)
		if size == 15 {
			if size, err = w.uvarint(); err != nil {
				return err
			}
		}
		n, err := w.count(size)
		if err != nil {
			return err
		}
		for range n {
			if err := w.value(h&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case tcMap:
		size, err := w.uvarint()
		if err != nil || size == 0 {
			return err
		}
		n, err := w.count(size) // an entry takes two bytes or more
		if err != nil {
			return err
		}
		kv, err := w.byte()
		if err != nil {
			return err
		}
		for range n {
			if err := w.value(kv>>4, depth+1); err != nil {
				return err
			}
			if err := w.value(kv&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case tcStruct:
		for {
			h, err := w.byte()
			if err != nil {
				return err
			}
			if h == 0 {
				return nil
			}
			if h>>4 == 0 { // long form: the field id follows
				if _, err := w.uvarint(); err != nil {
					return err
				}
			}
			switch ft := h & 0x0f; ft {
			case tcTrue, tcFalse:
			default:
				if err := w.value(ft, depth+1); err != nil {
					return err
				}
			}
		}
	}
	return fmt.Errorf("thrift: unknown type %d", t)
}
