package mapping

import (
	"unsafe"

	"github.com/parquet-go/parquet-go"
)

// Row is the reusable output of Mapper.Map. Map overwrites Values,
// PartitionValues, Key and Size, and copies string bytes into Arena, which
// Map never resets: their owner does, when nothing refers to them any more.
type Row struct {
	// Values are the data columns' values (DataSchema order), each with
	// its column index and definition level set (1 when present in an
	// optional column, 0 for null), ready for the data file writer
	// (delta.ParquetSchema's slots): DATE as int32 days since the epoch,
	// TIMESTAMP as int64 µs (UTC), strings and binaries as byte arrays in
	// Arena, a VARIANT as two byte arrays in Arena, its metadata and its
	// value, a DECIMAL as its unscaled value: int32 up to 9 digits, int64
	// up to 18, else a fixed-length big-endian two's complement in Arena.
	// A STRUCT, ARRAY or MAP is one byte array in Arena, whatever it
	// holds, so that every row of a table has as many values:
	// delta.AppendNested's encoding of its Parquet leaves' values (each
	// with its leaf's index in delta.NestedLeaves and its repetition and
	// definition levels), which the writer expands; a null one is a null.
	Values parquet.Row
	// PartitionValues are the partition columns' values (PartitionColumns
	// order) as Delta partitionValues strings; nil is null. The strings
	// point into Arena: copy them (strings.Clone) to keep them past Reset.
	PartitionValues []*string
	// Key is the routing key: the partition directory, exactly
	// delta.PartitionDir(PartitionColumns, values), built in a reused buffer.
	// Look buffers up with m[string(row.Key)], which does not allocate.
	Key []byte
	// Size approximates the row's memory footprint in bytes, for budgets.
	Size int
	// Delete says the record was a tombstone (a null value) of a Config
	// with Tombstones: Values hold the columns that do not read the value
	// (the key's fields, kafka.*, now()), the others are null.
	Delete bool
	// Arena receives the string bytes of Values and PartitionValues;
	// allocated by Map when nil.
	Arena *Arena

	pvals []string // backing store of PartitionValues
}

// valueSize is the in-memory size of one parquet.Value.
const valueSize = int(unsafe.Sizeof(parquet.Value{}))

// AppendValues appends Values to dst with their byte arrays copied into a,
// so the copy outlives r.Arena: for a buffer that owns its own arena.
func (r *Row) AppendValues(dst parquet.Row, a *Arena) parquet.Row {
	for _, v := range r.Values {
		if v.IsNull() {
			dst = append(dst, v)
			continue
		}
		switch v.Kind() {
		case parquet.ByteArray:
			v = parquet.ByteArrayValue(a.Copy(v.ByteArray())).Level(v.RepetitionLevel(), v.DefinitionLevel(), v.Column())
		case parquet.FixedLenByteArray: // a decimal of more than 18 digits
			v = parquet.FixedLenByteArrayValue(a.Copy(v.ByteArray())).Level(v.RepetitionLevel(), v.DefinitionLevel(), v.Column())
		}
		dst = append(dst, v)
	}
	return dst
}
