package mapping

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// decimalText renders a decimal column's Parquet value (INT32, INT64 or a
// big-endian two's complement) at the column's scale, as delta.Row holds
// decimals ("12.30").
func decimalText(t testing.TB, typ delta.DataType, v parquet.Value) string {
	t.Helper()
	d := typ.(delta.DecimalType)
	if v.IsNull() {
		return "null"
	}
	n := new(big.Int)
	switch k := v.Kind(); k {
	case parquet.Int32:
		n.SetInt64(int64(v.Int32()))
	case parquet.Int64:
		n.SetInt64(v.Int64())
	case parquet.FixedLenByteArray:
		b := v.ByteArray()
		if len(b) != d.FixedLen() {
			t.Fatalf("%s: %d bytes, want %d", d, len(b), d.FixedLen())
		}
		n.SetBytes(b)
		if b[0]&0x80 != 0 {
			n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
		}
	default:
		t.Fatalf("%s: a %v value", d, k)
	}
	wantKind := parquet.Int32
	switch {
	case d.Precision > 18:
		wantKind = parquet.FixedLenByteArray
	case d.Precision > 9:
		wantKind = parquet.Int64
	}
	if v.Kind() != wantKind {
		t.Fatalf("%s: a %v value, want %v", d, v.Kind(), wantKind)
	}
	return new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale)), nil)).FloatString(d.Scale)
}

// decimalMapper maps records {"d": <value>} into a column d of type typ
// (a second column, n, shows the rest of the row survives).
func decimalMapper(t testing.TB, typ string, mode Mode) *Mapper {
	t.Helper()
	m, err := New(Config{Mode: mode, Columns: []Column{{Name: "d", Type: typ}, {Name: "n", Type: "long"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestJSONDecimals: a JSON number, or a string of one, becomes the exact
// decimal, rounded half up to the column's scale, as Spark 3.5.1's
// from_json with a DecimalType schema gives it (12.345 → 12.35, -0.005 →
// -0.01, "1,234.5" → 1234.50, 1.5e-400 → 0.00; checked against Spark
// for the values marked so); a value of more digits than the precision
// once rounded is an overflow (from_json: null); text that is no number
// cannot be cast (from_json: null).
func TestJSONDecimals(t *testing.T) {
	zeros := strings.Repeat("0", 500)
	for _, c := range []struct {
		typ, json, want string // want: the value, or the reason of a dead letter after "d: "
	}{
		// As Spark's from_json gives them.
		{"decimal(10,2)", `12.345`, "12.35"},
		{"decimal(10,2)", `-12.345`, "-12.35"},
		{"decimal(10,2)", `12.3`, "12.30"},
		{"decimal(10,2)", `"12.345"`, "12.35"},
		{"decimal(10,2)", `"-0.005"`, "-0.01"},
		{"decimal(10,2)", `0.004`, "0.00"},
		{"decimal(10,2)", `99999999.995`, "decimal(10,2) overflow"},
		{"decimal(10,2)", `1e2`, "100.00"},
		{"decimal(10,2)", `"1e2"`, "100.00"},
		{"decimal(10,2)", `"1,234.5"`, "1234.50"},
		{"decimal(10,2)", `" 12"`, `cannot cast " 12" to decimal(10,2)`},
		{"decimal(10,2)", `"+5"`, "5.00"},
		{"decimal(10,2)", `".5"`, "0.50"},
		{"decimal(10,2)", `"5."`, "5.00"},
		{"decimal(10,2)", `1.5e-400`, "0.00"},
		{"decimal(10,2)", `1e400`, "decimal(10,2) overflow"},
		{"decimal(10,2)", `true`, "expected number, got boolean"},
		{"decimal(10,2)", `"abc"`, `cannot cast "abc" to decimal(10,2)`},
		{"decimal(10,2)", `12345678.9`, "12345678.90"},
		{"decimal(10,2)", `123456789`, "decimal(10,2) overflow"},
		{"decimal(10,2)", `-0.0`, "0.00"},
		{"decimal(10,2)", `"NaN"`, `cannot cast "NaN" to decimal(10,2)`},
		{"decimal(10,2)", `0.125`, "0.13"},
		// Rounding looks at the first digit dropped only: half up.
		{"decimal(10,2)", `12.344999999`, "12.34"},
		{"decimal(10,2)", `-12.3450000000000000000000000000000000000000001`, "-12.35"},
		{"decimal(10,2)", `-0.004`, "0.00"}, // no negative zero
		{"decimal(10,2)", `99999999.994`, "99999999.99"},
		{"decimal(10,2)", `-99999999.995`, "decimal(10,2) overflow"},
		{"decimal(10,2)", `0.` + zeros + `1`, "0.00"},
		{"decimal(10,2)", `1` + zeros + `e-498`, "100.00"},
		{"decimal(10,2)", `0.00` + zeros + `e+500`, "0.00"},
		{"decimal(10,2)", `1E+2`, "100.00"},
		{"decimal(10,2)", `1e2147483647`, "decimal(10,2) overflow"},
		{"decimal(10,2)", `"1e2147483648"`, `cannot cast "1e2147483648" to decimal(10,2)`}, // past Java's int exponent
		{"decimal(10,2)", `NaN`, "not a finite number"},
		{"decimal(10,2)", `inf`, "not a finite number"},
		{"decimal(10,2)", `""`, `cannot cast "" to decimal(10,2)`},
		{"decimal(10,2)", `"1e"`, `cannot cast "1e" to decimal(10,2)`},
		{"decimal(10,2)", `"1.2.3"`, `cannot cast "1.2.3" to decimal(10,2)`},
		{"decimal(10,2)", `"--1"`, `cannot cast "--1" to decimal(10,2)`},
		{"decimal(10,2)", `"."`, `cannot cast "." to decimal(10,2)`},
		{"decimal(10,2)", `"1,,2,.5,"`, "12.50"}, // commas dropped wherever they are, as Spark does
		{"decimal(10,2)", `{"x": 1}`, "expected number, got object"},
		{"decimal(10,2)", `null`, "null"},
		// Zero scale rounds to an integer.
		{"decimal(5,0)", `12.5`, "13"},
		{"decimal(5,0)", `-12.5`, "-13"},
		{"decimal(5,0)", `2.4999`, "2"},
		{"decimal(5,0)", `99999.4`, "99999"},
		{"decimal(5,0)", `99999.5`, "decimal(5,0) overflow"},
		{"decimal(5,0)", `-0.5`, "-1"},
		// Every width: INT32, INT64, FIXED_LEN_BYTE_ARRAY of 9 to 16 bytes.
		{"decimal(9,0)", `-999999999`, "-999999999"},
		{"decimal(18,4)", `-12345678901234.5678`, "-12345678901234.5678"},
		{"decimal(19,0)", `9223372036854775808`, "9223372036854775808"},
		{"decimal(19,0)", `-9223372036854775809`, "-9223372036854775809"},
		{"decimal(38,0)", `99999999999999999999999999999999999999`, "99999999999999999999999999999999999999"},
		{"decimal(38,0)", `-99999999999999999999999999999999999999`, "-99999999999999999999999999999999999999"},
		{"decimal(38,0)", `"99999999999999999999999999999999999999.4"`, "99999999999999999999999999999999999999"},
		{"decimal(38,0)", `99999999999999999999999999999999999999.5`, "decimal(38,0) overflow"},
		{"decimal(38,0)", `1e38`, "decimal(38,0) overflow"},
		{"decimal(38,0)", `-1`, "-1"},
		{"decimal(38,38)", `0.99999999999999999999999999999999999999`, "0.99999999999999999999999999999999999999"},
		{"decimal(38,38)", `-0.00000000000000000000000000000000000001`, "-0.00000000000000000000000000000000000001"},
		{"decimal(38,38)", `0.999999999999999999999999999999999999995`, "decimal(38,38) overflow"},
		{"decimal(38,38)", `1`, "decimal(38,38) overflow"},
		{"decimal(38,10)", `-1234567890123456789012345678.01234567895`, "-1234567890123456789012345678.0123456790"},
	} {
		t.Run(c.typ+" "+c.json, func(t *testing.T) {
			m := decimalMapper(t, c.typ, Strict)
			var row Row
			err := m.Map(&Record{Value: []byte(`{"d": ` + c.json + `, "n": 7}`)}, &row)
			var got string
			if me, ok := errors.AsType[*MapError](err); ok {
				got, _ = strings.CutPrefix(me.Reason, "d: ")
			} else if err != nil {
				t.Fatal(err)
			} else {
				got = decimalText(t, m.Schema().Fields[0].Type, row.Values[0])
			}
			if got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
}

// TestDecimalPermissive: in permissive mode a value that does not fit (an
// overflow, text that is no number) is null, as from_json gives it, and the
// rest of the row is kept; a required column still sends the record to the
// DLQ.
func TestDecimalPermissive(t *testing.T) {
	m := decimalMapper(t, "decimal(5,2)", Permissive)
	for _, v := range []string{`1000`, `999.995`, `"abc"`, `NaN`, `true`} {
		var row Row
		if err := m.Map(&Record{Value: []byte(`{"d": ` + v + `, "n": 7}`)}, &row); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if !row.Values[0].IsNull() || row.Values[1].Int64() != 7 {
			t.Errorf("%s: %v, want null and 7", v, row.Values)
		}
	}
	req, err := New(Config{Mode: Permissive, Columns: []Column{{Name: "d", Type: "decimal(5,2)", Required: true}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	if err := req.Map(&Record{Value: []byte(`{"d": 1000}`)}, &row); err == nil || !strings.Contains(err.Error(), "d: decimal(5,2) overflow") {
		t.Errorf("required overflow: %v", err)
	}
}

// TestDecimalTextMatchesBigRat checks castText against math/big on random
// numbers: any digits, points, exponents, signs and scales.
func TestDecimalTextMatchesBigRat(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + rng.IntN(10))
			if rng.IntN(4) == 0 {
				b[i] = '0' // runs of zeros, and 5s followed by zeros
			}
		}
		return string(b)
	}
	for range 20000 {
		p := 1 + rng.IntN(38)
		s := rng.IntN(p + 1)
		var text string
		if rng.IntN(2) == 0 {
			text = "-"
		}
		text += digits(rng.IntN(30))
		if rng.IntN(2) == 0 {
			text += "." + digits(rng.IntN(30))
		}
		if text == "" || text == "-" || text == "." || text == "-." {
			text += "0"
		}
		if rng.IntN(3) == 0 {
			text += fmt.Sprintf("e%d", rng.IntN(80)-40)
		}
		want := referenceDecimal(text, p, s)
		d := newDecimalColumn(delta.DecimalType{Precision: p, Scale: s})
		var out cell
		got := "overflow"
		if f := d.castText([]byte(text), false, &out); f == ok {
			n := new(big.Int).Lsh(big.NewInt(out.hi), 64)
			n.Add(n, new(big.Int).SetUint64(uint64(out.i)))
			got = new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(s)), nil)).FloatString(s)
		} else if f != failOverflow {
			t.Fatalf("%s into decimal(%d,%d): failure %d", text, p, s, f)
		}
		if got != want {
			t.Fatalf("%s into decimal(%d,%d): %s, want %s", text, p, s, got, want)
		}
	}
}

// referenceDecimal is text rounded half up to scale s with math/big, or
// "overflow" past p digits.
func referenceDecimal(text string, p, s int) string {
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		panic(text)
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(s)), nil)))
	neg := r.Sign() < 0
	r.Abs(r)
	q, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if rem.Lsh(rem, 1).Cmp(r.Denom()) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if q.Cmp(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p)), nil)) >= 0 {
		return "overflow"
	}
	if neg {
		q.Neg(q)
	}
	return new(big.Rat).SetFrac(q, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(s)), nil)).FloatString(s)
}

func TestDecimalColumnTypes(t *testing.T) {
	cfg := func(typ string) Config {
		return Config{Columns: []Column{{Name: "id", Type: "string"}, {Name: "amount", Type: typ}}}
	}
	for typ, want := range map[string]string{"decimal(10,2)": "decimal(10,2)", "decimal(38, 0)": "decimal(38,0)",
		"decimal(1,1)": "decimal(1,1)", "decimal( 38 , 38 )": "decimal(38,38)"} {
		m, err := New(cfg(typ), nil)
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		if got := m.Schema().Fields[1].Type; got.String() != want {
			t.Errorf("%s: column type %s, want %s", typ, got, want)
		}
	}
	for typ, want := range map[string]string{
		"decimal(0,0)":  `table.columns[1].type: "decimal(0,0)": the precision must be 1 to 38`,
		"decimal(39,2)": `table.columns[1].type: "decimal(39,2)": the precision must be 1 to 38`,
		"decimal(5,6)":  `table.columns[1].type: "decimal(5,6)": the scale must be 0 to the precision, 5`,
		"decimal(5,-1)": `table.columns[1].type: "decimal(5,-1)": the scale must be 0 to the precision, 5`,
		"decimal(10)":   `table.columns[1].type: malformed "decimal(10)" (want decimal(<precision>,<scale>), e.g. decimal(10,2))`,
		"decimal(a,b)":  `table.columns[1].type: malformed "decimal(a,b)"`,
		"decimal":       `table.columns[1].type: unknown type "decimal"`,
		"numeric(10,2)": `table.columns[1].type: unknown type "numeric(10,2)"`,
	} {
		if err := cfg(typ).Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %s", typ, err, want)
		}
	}
	// Not filled by a source of another type.
	bad := Config{Columns: []Column{{Name: "p", Type: "decimal(10,0)", Source: "kafka.partition"}}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `source "kafka.partition" cannot fill a decimal(10,0) column`) {
		t.Errorf("decimal from kafka.partition: %v", err)
	}
}

// TestDecimalWhere: a route's filter compares a decimal column with a
// literal exactly, whatever the literal's scale.
func TestDecimalWhere(t *testing.T) {
	for _, typ := range []string{"decimal(10,2)", "decimal(38,10)"} {
		m := decimalMapper(t, typ, Strict)
		var row Row
		if err := m.Map(&Record{Value: []byte(`{"d": "-12.30", "n": 1}`)}, &row); err != nil {
			t.Fatal(err)
		}
		for where, want := range map[string]bool{"d = -12.3": true, "d = -12.30": true, "d != -12.3": false, "d < -12.299": true,
			"d > -12.301": true, "d <= -12.3": true, "d < -12.3": false, "d >= -12.2999999999999999": false, "d > -13": true,
			"d < 0": true, "d > 1e40": false, "d > -1e40": true, "d = null": false, "d != null": true} {
			w, err := m.Where(where)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if got := w.Match(&row); got != want {
				t.Errorf("%s: %s is %v, want %v", typ, where, got, want)
			}
		}
	}
}

// TestDecimalAppendValues: Row.AppendValues copies a wide decimal's bytes
// out of the row's arena too.
func TestDecimalAppendValues(t *testing.T) {
	m := decimalMapper(t, "decimal(38,2)", Strict)
	var row Row
	if err := m.Map(&Record{Value: []byte(`{"d": -1.5, "n": 1}`)}, &row); err != nil {
		t.Fatal(err)
	}
	var other Arena
	copied := row.AppendValues(nil, &other)
	row.Arena.Reset()
	if err := m.Map(&Record{Value: []byte(`{"d": 99, "n": 1}`)}, &row); err != nil { // overwrites the reset arena
		t.Fatal(err)
	}
	if got := decimalText(t, m.Schema().Fields[0].Type, copied[0]); got != "-1.50" {
		t.Errorf("AppendValues copy reads %s, want -1.50: it aliases the old arena", got)
	}
}

// Decimals map without allocating, and so do permissive nulls of values
// that do not fit.
func TestMapDecimalsDoesNotAllocate(t *testing.T) {
	for mode, value := range map[Mode]string{
		Strict:     `{"a": 12.345, "b": "-1,234.5", "c": -12345678901234567890.12345678901, "d": 0.5e1}`,
		Permissive: `{"a": 1e400, "b": "abc", "c": -12345678901234567890.12345678901, "d": NaN}`,
	} {
		m, err := New(Config{Mode: mode, Columns: []Column{{Name: "a", Type: "decimal(9,2)"}, {Name: "b", Type: "decimal(18,4)"},
			{Name: "c", Type: "decimal(38,10)"}, {Name: "d", Type: "decimal(10,2)"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if allocs := recordAllocs(t, m, &Record{Value: []byte(value)}); allocs != 0 {
			t.Errorf("%s: Map allocates %.1f times per record", mode, allocs)
		}
	}
}

// recordAllocs is how often m allocates mapping rec, its arena reset now
// and then as a buffer resets its own.
func recordAllocs(t *testing.T, m *Mapper, rec *Record) float64 {
	t.Helper()
	var row Row
	row.Arena = new(Arena)
	i := 0
	return testing.AllocsPerRun(1000, func() {
		if err := m.Map(rec, &row); err != nil {
			t.Fatal(err)
		}
		if i++; i%200 == 0 {
			row.Arena.Reset()
		}
	})
}

// priceSchema has an Avro decimal of each width Spark writes, as bytes and
// as fixed, and a nullable one.
const priceSchema = `{"type": "record", "name": "Price", "fields": [
	{"name": "p9", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
	{"name": "p18", "type": {"type": "fixed", "name": "F8", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 4}},
	{"name": "p38", "type": {"type": "fixed", "name": "F16", "size": 16, "logicalType": "decimal", "precision": 38, "scale": 10}},
	{"name": "i38", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38}},
	{"name": "maybe", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 0}]},
	{"name": "n", "type": "long"},
	{"name": "s", "type": "string"}
]}`

func rat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}

// TestMapAvroDecimals: Avro decimals (bytes and fixed) make decimal(p,s)
// columns, as from_avro types them, and their two's complement unscaled
// values are read exactly; declared decimal columns take them rescaled
// (rounded half up), and Avro ints and longs exactly.
func TestMapAvroDecimals(t *testing.T) {
	m, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, priceSchema)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, f := range m.Schema().Fields {
		types = append(types, f.Name+" "+f.Type.String()+map[bool]string{true: " null", false: ""}[f.Nullable])
	}
	if got, want := strings.Join(types, ", "), "p9 decimal(9,2), p18 decimal(18,4), p38 decimal(38,10), i38 decimal(38,0), maybe decimal(5,0) null, n long, s string"; got != want {
		t.Errorf("columns %s, want %s", got, want)
	}
	for _, vals := range [][]string{
		{"12.34", "-12345678901234.5678", "-1234567890123456789012345678.0123456789", "99999999999999999999999999999999999999", "-5"},
		{"-9999999.99", "99999999999999.9999", "9999999999999999999999999999.9999999999", "-99999999999999999999999999999999999999", "99999"},
		{"0.00", "0.0000", "0.0000000000", "0", "null"},
		{"-0.01", "0.0001", "-0.0000000001", "-1", "0"},
	} {
		rec := map[string]any{"p9": rat(vals[0]), "p18": rat(vals[1]), "p38": rat(vals[2]), "i38": rat(vals[3]), "maybe": nil, "n": int64(1), "s": "x"}
		if vals[4] != "null" {
			rec["maybe"] = rat(vals[4])
		}
		var row Row
		if err := m.Map(&Record{Value: encodeAvro(t, priceSchema, rec)}, &row); err != nil {
			t.Fatal(err)
		}
		for i, want := range vals {
			if got := decimalText(t, m.Schema().Fields[i].Type, row.Values[i]); got != want {
				t.Errorf("%s: %s, want %s", m.Schema().Fields[i].Name, got, want)
			}
		}
	}

	// Declared columns rescale, round half up, and take integers.
	declared, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, priceSchema), Columns: []Column{
		{Name: "up", Type: "decimal(12,4)", Source: "p9"}, {Name: "down", Type: "decimal(5,1)", Source: "p9"},
		{Name: "zero", Type: "decimal(38,0)", Source: "p38"}, {Name: "long", Type: "decimal(12,2)", Source: "n"},
		{Name: "tiny", Type: "decimal(3,0)", Source: "n"}}, Mode: Permissive}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p9, p38 string
		n       int64
		want    []string
	}{
		{"12.35", "-0.5000000000", -5, []string{"12.3500", "12.4", "-1", "-5.00", "-5"}},
		{"-12.35", "0.4999999999", 999, []string{"-12.3500", "-12.4", "0", "999.00", "999"}},
		{"12.34", "-1234567890123456789012345678.5", 1000, []string{"12.3400", "12.3", "-1234567890123456789012345679", "1000.00", "null"}},
		{"-9999999.99", "0", -9223372036854775808, []string{"-9999999.9900", "null", "0", "null", "null"}},
	} {
		rec := map[string]any{"p9": rat(c.p9), "p18": rat("0"), "p38": rat(c.p38), "i38": rat("0"), "maybe": nil, "n": c.n, "s": "x"}
		var row Row
		if err := declared.Map(&Record{Value: encodeAvro(t, priceSchema, rec)}, &row); err != nil {
			t.Fatal(err)
		}
		for i, want := range c.want {
			if got := decimalText(t, declared.Schema().Fields[i].Type, row.Values[i]); got != want {
				t.Errorf("%s from %v: %s, want %s", declared.Schema().Fields[i].Name, rec, got, want)
			}
		}
	}
	strict, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, priceSchema), Columns: []Column{{Name: "d", Type: "decimal(5,0)", Source: "s"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	rec := map[string]any{"p9": rat("0"), "p18": rat("0"), "p38": rat("0"), "i38": rat("0"), "maybe": nil, "n": int64(1), "s": "12"}
	if err := strict.Map(&Record{Value: encodeAvro(t, priceSchema, rec)}, &row); err == nil || !strings.Contains(err.Error(), "d: expected decimal or integer, got string") {
		t.Errorf("a string into a decimal column: %v", err)
	}
}

// TestMapAvroDecimalBytes: the unscaled value is any big-endian two's
// complement (sign-extended past 16 bytes too; an empty one is no
// number); one of more digits than the column holds is an overflow.
func TestMapAvroDecimalBytes(t *testing.T) {
	schema := `{"type": "record", "name": "R", "fields": [{"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 6}}]}`
	m, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, schema), Columns: []Column{{Name: "d", Type: "decimal(38,4)"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := func(b []byte) []byte { return append(binary.AppendVarint(nil, int64(len(b))), b...) }
	twos := func(s string) []byte { // s (an integer) in two's complement, one sign byte more than needed
		n, _ := new(big.Int).SetString(s, 10)
		size := n.BitLen()/8 + 2
		if n.Sign() < 0 {
			n.Add(n, new(big.Int).Lsh(big.NewInt(1), uint(8*size)))
		}
		return n.FillBytes(make([]byte, size))
	}
	repeat := func(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }
	for _, c := range []struct {
		name  string
		value []byte
		want  string
	}{
		{"-123, sign-extended to 21 bytes", append(repeat(0xff, 20), 0x85), "-0.0001"},
		{"123, zero-extended to 21 bytes", append(repeat(0, 20), 0x7b), "0.0001"},
		{"-2^127", append([]byte{0x80}, repeat(0, 15)...), "-170141183460469231731687303715884.1057"},
		{"40 digits, past 128 bits, rounded to 38", twos("1234567890123456789012345678901234567891"), "1234567890123456789012345678901234.5679"},
		{"-40 digits", twos("-1234567890123456789012345678901234567850"), "-1234567890123456789012345678901234.5679"},
		{"41 digits", twos("99999999999999999999999999999999999999999"), "d: decimal(38,4) overflow"},
		{"past 32 bytes", append([]byte{1}, repeat(0, 32)...), "d: decimal(38,4) overflow"},
		{"empty", nil, `d: cannot cast "" to decimal(38,4)`},
	} {
		var row Row
		err := m.Map(&Record{Value: body(c.value)}, &row)
		got := ""
		if me, ok := errors.AsType[*MapError](err); ok {
			got = me.Reason
		} else if err != nil {
			t.Fatal(err)
		} else {
			got = decimalText(t, m.Schema().Fields[0].Type, row.Values[0])
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestMapAvroDecimalsDoesNotAllocate(t *testing.T) {
	m, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, priceSchema), Columns: []Column{{Name: "p9", Type: "decimal(9,2)"},
		{Name: "p18", Type: "decimal(18,4)"}, {Name: "p38", Type: "decimal(38,10)"}, {Name: "i38", Type: "decimal(30,2)"},
		{Name: "n", Type: "decimal(20,1)"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Record{Value: encodeAvro(t, priceSchema, map[string]any{"p9": rat("-12.34"), "p18": rat("12345678901234.5678"),
		"p38": rat("-1234567890123456789012345678.0123456789"), "i38": rat("-1234567890123456789012345678"), "maybe": nil, "n": int64(-7), "s": ""})}
	if allocs := recordAllocs(t, m, rec); allocs != 0 {
		t.Errorf("Map allocates %.1f times per record", allocs)
	}
}

// A registry writer schema whose decimal has more fraction or integer
// digits than the column an earlier version made (decimal(9,2) →
// decimal(9,3), decimal(10,2)) makes its records dead letters naming both
// types, as a wider int does, unless it is a type widening (decimal(10,2):
// at least as many more digits as more fraction digits) and the mapping
// evolves a table that allows it: then it widens the column. One that fits
// (decimal(8,1)) is cast.
func TestMapRegistryAvroDecimalWidening(t *testing.T) {
	version := func(p, s int) string {
		return fmt.Sprintf(`{"type":"record","name":"R","fields":[{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":%d,"scale":%d}}]}`, p, s)
	}
	schemas := &schemaMap{schemas: map[int]string{1: version(9, 2), 2: version(9, 3), 3: version(10, 2), 4: version(8, 1)}}
	for _, widening := range []bool{false, true} {
		m, err := New(Config{Format: Avro, Registry: schemas, Schema: version(9, 2), Evolve: widening, TypeWidening: widening}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var row Row
		for id, want := range map[int]string{
			2: "field d: the writer schema's decimal(9,3) is wider than the table's decimal(9,2) column d: no type widening",
			3: "field d: the writer schema's decimal(10,2) is wider than the table's decimal(9,2) column d: the table's schema does not evolve",
			4: "",
		} {
			err := m.Map(&Record{Value: wire(id, encodeAvro(t, schemas.schemas[id], map[string]any{"d": rat("-1.5")}))}, &row)
			change, _ := errors.AsType[*SchemaChangeError](err)
			switch me, _ := errors.AsType[*MapError](err); {
			case widening && id == 3:
				if change == nil || len(change.Add) != 1 || change.Add[0].Type != "decimal(10,2)" {
					t.Errorf("schema id 3 on a table that widens: %v, want d widened to decimal(10,2)", err)
				}
			case want == "" && err != nil:
				t.Errorf("schema id %d: %v", id, err)
			case want == "" && decimalText(t, m.Schema().Fields[0].Type, row.Values[0]) != "-1.50":
				t.Errorf("schema id %d: %s, want -1.50", id, decimalText(t, m.Schema().Fields[0].Type, row.Values[0]))
			case want != "" && (me == nil || !strings.Contains(me.Error(), want)):
				t.Errorf("schema id %d: %v, want a dead letter saying %q", id, err, want)
			}
		}
	}
}

// TestDecimalTable: decimal columns mapped from JSON and Avro records,
// written as a Delta table, read back exactly (text, scale included) by
// this library's reader and by delta-rs (and DuckDB, which must agree with
// it); the file's stats hold each column's min and max as Spark writes
// them.
func TestDecimalTable(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	store, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	jsonCfg := Config{Columns: []Column{{Name: "id", Type: "long"}, {Name: "p9", Type: "decimal(9,2)"},
		{Name: "p18", Type: "decimal(18,4)"}, {Name: "p38", Type: "decimal(38,10)"}, {Name: "i38", Type: "decimal(38,0)"},
		{Name: "maybe", Type: "decimal(5,0)"}}}
	jm, err := New(jsonCfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	am, err := New(Config{Format: Avro, SchemaFile: schemaFile(t, priceSchema), Columns: append([]Column{{Name: "id", Type: "long", Source: "n"}}, jsonCfg.Columns[1:]...)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"[1 12.35 -12345678901234.5678 -1234567890123456789012345678.0123456789 99999999999999999999999999999999999999 -5]",
		"[2 -9999999.99 99999999999999.9999 0.0000000000 -99999999999999999999999999999999999999 <nil>]",
		"[3 0.00 0.0001 -0.0000000001 0 100]",
		"[4 12.34 -12345678901234.5678 -1234567890123456789012345678.0123456789 99999999999999999999999999999999999999 -5]",
		"[5 -9999999.99 99999999999999.9999 9999999999999999999999999999.9999999999 -99999999999999999999999999999999999999 <nil>]",
	}
	var rows []parquet.Row
	var arena Arena
	for _, doc := range []string{
		`{"id": 1, "p9": 12.345, "p18": "-12345678901234.5678", "p38": -1234567890123456789012345678.0123456789, "i38": 99999999999999999999999999999999999999, "maybe": -5}`,
		`{"id": 2, "p9": "-9,999,999.99", "p18": 99999999999999.9999, "p38": 0, "i38": "-99999999999999999999999999999999999999"}`,
		`{"id": 3, "p9": -0.001, "p18": 1e-4, "p38": "-1E-10", "i38": 0.4, "maybe": 1e2}`,
	} {
		var row Row
		if err := jm.Map(&Record{Value: []byte(doc)}, &row); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row.AppendValues(nil, &arena))
	}
	for i, vals := range [][]string{
		{"12.34", "-12345678901234.5678", "-1234567890123456789012345678.0123456789", "99999999999999999999999999999999999999", "-5"},
		{"-9999999.99", "99999999999999.9999", "9999999999999999999999999999.9999999999", "-99999999999999999999999999999999999999", ""},
	} {
		rec := map[string]any{"p9": rat(vals[0]), "p18": rat(vals[1]), "p38": rat(vals[2]), "i38": rat(vals[3]), "maybe": nil, "n": int64(4 + i), "s": ""}
		if vals[4] != "" {
			rec["maybe"] = rat(vals[4])
		}
		var row Row
		if err := am.Map(&Record{Value: encodeAvro(t, priceSchema, rec)}, &row); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row.AppendValues(nil, &arena))
	}

	tbl := delta.NewTable(store)
	snap, err := tbl.Create(ctx, jm.Schema(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := delta.CreateDataFile(ctx, store, delta.NewDataFileKey(nil, nil, delta.Snappy), jm.DataSchema(), nil, delta.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteRows(rows); err != nil {
		t.Fatal(err)
	}
	add, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, snap, []delta.Action{{Add: add}}, delta.Operation{Name: "WRITE"}); err != nil {
		t.Fatal(err)
	}
	wantStats := `{"numRecords":5,"minValues":{"id":1,"p9":-9999999.99,"p18":-12345678901234.5678,` +
		`"p38":-1234567890123456789012345678.0123456789,"i38":-99999999999999999999999999999999999999,"maybe":-5},` +
		`"maxValues":{"id":5,"p9":12.35,"p18":99999999999999.9999,"p38":9999999999999999999999999999.9999999999,` +
		`"i38":99999999999999999999999999999999999999,"maybe":100},"nullCount":{"id":0,"p9":0,"p18":0,"p38":0,"i38":0,"maybe":2}}`
	if add.Stats != wantStats {
		t.Errorf("stats\n got %s\nwant %s", add.Stats, wantStats)
	}

	ours, err := delta.ReadDataFile(ctx, store, jm.Schema(), nil, add)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range ours {
		got = append(got, fmt.Sprint(r))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("read back\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	out := testenv.DeltaRS(t, nil, "read", dir, "--rows", "--duckdb")
	testenv.CheckDuckDB(t, out)
	var view struct{ Rows []map[string]any }
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&view); err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, r := range view.Rows {
		var row delta.Row
		for _, f := range jm.Schema().Fields {
			row = append(row, r[f.Name])
		}
		got = append(got, fmt.Sprint(row))
	}
	slices.Sort(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("delta-rs reads\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// FuzzDecimalText: castText never panics, reads any text it accepts as
// math/big reads it (commas dropped in strings), rounded half up, and
// fails only with failCast, failOverflow.
func FuzzDecimalText(f *testing.F) {
	for _, s := range []string{"12.345", "-0.005", "1e2", "1,234.5", ".5", "5.", "+5", "1e2147483647", "0.000000001e9", "--1", "1.2.3", ""} {
		f.Add(s, false)
		f.Add(s, true)
	}
	cols := []decimalColumn{newDecimalColumn(delta.DecimalType{Precision: 10, Scale: 2}),
		newDecimalColumn(delta.DecimalType{Precision: 38, Scale: 10}), newDecimalColumn(delta.DecimalType{Precision: 38, Scale: 0}),
		newDecimalColumn(delta.DecimalType{Precision: 1, Scale: 1})}
	bigExp := regexp.MustCompile(`[eE][+-]?[0-9]{4,}`)
	f.Fuzz(func(t *testing.T, text string, commas bool) {
		for _, d := range cols {
			var out cell
			f := d.castText([]byte(text), commas, &out)
			if f != ok && f != failOverflow && f != failCast {
				t.Fatalf("%q: failure %d", text, f)
			}
			clean := text
			if commas {
				clean = strings.ReplaceAll(text, ",", "")
			}
			if f == failCast || len(clean) > 200 || bigExp.MatchString(clean) { // math/big refuses, or takes long over, huge exponents
				continue
			}
			if _, good := new(big.Rat).SetString(clean); !good {
				t.Fatalf("%q: read as a number (%d), math/big refuses it", text, f)
			}
			want := referenceDecimal(clean, d.prec, d.scale)
			got := "overflow"
			if f == ok {
				n := new(big.Int).Lsh(big.NewInt(out.hi), 64)
				n.Add(n, new(big.Int).SetUint64(uint64(out.i)))
				got = new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.scale)), nil)).FloatString(d.scale)
			}
			if got != want {
				t.Fatalf("%q into decimal(%d,%d): %s, want %s", text, d.prec, d.scale, got, want)
			}
		}
	})
}

// A decimal partition column's value is its plain text at the column's
// scale, as Spark 4 writes the same values into partitionValues (Spark
// 3.5 differs only where it goes scientific: 0.0000000001 is its 1E-10).
func TestDecimalPartitionValues(t *testing.T) {
	for typ, cases := range map[string]map[string]string{
		"decimal(12,2)":  {`12.5`: "12.50", `-0.01`: "-0.01", `0`: "0.00", `-12.5`: "-12.50", `"1234567890.12"`: "1234567890.12", `0.1`: "0.10", `-0.001`: "0.00"},
		"decimal(10,0)":  {`0`: "0", `-7`: "-7", `42`: "42"},
		"decimal(20,10)": {`1e-10`: "0.0000000001", `-0.0000001`: "-0.0000001000", `0`: "0.0000000000", `1`: "1.0000000000"},
		"decimal(38,18)": {`"12345678901234567890.123456789012345678"`: "12345678901234567890.123456789012345678", `1e-18`: "0.000000000000000001",
			`"-99999999999999999999.999999999999999999"`: "-99999999999999999999.999999999999999999"},
	} {
		m, err := New(Config{Columns: []Column{{Name: "p", Type: typ}, {Name: "x", Type: "long"}}}, []string{"p"})
		if err != nil {
			t.Fatal(err)
		}
		for value, want := range cases {
			var row Row
			if err := m.Map(&Record{Value: []byte(`{"p": ` + value + `, "x": 1}`)}, &row); err != nil {
				t.Errorf("%s %s: %v", typ, value, err)
				continue
			}
			if got := row.PartitionValues[0]; got == nil || *got != want || string(row.Key) != "p="+want {
				t.Errorf("%s %s: partition value %v, directory %q; want %q", typ, value, got, row.Key, want)
			}
		}
	}
}
