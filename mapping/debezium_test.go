package mapping

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// debeziumSample is a record the real Debezium Postgres connector 3.6.1
// wrote through Kafka Connect's JSON converter (scripts/cdc.sh captured
// them: testdata/debezium).
type debeziumSample struct {
	Key    json.RawMessage `json:"key"`
	Value  json.RawMessage `json:"value"`
	Offset int64           `json:"offset"`
}

func debeziumSamples(t *testing.T, file string) []debeziumSample {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []debeziumSample
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s debeziumSample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		if string(s.Value) == "null" {
			s.Value = nil
		}
		out = append(out, s)
	}
	return out
}

// Debezium's change events, with and without the JSON converter's schemas:
// a snapshot read, a create and an update upsert their after image; a
// delete deletes the key its before image names; the tombstone after it
// is skipped; cdc.<path> reads the envelope.
func TestMapDebeziumEvents(t *testing.T) {
	cfg := Config{KeyFormat: JSON, Tombstones: true, CDC: CDCDebezium, Columns: []Column{
		{Name: "id", Type: "long", Required: true},
		{Name: "key_id", Type: "long", Source: "kafka.key.id"},
		{Name: "name", Type: "string"},
		{Name: "balance", Type: "long"},
		{Name: "op", Type: "string", Source: "cdc.op"},
		{Name: "lsn", Type: "long", Source: "cdc.source.lsn"},
	}}
	type want struct {
		delete  bool
		skip    bool
		id      int64
		name    string
		balance int64
		op      string
	}
	wants := []want{
		{id: 1, name: "alice", balance: 100, op: "r"},
		{id: 4, name: "dave", balance: 400, op: "c"},
		{id: 1, name: "alice", balance: 110, op: "u"},
		{delete: true, id: 3, op: "d"},
		{skip: true},
		{delete: true, id: 2, op: "d"},
		{skip: true},
		{id: 99, name: "bob", balance: 200, op: "c"}, // bob's key changed: 2 deleted, 99 created
	}
	for _, file := range []string{"testdata/debezium/accounts.jsonl", "testdata/debezium/accounts-schemas.jsonl"} {
		m, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		samples := debeziumSamples(t, file)
		if len(samples) != len(wants) {
			t.Fatalf("%s: %d samples, want %d", file, len(samples), len(wants))
		}
		for i, s := range samples {
			var row Row
			err := m.Map(&Record{Key: s.Key, Value: s.Value, Offset: s.Offset}, &row)
			w := wants[i]
			switch {
			case w.skip:
				if !errors.Is(err, ErrSkip) {
					t.Errorf("%s #%d (a tombstone): %v, want ErrSkip", file, i, err)
				}
				continue
			case err != nil:
				t.Errorf("%s #%d: %v", file, i, err)
				continue
			case row.Delete != w.delete:
				t.Errorf("%s #%d: delete %v, want %v", file, i, row.Delete, w.delete)
			}
			if row.Values[0].Int64() != w.id || row.Values[1].Int64() != w.id || string(row.Values[4].ByteArray()) != w.op || row.Values[5].Int64() == 0 {
				t.Errorf("%s #%d: id %v, key id %v, op %q, lsn %v; want id %d, op %q", file, i, row.Values[0], row.Values[1],
					row.Values[4].ByteArray(), row.Values[5], w.id, w.op)
			}
			if !w.delete && (string(row.Values[2].ByteArray()) != w.name || row.Values[3].Int64() != w.balance) {
				t.Errorf("%s #%d: %q %v, want %q %d", file, i, row.Values[2].ByteArray(), row.Values[3], w.name, w.balance)
			}
		}
	}
}

// What is not a change event the table takes is a dead letter saying so;
// cdc needs upsert mode and JSON values.
func TestMapDebeziumRefuses(t *testing.T) {
	cols := []Column{{Name: "id", Type: "long"}}
	m, err := New(Config{Tombstones: true, CDC: CDCDebezium, Columns: cols}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for value, want := range map[string]string{
		`{"id": 1}`: "not a Debezium change event (no op)",
		`{"op": "t", "before": null, "after": null, "source": {}}`: `Debezium operation "t" is not supported`,
		`{"op": "c", "before": null, "after": null, "source": {}}`: "Debezium change event without its after image",
		`{"schema": {}, "payload": 7}`:                             "payload: not a JSON object",
	} {
		var row Row
		err := m.Map(&Record{Value: []byte(value)}, &row)
		if me, ok := errors.AsType[*MapError](err); !ok || me.Reason != want {
			t.Errorf("%s: %v, want a dead letter %q", value, err, want)
		}
	}
	for cfg, want := range map[*Config]string{
		{CDC: CDCDebezium, Columns: cols}:                                 "needs write_mode: upsert",
		{CDC: "maxwell", Tombstones: true, Columns: cols}:                 `unknown "maxwell"`,
		{CDC: CDCDebezium, Tombstones: true, Format: Avro, Columns: cols}: "reads JSON change events",
	} {
		if _, err := New(*cfg, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", *cfg, err, want)
		}
	}
}
