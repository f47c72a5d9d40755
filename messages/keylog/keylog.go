// Package keylog holds the keys an upsert table's epoch changes, each with
// the sequence of its change and its Kafka offset: what a buffer reports
// of the rows of a data file and a reader of the keys its records
// deleted. It imports nothing, so that messages can carry it.
package keylog

// Log is a list of encoded keys, each with the sequence of the change it
// belongs to and the change's offset (the order of changes of equal
// sequence), kept in one buffer: an epoch holds one per new data file
// (row i of the file is entry i) and one of its deletes.
type Log struct {
	buf  []byte
	ends []int
	seqs []int64
	offs []int64
}

// Append adds key (copied) with its change's sequence and offset.
func (l *Log) Append(key []byte, seq, offset int64) {
	l.buf = append(l.buf, key...)
	l.ends = append(l.ends, len(l.buf))
	l.seqs = append(l.seqs, seq)
	l.offs = append(l.offs, offset)
}

// Len is the number of entries.
func (l *Log) Len() int {
	if l == nil {
		return 0
	}
	return len(l.ends)
}

// At returns entry i: its key (valid while the log is not appended to),
// its sequence and its offset.
func (l *Log) At(i int) (key []byte, seq, offset int64) {
	start := 0
	if i > 0 {
		start = l.ends[i-1]
	}
	return l.buf[start:l.ends[i]], l.seqs[i], l.offs[i]
}

// KeyBytes is the length of all its keys.
func (l *Log) KeyBytes() int64 {
	if l == nil {
		return 0
	}
	return int64(len(l.buf))
}

// Memory is what the log holds, for memory budgets.
func (l *Log) Memory() int64 {
	if l == nil {
		return 0
	}
	return int64(cap(l.buf) + 24*cap(l.ends))
}
