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

func debeziumSamples(t testing.TB, file string) []debeziumSample {
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
// cdc needs upsert mode and JSON or Avro values.
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
		{CDC: CDCDebezium, Columns: cols}:                                       "needs write_mode: upsert",
		{CDC: "maxwell", Tombstones: true, Columns: cols}:                       `unknown "maxwell"`,
		{CDC: CDCDebezium, Tombstones: true, Format: JSONSchema, Columns: cols}: "reads JSON change events",
	} {
		if _, err := New(*cfg, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", *cfg, err, want)
		}
	}
}

// debeziumDecimalEvent is a change event as Debezium's Postgres connector
// writes a row of (id int, amount numeric(12,2), price numeric) in
// decimal.handling.mode=precise: amount the base64 of its unscaled value,
// price a VariableScaleDecimal; with schemas, amountSchema is amount's.
func debeziumDecimalEvent(schemas bool, amountSchema, op, amount, price string) []byte {
	image := "after"
	if op == "d" {
		image = "before"
	}
	payload := `{"op": "` + op + `", "source": {"lsn": 7}, "` + image + `": {"id": 1, "amount": ` + amount + `, "price": ` + price + `}}`
	if !schemas {
		return []byte(payload)
	}
	row := func(field string) string {
		return `{"type": "struct", "fields": [{"type": "int32", "optional": false, "field": "id"}, ` + amountSchema + `, ` +
			`{"type": "struct", "fields": [{"type": "int32", "optional": false, "field": "scale"}, {"type": "bytes", "optional": false, "field": "value"}], ` +
			`"optional": true, "name": "io.debezium.data.VariableScaleDecimal", "version": 1, "doc": "Variable scaled decimal", "field": "price"}], ` +
			`"optional": true, "name": "pg.public.t.Value", "field": "` + field + `"}`
	}
	return []byte(`{"schema": {"type": "struct", "fields": [` + row("before") + `, ` + row("after") + `], "name": "pg.public.t.Envelope"}, "payload": ` + payload + `}`)
}

// Debezium's decimals become exact decimal columns: a numeric(p,s) at the
// scale its schema gives (rescaled into a column of another scale), at
// the column's own without schemas; a numeric without precision at the
// scale it carries; a string (decimal.handling.mode=string) as a number's
// text. What cannot be read is a dead letter naming the column.
func TestMapDebeziumDecimals(t *testing.T) {
	cfg := Config{Tombstones: true, CDC: CDCDebezium, Columns: []Column{
		{Name: "id", Type: "long", Required: true},
		{Name: "amount", Type: "decimal(12,2)"},
		{Name: "wide", Type: "decimal(14,4)", Source: "amount"},
		{Name: "price", Type: "decimal(18,4)"},
	}}
	m, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	const decimal = `{"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal", "version": 1, ` +
		`"parameters": {"scale": "2", "connect.decimal.precision": "12"}, "field": "amount"}`
	const text = `{"type": "string", "optional": true, "field": "amount"}`
	for _, c := range []struct {
		value               []byte
		amount, wide, price int64 // unscaled
	}{
		// 12.50 and 12.345
		{debeziumDecimalEvent(true, decimal, "c", `"BOI="`, `{"scale": 3, "value": "MDk="}`), 1250, 125000, 123450},
		// without its schema, amount is read at the column's scale: wide's 4
		{debeziumDecimalEvent(false, "", "u", `"BOI="`, `{"scale": 3, "value": "MDk="}`), 1250, 1250, 123450},
		// a delete's before image: -9999999999.99 and -5
		{debeziumDecimalEvent(true, decimal, "d", `"/xcrWvAB"`, `{"scale": 0, "value": "+w=="}`), -999999999999, -99999999999900, -50000},
		{debeziumDecimalEvent(false, "", "r", `"AA=="`, `{"scale": 5, "value": "/w=="}`), 0, 0, 0}, // -0.00001 rounds to 0
		{debeziumDecimalEvent(true, text, "c", `"12.50"`, `null`), 1250, 125000, 0},
	} {
		var row Row
		if err := m.Map(&Record{Value: c.value}, &row); err != nil {
			t.Errorf("%s: %v", c.value, err)
			continue
		}
		if row.Values[1].Int64() != c.amount || row.Values[2].Int64() != c.wide || row.Values[3].Int64() != c.price {
			t.Errorf("%s: amount %v, wide %v, price %v; want unscaled %d, %d, %d", c.value, row.Values[1], row.Values[2], row.Values[3],
				c.amount, c.wide, c.price)
		}
	}
	for value, want := range map[string]string{
		string(debeziumDecimalEvent(false, "", "c", `"12.50"`, `null`)):                                                                     `amount: cannot cast "12.50" to decimal(12,2)`,
		string(debeziumDecimalEvent(false, "", "c", `null`, `{"scale": 2}`)):                                                                "price: expected number, got object",
		string(debeziumDecimalEvent(false, "", "c", `null`, `{"scale": 1.5, "value": "AA=="}`)):                                             `price: cannot cast "AA==" to decimal(18,4)`,
		string(debeziumDecimalEvent(true, `{"type": "bytes", "name": "`+connectDecimalName+`", "field": "amount"}`, "c", `"BOI="`, `null`)): `amount: cannot cast "BOI=" to decimal(12,2)`,
		string(debeziumDecimalEvent(false, "", "c", `"f///////////////////////"`, `null`)):                                                  "amount: decimal(12,2) overflow",
	} {
		var row Row
		err := m.Map(&Record{Value: []byte(value)}, &row)
		if me, ok := errors.AsType[*MapError](err); !ok || me.Reason != want {
			t.Errorf("%s: %v, want a dead letter %q", value, err, want)
		}
	}
}

// A numeric(10,2) primary key is in the record key as Debezium writes a
// decimal in the value: the base64 of its unscaled value, its scale in the
// key's schema with schemas.enable. A column reading it (kafka.key.id)
// decodes it as the value's columns do: at the schema's scale (rescaled
// into a column of another), else at the column's own. The records are
// the real Debezium's (testdata/debezium/ledger*.jsonl: scripts/cdc.sh,
// `CREATE TABLE ledger (id numeric(10,2) PRIMARY KEY, note text)`, 12.50,
// -0.01 and 99999999.99 read by the snapshot, 12.50 updated, -0.01
// deleted, 99999999.99 moved to 7.00).
func TestMapDebeziumDecimalKey(t *testing.T) {
	cfg := Config{KeyFormat: JSON, Tombstones: true, CDC: CDCDebezium, Columns: []Column{
		{Name: "id", Type: "decimal(10,2)", Source: "kafka.key.id", Required: true},
		{Name: "wide", Type: "decimal(14,4)", Source: "kafka.key.id"},
		{Name: "note", Type: "string"},
	}}
	// The keys' unscaled values at scale 2, by record; 0: a tombstone.
	keys := []int64{1250, -1, 9999999999, 1250, -1, 0, 9999999999, 0, 700}
	for file, wideScale := range map[string]int64{"testdata/debezium/ledger.jsonl": 1, "testdata/debezium/ledger-schemas.jsonl": 100} {
		m, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		samples := debeziumSamples(t, file)
		if len(samples) != len(keys) {
			t.Fatalf("%s: %d samples, want %d", file, len(samples), len(keys))
		}
		for i, s := range samples {
			var row Row
			err := m.Map(&Record{Key: s.Key, Value: s.Value, Offset: s.Offset}, &row)
			if keys[i] == 0 {
				if !errors.Is(err, ErrSkip) {
					t.Errorf("%s #%d (a tombstone): %v, want ErrSkip", file, i, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s #%d: %v", file, i, err)
				continue
			}
			// Without the key's schema, wide reads the key at its own scale, 4.
			if row.Values[0].Int64() != keys[i] || row.Values[1].Int64() != keys[i]*wideScale {
				t.Errorf("%s #%d: id %v, wide %v; want unscaled %d, %d", file, i, row.Values[0], row.Values[1], keys[i], keys[i]*wideScale)
			}
		}
	}
}
