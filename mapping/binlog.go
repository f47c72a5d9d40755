package mapping

import (
	"bytes"
	"strconv"

	"github.com/valyala/fastjson"
)

// BinlogPositionSource is the source of a MySQL or MariaDB change event's
// binlog position as one long (Debezium's source.file, source.pos and
// source.row), which grows with every change of the server, so that it can
// order them: PostgreSQL's source.lsn is one number already, MySQL's
// position is three. Bits 62..45 hold the file's index (the digits after
// its last dot: mysql-bin.000003 is 3), bits 44..13 pos (the event's byte
// offset in the file: binlog offsets are 32-bit), bits 12..0 row (the row
// within the event), so the longs order as (index, pos, row) do. A position
// out of those ranges is a dead letter naming the field.
const BinlogPositionSource = "cdc.source.binlog_position"

// The binlog position's bit widths; 63 in all, so that it is never negative.
const (
	binlogRowBits   = 13
	binlogPosBits   = 32
	binlogIndexBits = 63 - binlogPosBits - binlogRowBits
)

// binlogFields are the envelope paths a binlog position is made of: file,
// pos and row, in the order of planColumn.binlog.
var binlogFields = [3][]string{{"cdc", "source", "file"}, {"cdc", "source", "pos"}, {"cdc", "source", "row"}}

// binlogPosition is the binlog position of the change event resolved, from
// column c's nodes.
func (j *jsonValues) binlogPosition(c *planColumn) (int64, *MapError) {
	var name []byte
	var nums [2]int64
	for k, node := range c.binlog {
		v := j.vals[node]
		if v == nil || v.Type() == fastjson.TypeNull {
			return 0, binlogMissing(c, k)
		}
		var err error
		if k == 0 {
			name, err = v.StringBytes()
		} else {
			nums[k-1], err = v.Int64()
		}
		if err != nil {
			return 0, binlogNotA(c, k)
		}
	}
	return packBinlog(c, name, nums[0], nums[1])
}

// binlogMissing is the dead letter of a binlog position without field k.
func binlogMissing(c *planColumn, k int) *MapError {
	return binlogError(c, k, "is missing: "+BinlogPositionSource+" reads a MySQL or MariaDB change event")
}

// binlogNotA is the dead letter of a binlog position whose field k is of
// another type than the file's string or the pos's and row's integer.
func binlogNotA(c *planColumn, k int) *MapError {
	if k == 0 {
		return binlogError(c, k, "is not a string")
	}
	return binlogError(c, k, "is not an integer")
}

// packBinlog packs a binlog file name, pos and row into column c's long,
// or says which of them does not fit.
func packBinlog(c *planColumn, name []byte, pos, row int64) (int64, *MapError) {
	index, why := binlogIndex(name)
	if why != "" {
		return 0, binlogError(c, 0, why)
	}
	if pos, why = binlogNumber(pos, 1); why != "" {
		return 0, binlogError(c, 1, why)
	}
	if row, why = binlogNumber(row, 2); why != "" {
		return 0, binlogError(c, 2, why)
	}
	return index<<(binlogPosBits+binlogRowBits) | pos<<binlogRowBits | row, nil
}

// binlogIndex is the index of a binlog file name: the digits after its
// last dot; or why it has none that fits.
func binlogIndex(name []byte) (int64, string) {
	dot := bytes.LastIndexByte(name, '.')
	if dot < 0 || dot == len(name)-1 {
		return 0, quote(name) + " does not end in .<index>"
	}
	var n int64
	for _, d := range name[dot+1:] {
		if d < '0' || d > '9' {
			return 0, quote(name) + " does not end in .<index>"
		}
		if n = n*10 + int64(d-'0'); n >= 1<<binlogIndexBits {
			return 0, quote(name) + ": its index is past the binlog position's " + strconv.FormatInt(1<<binlogIndexBits-1, 10)
		}
	}
	return n, ""
}

// binlogNumber is n as the pos (k 1) or row (k 2) of a binlog position,
// or why it does not fit its bits.
func binlogNumber(n int64, k int) (int64, string) {
	bits := binlogPosBits
	if k == 2 {
		bits = binlogRowBits
	}
	if n < 0 || n >= 1<<bits {
		return 0, strconv.FormatInt(n, 10) + " is out of the binlog position's range 0.." + strconv.FormatInt(1<<bits-1, 10)
	}
	return n, ""
}

// binlogError is the dead letter of column c's binlog position, whose
// field k (in binlogFields) is not one.
func binlogError(c *planColumn, k int, reason string) *MapError {
	return &MapError{Reason: c.Name + ": " + joinPath(binlogFields[k]) + " " + reason, Column: c.Name, Path: BinlogPositionSource}
}
