package mapping

import (
	"slices"
	"strings"
	"testing"
)

// binlogEvent is a change event of a MySQL connector's: a row image and
// the source's binlog file, pos and row (as JSON texts; "" leaves one out).
func binlogEvent(file, pos, row string) []byte {
	source := `"server_id": 1`
	for _, f := range [][2]string{{"file", file}, {"pos", pos}, {"row", row}} {
		if f[1] != "" {
			source += `, "` + f[0] + `": ` + f[1]
		}
	}
	return []byte(`{"op": "u", "source": {` + source + `}, "after": {"id": 1}}`)
}

// cdc.source.binlog_position makes one long of a MySQL change event's binlog
// file index, pos and row, which orders as they do: across a rotation, by
// pos within a file, by row within an event; with and without schemas.
func TestMapBinlogPosition(t *testing.T) {
	m, err := New(Config{Tombstones: true, CDC: CDCDebezium, Columns: []Column{
		{Name: "id", Type: "long", Required: true},
		{Name: "seq", Type: "long", Source: BinlogPositionSource},
		{Name: "file", Type: "string", Source: "cdc.source.file"},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ordered := [][]byte{
		binlogEvent(`"mysql-bin.000001"`, "4", "0"),
		binlogEvent(`"mysql-bin.000001"`, "4", "1"),
		binlogEvent(`"mysql-bin.000001"`, "4", "8191"),
		binlogEvent(`"mysql-bin.000001"`, "5", "0"),
		binlogEvent(`"mysql-bin.000001"`, "4294967295", "0"),
		binlogEvent(`"mysql-bin.000002"`, "0", "0"),
		binlogEvent(`"mariadb-bin.000010"`, "385", "2"),
		[]byte(`{"schema": {"type": "struct", "fields": []}, "payload": ` + string(binlogEvent(`"mysql-bin.262143"`, "4294967295", "8191")) + `}`),
	}
	var got []int64
	for _, v := range ordered {
		var row Row
		if err := m.Map(&Record{Value: v}, &row); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		got = append(got, row.Values[1].Int64())
	}
	if want := []int64{4<<13 + 1<<45, 4<<13 + 1<<45 | 1, 4<<13 + 1<<45 | 8191}; !slices.Equal(got[:3], want) {
		t.Errorf("mysql-bin.000001 pos 4, rows 0, 1, 8191: %d, want %d", got[:3], want)
	}
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("positions %d do not grow with (index, pos, row)", got)
	}
	if got[len(got)-1] != 1<<63-1 {
		t.Errorf("the largest position is %d, want %d", got[len(got)-1], int64(1<<63-1))
	}
}

// A binlog position whose parts are missing or do not fit is a dead letter
// naming the field and its range; the source needs cdc: debezium and a
// long column.
func TestMapBinlogPositionRefused(t *testing.T) {
	cols := []Column{{Name: "id", Type: "long"}, {Name: "seq", Type: "long", Source: BinlogPositionSource}}
	m, err := New(Config{Tombstones: true, CDC: CDCDebezium, Columns: cols}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for value, want := range map[string]string{
		`{"op": "c", "source": {"lsn": 7}, "after": {"id": 1}}`:      "seq: cdc.source.file is missing: cdc.source.binlog_position reads a MySQL or MariaDB change event",
		string(binlogEvent(`"mysql-bin.000001"`, "4", "")):           "seq: cdc.source.row is missing",
		string(binlogEvent(`"mysql-bin.262144"`, "4", "0")):          `seq: cdc.source.file "mysql-bin.262144": its index is past the binlog position's 262143`,
		string(binlogEvent(`"mysql-bin"`, "4", "0")):                 `seq: cdc.source.file "mysql-bin" does not end in .<index>`,
		string(binlogEvent(`"mysql-bin.00a1"`, "4", "0")):            `does not end in .<index>`,
		string(binlogEvent(`3`, "4", "0")):                           "seq: cdc.source.file is not a string",
		string(binlogEvent(`"mysql-bin.000001"`, "4294967296", "0")): "seq: cdc.source.pos 4294967296 is out of the binlog position's range 0..4294967295",
		string(binlogEvent(`"mysql-bin.000001"`, "4", "8192")):       "seq: cdc.source.row 8192 is out of the binlog position's range 0..8191",
		string(binlogEvent(`"mysql-bin.000001"`, "-1", "0")):         "cdc.source.pos -1 is out of",
		string(binlogEvent(`"mysql-bin.000001"`, `"4"`, "0")):        "seq: cdc.source.pos is not an integer",
	} {
		var row Row
		err := m.Map(&Record{Value: []byte(value)}, &row)
		me, ok := err.(*MapError)
		if !ok || !strings.Contains(me.Reason, want) || me.Column != "seq" || me.Path != BinlogPositionSource {
			t.Errorf("%s: %v, want a dead letter of column seq saying %q", value, err, want)
		}
	}
	for cfg, want := range map[*Config]string{
		{Tombstones: true, Columns: cols}: "table.columns[1].source: cdc.source.binlog_position reads a Debezium change event's source: it needs cdc: debezium",
		{Tombstones: true, CDC: CDCDebezium, Columns: []Column{{Name: "seq", Type: "integer", Source: BinlogPositionSource}}}: `table.columns[0].type: source "cdc.source.binlog_position" cannot fill a integer column`,
	} {
		if _, err := New(*cfg, nil); err == nil || err.Error() != want {
			t.Errorf("%+v: %v, want %q", *cfg, err, want)
		}
	}
}
