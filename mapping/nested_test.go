package mapping

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta"
)

// leafText renders the leaves of a nested column's value (the row's byte
// array, delta.AppendNested's encoding) as "leaf:r<rep>d<def>=<value>",
// null values as "leaf:r<rep>d<def>", one per leaf value in leaf order.
func leafText(t *testing.T, v parquet.Value) string {
	t.Helper()
	if v.IsNull() {
		return "null"
	}
	b := v.ByteArray()
	var out []string
	for len(b) > 0 {
		leaf, n := binary.Uvarint(b)
		if n <= 0 || len(b) < n+3 {
			t.Fatalf("malformed encoding %x", v.ByteArray())
		}
		rep, def, kind := b[n], b[n+1], b[n+2]
		b = b[n+3:]
		s := fmt.Sprintf("%d:r%dd%d", leaf, rep, def)
		if kind == 0 {
			out = append(out, s)
			continue
		}
		switch parquet.Kind(kind - 1) {
		case parquet.Boolean:
			s, b = fmt.Sprintf("%s=%t", s, b[0] == 1), b[1:]
		case parquet.Int32:
			s, b = fmt.Sprintf("%s=%d", s, int32(binary.LittleEndian.Uint32(b))), b[4:]
		case parquet.Int64:
			s, b = fmt.Sprintf("%s=%d", s, int64(binary.LittleEndian.Uint64(b))), b[8:]
		case parquet.Float:
			s, b = fmt.Sprintf("%s=%g", s, math.Float32frombits(binary.LittleEndian.Uint32(b))), b[4:]
		case parquet.Double:
			s, b = fmt.Sprintf("%s=%g", s, math.Float64frombits(binary.LittleEndian.Uint64(b))), b[8:]
		default:
			size, n := binary.Uvarint(b)
			s, b = fmt.Sprintf("%s=%q", s, b[n:n+int(size)]), b[n+int(size):]
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestParseNestedType(t *testing.T) {
	for in, want := range map[string]string{
		"struct<lat: double, lon: double>":                       "struct<lat: double, lon: double>",
		"struct<lat:double,lon:double>":                          "struct<lat: double, lon: double>",
		"struct<a decimal(10, 2)>":                               "struct<a: decimal(10,2)>",
		"array<decimal (4,1)>":                                   "array<decimal(4,1)>",
		"array<struct<t: timestamp, v: decimal(5,2)>>":           "array<struct<t: timestamp, v: decimal(5,2)>>",
		"map<string, array<long>>":                               "map<string, array<long>>",
		"struct<`a b`: binary, `x``y`: map<string,date>>":        "struct<`a b`: binary, `x``y`: map<string, date>>",
		" array < array < timestamp_ntz > > ":                    "array<array<timestamp_ntz>>",
		"struct<in: struct<deeper: struct<deepest: boolean>>>":   "struct<in: struct<deeper: struct<deepest: boolean>>>",
		"map<string, struct<n: integer, f: float, s: string>>":   "map<string, struct<n: integer, f: float, s: string>>",
		"array<map<string, struct<x: array<decimal(38,10)>>>>":   "array<map<string, struct<x: array<decimal(38,10)>>>>",
		"struct<member0: long, member1: string, member2: bytes>": "",
		"map<integer, string>":                                   "map<integer, string>",
		"map<long,map<boolean, array<long>>>":                    "map<long, map<boolean, array<long>>>",
	} {
		got, err := parseColumnType(in)
		if want == "" {
			if err == nil {
				t.Errorf("%q: %s, want an error", in, typeDDL(got))
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if typeDDL(got) != want {
			t.Errorf("%q: %s, want %s", in, typeDDL(got), want)
		}
		if again, err := parseColumnType(typeDDL(got)); err != nil || typeDDL(again) != want {
			t.Errorf("%q does not read back: %v", want, err)
		}
	}
	for in, want := range map[string]string{
		"struct<a: int>":             `at character 11: unknown type "int"`,
		"struct<a: double":           `at character 17: expected ',' or '>' after a struct field, got the end`,
		"struct<>":                   `at character 8: a struct needs at least one field`,
		"struct<a: long, a: string>": `at character 17: duplicate struct field "a"`,
		"map<double, string>":        `at character 5: a map's keys are string, integer, long or boolean, not double`,
		"map<date, string>":          `at character 5: a map's keys are string, integer, long or boolean, not date`,
		"map<array<long>, string>":   `at character 5: a map's keys are string, integer, long or boolean, not array<long>`,
		"map<string string>":         `at character 12: expected ',' between a map's key and value types, got 's'`,
		"array<variant>":             `at character 7: a variant cannot be inside a struct, array or map`,
		"array<string>>":             `at character 14: unexpected ">" after the type`,
		"array<decimal(40,2)>":       `at character 7: "decimal(40,2)": the precision must be 1 to 38`,
		"array<>":                    `at character 7: expected a type, got '>'`,
		"struct<`a: long>":           "unterminated `quoted` field name",
	} {
		cfg := Config{Columns: []Column{{Name: "id", Type: "string"}, {Name: "v", Type: in}}}
		_, err := New(cfg, nil)
		if err == nil || !strings.Contains(err.Error(), "table.columns[1].type: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want table.columns[1].type: … %s", in, err, want)
		}
	}
	deep := strings.Repeat("array<", 70) + "long" + strings.Repeat(">", 70)
	if _, err := parseColumnType(deep); err == nil || !strings.Contains(err.Error(), "nested deeper than 64 levels") {
		t.Errorf("70 levels: %v", err)
	}
}

// A nested column is no partition column, key path, filter operand or
// protobuf column: each refusal names the key.
func TestNestedColumnRefusals(t *testing.T) {
	cols := []Column{{Name: "id", Type: "string"}, {Name: "loc", Type: "struct<lat: double>"}}
	if _, err := New(Config{Columns: cols}, []string{"loc"}); err == nil || !strings.Contains(err.Error(), `table.partition_columns[0]: column "loc" is struct`) {
		t.Errorf("partition column: %v", err)
	}
	keyed := Config{KeyFormat: JSON, Columns: []Column{{Name: "id", Type: "string"}, {Name: "k", Type: "array<long>", Source: "kafka.key.k"}}}
	if _, err := New(keyed, nil); err == nil || !strings.Contains(err.Error(), "table.columns[1].type: a array column reads the value, not the key") {
		t.Errorf("key path: %v", err)
	}
	m, err := New(Config{Columns: cols}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Where("loc = 'x'"); err == nil || !strings.Contains(err.Error(), "column loc is struct: nested and variant columns can only be compared with null") {
		t.Errorf("where: %v", err)
	}
	w, err := m.Where("loc = null")
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	for rec, want := range map[string]bool{`{"id":"a"}`: true, `{"id":"a","loc":{}}`: false} {
		if err := m.Map(&Record{Value: []byte(rec)}, &row); err != nil || w.Match(&row) != want {
			t.Errorf("loc = null on %s: %v, %v", rec, w.Match(&row), err)
		}
	}
	for _, bad := range []string{"kafka.offset", "now()"} {
		c := Config{Columns: []Column{{Name: "id", Type: "string"}, {Name: "x", Type: "array<long>", Source: bad}}}
		if _, err := New(c, nil); err == nil || !strings.Contains(err.Error(), "table.columns[1].type: source") {
			t.Errorf("%s into an array: %v", bad, err)
		}
	}
}

// A map's keys of a number or boolean type are cast from a JSON object's
// keys as a JSON number's text and true or false are: a key that does not
// cast is a dead letter naming it, or the column null when permissive.
func TestMapJSONNestedKeys(t *testing.T) {
	config := func(mode Mode) Config {
		return Config{Mode: mode, Columns: []Column{{Name: "id", Type: "string"},
			{Name: "codes", Type: "map<integer, string>"}, {Name: "series", Type: "map<long, map<boolean, long>>"}}}
	}
	m, err := New(config(Strict), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Leaves: codes 0 key, 1 value; series 0 key, 1 inner key, 2 inner value.
	for rec, want := range map[string][2]string{
		`{"codes":{"-7":"a","0":null,"2147483647":"c"},"series":{"9007199254740993":{"true":1,"false":2},"-1":{}}}`: {
			`0:r0d2=-7 0:r1d2=0 0:r1d2=2147483647 1:r0d3="a" 1:r1d2 1:r1d3="c"`,
			`0:r0d2=9007199254740993 0:r1d2=-1 1:r0d4=true 1:r2d4=false 1:r1d3 2:r0d5=1 2:r2d5=2 2:r1d3`},
		`{"codes":{"1e2":"exp","3.0":"fraction"},"series":{"5":null}}`: { // integral numbers, as a column's
			`0:r0d2=100 0:r1d2=3 1:r0d3="exp" 1:r1d3="fraction"`, `0:r0d2=5 1:r0d2 2:r0d2`},
		`{"codes":{}}`: {`0:r0d1 1:r0d1`, "null"},
	} {
		var row Row
		if err := m.Map(&Record{Value: []byte(rec)}, &row); err != nil {
			t.Fatalf("%s: %v", rec, err)
		}
		for i, w := range want {
			if got := leafText(t, row.Values[i+1]); got != w {
				t.Errorf("%s: column %s: %s\nwant %s", rec, m.p.cols[i+1].Name, got, w)
			}
		}
	}
	for rec, want := range map[string]string{
		`{"codes":{"x":"a"}}`:                   `codes: key "x": cannot cast "x" to integer`,
		`{"codes":{"2147483648":"a"}}`:          `codes: key "2147483648": integer overflow`,
		`{"codes":{"1.5":"a"}}`:                 `codes: key "1.5": cannot cast "1.5" to integer`,
		`{"codes":{" 1":"a"}}`:                  `codes: key " 1": cannot cast " 1" to integer`,
		`{"series":{"1":{"yes":1}}}`:            `series: value of key "1": key "yes": cannot cast "yes" to boolean`,
		`{"series":{"1":{"true":"many"}}}`:      `series: value of key "1": value of key "true": cannot cast "many" to long`,
		`{"series":{"":{}}}`:                    `series: key "": cannot cast "" to long`,
		`{"series":{"9223372036854775808":{}}}`: `series: key "9223372036854775808": long overflow`,
	} {
		var row Row
		err := m.Map(&Record{Value: []byte(rec)}, &row)
		me, ok := errors.AsType[*MapError](err)
		if !ok || me.Reason != want || me.Column != strings.Split(want, ":")[0] {
			t.Errorf("%s: %v, want a dead letter %q", rec, err, want)
			continue
		}
		pm, err := New(config(Permissive), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := pm.Map(&Record{Value: []byte(rec)}, &row); err != nil {
			t.Errorf("permissive %s: %v", rec, err)
		} else if v := row.Values[pm.p.column(me.Column).dataIdx]; !v.IsNull() {
			t.Errorf("permissive %s: %s is %s, want null", rec, me.Column, leafText(t, v))
		}
	}
	rec := &Record{Value: []byte(`{"id":"a","codes":{"1":"one","22":"two"},"series":{"7":{"true":1,"false":0}}}`)}
	var row Row
	row.Arena = new(Arena)
	if allocs := testing.AllocsPerRun(200, func() {
		if row.Arena.Len() > 1<<20 {
			row.Arena.Reset()
		}
		if err := m.Map(rec, &row); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("%.1f allocations per record, want 0", allocs)
	}
}

// nestedJSONConfig has a struct, an array, a map and their nestings.
func nestedJSONConfig() Config {
	return Config{Columns: []Column{
		{Name: "id", Type: "string"},
		{Name: "loc", Type: "struct<lat: double, lon: double, at: timestamp, inner: struct<floor: integer>>"},
		{Name: "tags", Type: "array<string>"},
		{Name: "attrs", Type: "map<string, long>"},
		{Name: "readings", Type: "array<struct<t: date, v: decimal(5,2)>>", Source: "payload.readings"},
		{Name: "series", Type: "map<string, array<long>>"},
		{Name: "blob", Type: "binary"},
	}}
}

func TestMapJSONNested(t *testing.T) {
	m, err := New(nestedJSONConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := typeDDL(m.Schema()); !strings.Contains(got, "readings: array<struct<t: date, v: decimal(5,2)>>") {
		t.Errorf("schema %s", got)
	}
	// Leaves: loc 0 lat, 1 lon, 2 at, 3 inner.floor; tags 0; attrs 0 key,
	// 1 value; readings 0 t, 1 v; series 0 key, 1 element.
	for _, tc := range []struct {
		name, rec                                string
		loc, tags, attrs, readings, series, blob string
	}{
		{"all present", `{"id":"a","loc":{"lat":47.5,"lon":8.25,"at":"2026-06-22T09:15:30Z","inner":{"floor":3},"unknown":1},
			"tags":["x","y"],"attrs":{"n":1,"m":-2},"payload":{"readings":[{"t":"2026-01-02","v":"1.25"},{"t":"2026-01-03","v":3}]},
			"series":{"s":[1,2],"t":[3]},"blob":"AAEC"}`,
			`0:r0d2=47.5 1:r0d2=8.25 2:r0d2=1782119730000000 3:r0d3=3`, `0:r0d3="x" 0:r1d3="y"`,
			`0:r0d2="n" 0:r1d2="m" 1:r0d3=1 1:r1d3=-2`, `0:r0d4=20455 0:r1d4=20456 1:r0d4=125 1:r1d4=300`,
			`0:r0d2="s" 0:r1d2="t" 1:r0d5=1 1:r2d5=2 1:r1d5=3`, `"\x00\x01\x02"`},
		{"null columns", `{"id":"b","loc":null,"payload":{}}`, "null", "null", "null", "null", "null", "null"},
		{"nulls one level down", `{"id":"c","loc":{"lat":null,"inner":null},"tags":[null],"attrs":{"n":null},
			"payload":{"readings":[null,{"t":null}]},"series":{"s":null}}`,
			`0:r0d1 1:r0d1 2:r0d1 3:r0d1`, `0:r0d2`, `0:r0d2="n" 1:r0d2`, `0:r0d2 0:r1d3 1:r0d2 1:r1d3`,
			`0:r0d2="s" 1:r0d2`, "null"},
		{"nulls two levels down", `{"id":"d","loc":{"inner":{"floor":null}},"series":{"s":[null,7]}}`,
			`0:r0d1 1:r0d1 2:r0d1 3:r0d2`, "null", "null", "null", `0:r0d2="s" 1:r0d4 1:r2d5=7`, "null"},
		{"JSON text", `{"id":"f","loc":"{\"lat\": 1.5, \"inner\": {\"floor\": 0}}","tags":"[\"x\"]","attrs":"{}"}`,
			`0:r0d2=1.5 1:r0d1 2:r0d1 3:r0d3=0`, `0:r0d3="x"`, `0:r0d1 1:r0d1`, "null", "null", "null"},
		{"empty arrays and maps", `{"id":"e","tags":[],"attrs":{},"payload":{"readings":[]},"series":{"s":[]}}`,
			"null", `0:r0d1`, `0:r0d1 1:r0d1`, `0:r0d1 1:r0d1`, `0:r0d2="s" 1:r0d3`, "null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var row Row
			if err := m.Map(&Record{Value: []byte(tc.rec)}, &row); err != nil {
				t.Fatal(err)
			}
			if len(row.Values) != 7 {
				t.Fatalf("%d values, want one per column", len(row.Values))
			}
			for i, want := range []string{tc.loc, tc.tags, tc.attrs, tc.readings, tc.series} {
				v := row.Values[i+1]
				if got := leafText(t, v); got != want {
					t.Errorf("column %s: %s\nwant %s", m.p.cols[i+1].Name, got, want)
				}
				if v.Column() != i+1 || v.DefinitionLevel() != map[bool]int{true: 0, false: 1}[v.IsNull()] || !v.IsNull() && v.Kind() != parquet.ByteArray {
					t.Errorf("column %s: value %v at column %d, def %d", m.p.cols[i+1].Name, v, v.Column(), v.DefinitionLevel())
				}
			}
			if got := row.Values[6]; got.IsNull() != (tc.blob == "null") || !got.IsNull() && fmt.Sprintf("%q", got.ByteArray()) != tc.blob {
				t.Errorf("blob %v, want %s", got, tc.blob)
			}
		})
	}
}

// The leaves' levels are those delta.NestedLeaves gives the writer.
func TestNestedLevelsAreTheWriters(t *testing.T) {
	cfg := nestedJSONConfig()
	m, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.DataSchema().Fields {
		if !delta.IsNested(f.Type) {
			continue
		}
		leaves, err := delta.NestedLeaves(&f)
		if err != nil {
			t.Fatal(err)
		}
		root := m.p.column(f.Name).nested.root
		var walk func(n *nestedType)
		walk = func(n *nestedType) {
			if n.shape == nsLeaf && (leaves[n.first].MaxDef != n.def || leaves[n.first].MaxRep != n.rep) {
				t.Errorf("%s leaf %v: %d/%d, the writer's %d/%d", f.Name, leaves[n.first].Path, n.def, n.rep, leaves[n.first].MaxDef, leaves[n.first].MaxRep)
			}
			for _, c := range n.fields {
				walk(c.t)
			}
			for _, c := range []*nestedType{n.elem, n.key} {
				if c != nil {
					walk(c)
				}
			}
		}
		walk(root)
		if root.end != len(leaves) {
			t.Errorf("%s: %d leaves, the writer's %d", f.Name, root.end, len(leaves))
		}
	}
}

// A value of the wrong shape or scalar anywhere in a nested column is a
// dead letter naming the column and the path inside it; in permissive
// mode the column is null.
func TestMapJSONNestedRejects(t *testing.T) {
	for rec, want := range map[string]string{
		`{"loc":{"lat":"x"}}`:                             `loc: field lat: cannot cast "x" to double`,
		`{"loc":[1]}`:                                     `loc: expected struct, got array`,
		`{"loc":{"inner":{"floor":1.5}}}`:                 `loc: field inner: field floor: cannot cast "1.5" to integer`,
		`{"loc":{"at":"yesterday"}}`:                      `loc: field at: unparsable timestamp "yesterday"`,
		`{"tags":["a",2]}`:                                `tags: element 1: expected string, got number`,
		`{"tags":"a"}`:                                    `tags: a string that is not JSON`,
		`{"tags":1}`:                                      `tags: expected array, got number`,
		`{"loc":"[1]"}`:                                   `loc: expected struct, got array`,
		`{"attrs":{"n":"many"}}`:                          `attrs: value of key "n": cannot cast "many" to long`,
		`{"attrs":{"n":9223372036854775808}}`:             `attrs: value of key "n": long overflow`,
		`{"payload":{"readings":[{"v":1},{"v":"1000"}]}}`: `readings: element 1: field v: decimal(5,2) overflow`,
		`{"payload":{"readings":[{"t":true}]}}`:           `readings: element 0: field t: expected string, got boolean`,
		`{"series":{"s":[1],"t":[2,{}]}}`:                 `series: value of key "t": element 1: expected number, got object`,
		`{"series":{"s":{"a":1}}}`:                        `series: value of key "s": expected array, got object`,
		`{"blob":"not base64!"}`:                          `blob: not base64: "not base64!"`,
	} {
		m, err := New(nestedJSONConfig(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var row Row
		err = m.Map(&Record{Value: []byte(rec)}, &row)
		me, ok := errors.AsType[*MapError](err)
		if !ok || me.Reason != want || me.Column != strings.Split(want, ":")[0] {
			t.Errorf("%s: %v, want a dead letter %q", rec, err, want)
		}
		cfg := nestedJSONConfig()
		cfg.Mode = Permissive
		if m, err = New(cfg, nil); err != nil {
			t.Fatal(err)
		}
		if err := m.Map(&Record{Value: []byte(rec)}, &row); err != nil {
			t.Errorf("permissive %s: %v", rec, err)
		}
		if i := m.p.column(me.Column).dataIdx; !row.Values[i].IsNull() {
			t.Errorf("permissive %s: %s is %s, want null", rec, me.Column, leafText(t, row.Values[i]))
		}
	}
}

func TestMapJSONNestedDoesNotAllocate(t *testing.T) {
	m, err := New(nestedJSONConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Record{Value: []byte(nestedRecord)}
	var row Row
	row.Arena = new(Arena)
	allocs := testing.AllocsPerRun(200, func() {
		if row.Arena.Len() > 1<<20 {
			row.Arena.Reset()
		}
		if err := m.Map(rec, &row); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per record, want 0", allocs)
	}
}

// nestedRecord has a struct, arrays and maps (nestedJSONConfig's columns).
const nestedRecord = `{"id":"plug-7","loc":{"lat":47.37,"lon":8.54,"at":"2026-06-22T09:15:30.250Z","inner":{"floor":2}},
	"tags":["kitchen","metered","eu"],"attrs":{"fw":1042,"boots":17,"rssi":-61},
	"payload":{"readings":[{"t":"2026-06-22","v":"231.40"},{"t":"2026-06-22","v":"229.95"}]},
	"series":{"power":[1200,1180,1210],"volts":[231,230]}}`

// FuzzMapJSONNested: any record is a row or a dead letter, never a panic,
// and a row's nested values decode.
func FuzzMapJSONNested(f *testing.F) {
	m, err := New(nestedJSONConfig(), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(nestedRecord))
	f.Add([]byte(`{"series":{"a":[1,null],"b":{}},"tags":[[]],"attrs":{"\u00e9":1}}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		var row Row
		if err := m.Map(&Record{Value: value}, &row); err != nil {
			if _, ok := errors.AsType[*MapError](err); !ok {
				t.Fatalf("error %v is not a MapError", err)
			}
			return
		}
		for _, v := range row.Values[1:6] {
			leafText(t, v)
		}
	})
}

// In a Debezium change event with schemas.enable, a decimal inside a
// struct column is read at the scale its field's schema gives; one in an
// array (its schema's items, no field) at the column's scale.
func TestMapDebeziumNestedDecimals(t *testing.T) {
	m, err := New(Config{Tombstones: true, CDC: CDCDebezium, Columns: []Column{{Name: "id", Type: "long"},
		{Name: "loc", Type: "struct<price: decimal(10,2)>"}, {Name: "prices", Type: "array<decimal(10,2)>"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const decimal = `{"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "3"}`
	row := `{"type": "struct", "optional": true, "field": "%s", "fields": [{"type": "int64", "field": "id"},
		{"type": "struct", "optional": true, "field": "loc", "fields": [` + decimal + `, "field": "price"}]},
		{"type": "array", "optional": true, "field": "prices", "items": ` + decimal + `}}]}`
	event := `{"schema": {"type": "struct", "fields": [` + fmt.Sprintf(row, "before") + `, ` + fmt.Sprintf(row, "after") + `]},
		"payload": {"op": "c", "before": null, "after": {"id": 1, "loc": {"price": "MDk="}, "prices": ["BOI="]}}}`
	var r Row
	if err := m.Map(&Record{Value: []byte(event)}, &r); err != nil {
		t.Fatal(err)
	}
	// 12.345 (scale 3) is 12.35; 0x04e2 at the column's scale 12.50.
	for i, want := range []string{`0:r0d2=1235`, `0:r0d3=1250`} {
		if got := leafText(t, r.Values[i+1]); got != want {
			t.Errorf("column %s: %s, want %s", m.p.cols[i+1].Name, got, want)
		}
	}
}
