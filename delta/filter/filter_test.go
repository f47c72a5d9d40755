package filter

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta"
)

var schema = &delta.StructType{Fields: []delta.StructField{
	{Name: "id", Type: delta.Long, Nullable: true},
	{Name: "name", Type: delta.String, Nullable: true},
	{Name: "ts", Type: delta.Timestamp, Nullable: true},
	{Name: "day", Type: delta.Date, Nullable: true},
	{Name: "ok", Type: delta.Boolean, Nullable: true},
	{Name: "f", Type: delta.Float, Nullable: true},
	{Name: "amount", Type: delta.DecimalType{Precision: 10, Scale: 2}, Nullable: true},
	{Name: "n", Type: delta.Integer, Nullable: true},
}}

var parts = []string{"day"}

func bind(t *testing.T, src string) *Bound {
	t.Helper()
	e, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	b, err := Bind(e, schema, parts)
	if err != nil {
		t.Fatalf("Bind(%q): %v", src, err)
	}
	return b
}

func TestParseRoundTrip(t *testing.T) {
	for src, want := range map[string]string{
		"id = 1":                            "id = 1",
		"id==1 and name <> 'x''y'":          "id = 1 AND name != 'x''y'",
		"  `and` >= -1.5e3 AND ok = TRUE  ": "`and` >= -1.5e3 AND ok = true",
		"name = NULL And name != null":      "name = null AND name != null",
		"a<1 AND b<=2 AND c>3 AND d>=4":     "a < 1 AND b <= 2 AND c > 3 AND d >= 4",
	} {
		e, err := Parse(src)
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		if got := e.String(); got != want {
			t.Errorf("Parse(%q) = %q, want %q", src, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for src, want := range map[string]string{
		"":                       "position 1 (end of input): empty filter",
		"id":                     "position 3 (end of input): expected a comparison operator",
		"id = ":                  "position 6 (end of input): expected a literal",
		"id = 1 or id = 2":       `position 8, "or": expected AND`,
		"id = 1 AND":             "position 11 (end of input): expected a column after AND",
		"id ~ 1":                 `position 4, "~": unexpected character`,
		"id ! 1":                 `position 4, "!": unknown operator`,
		"name = 'abc":            `position 8, "'abc": unterminated string`,
		"name = abc":             `position 8, "abc": expected a literal; quote strings`,
		"id < null":              `position 4, "<": null can only be compared with = or !=`,
		"1 = id":                 `position 1, "1": expected a column name`,
		"and = 1":                `position 1, "and": expected a column name, not a keyword`,
		"id = 1.2.3":             `position 6, "1.2.3": malformed number`,
		"é = 1":                  `position 1, "é": unexpected character`,
		"name = 'é' AND x ~ 1":   `position 18, "~"`,
		"`unterminated = 1":      "unterminated `quoted column`",
		"id = 1 AND name = 'x'x": `position 22, "x": expected AND`,
	} {
		_, err := Parse(src)
		var se *SyntaxError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want a SyntaxError containing %q", src, err, want)
		}
	}
}

func TestBindErrors(t *testing.T) {
	for src, want := range map[string]string{
		"nope = 1":                `position 1, nope = 1: no column "nope" (columns: id, name`,
		"id = 'x'":                "column id is long: want an integer, got 'x'",
		"id = 1.5":                "want an integer",
		"n = 3000000000":          "fits 32 bits",
		"name = 1":                "want a 'quoted string'",
		"ts > 'yesterday'":        "want a timestamp",
		"day = '2024-13-01'":      "want a date 'YYYY-MM-DD'",
		"ok = 1":                  "want true or false",
		"id = 1 AND amount = 'x'": "position 12, amount = 'x': column amount is decimal(10,2): want a number",
	} {
		e, err := Parse(src)
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		_, err = Bind(e, schema, parts)
		var be *BindError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), want) {
			t.Errorf("Bind(%q) = %v, want a BindError containing %q", src, err, want)
		}
	}
	if err := bind(t, "day = '2024-01-01' AND id = 1").OnlyPartitionColumns(); err == nil || !strings.Contains(err.Error(), "id is not a partition column") {
		t.Errorf("OnlyPartitionColumns: %v", err)
	}
	if err := bind(t, "day = '2024-01-01'").OnlyPartitionColumns(); err != nil {
		t.Errorf("OnlyPartitionColumns: %v", err)
	}
}

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestMatch(t *testing.T) {
	day := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	row := delta.Row{int64(7), "beta", ts("2024-06-01T12:00:00.123456Z"), day, true, float32(0.1), "12.30", int32(-3)}
	nulls := make(delta.Row, len(row))
	for src, want := range map[string]bool{
		"id = 7": true, "id != 7": false, "id < 8": true, "id <= 7": true, "id > 7": false, "id >= 7": true,
		"name = 'beta'": true, "name > 'alpha'": true, "name < 'b'": false,
		"ts > '2024-06-01T12:00:00.123455Z'": true, "ts = '2024-06-01 12:00:00.123456'": true,
		"ts >= '2024-06-01T14:00:00+02:00'": true, "ts < '2024-06-01'": false,
		"day = '2024-06-01'": true, "ok = true": true, "ok != true": false, "f = 0.1": true,
		"amount = 12.3": true, "amount > 9.99": true, "amount < 12.31": true, "n = -3": true,
		"name = null": false, "name != null": true, "id = 7 AND name = 'beta'": true, "id = 7 AND name = 'x'": false,
	} {
		if got := bind(t, src).Match(row); got != want {
			t.Errorf("%s on row: %v, want %v", src, got, want)
		}
		// Every comparison with null is false, except the null tests.
		wantNull := strings.Contains(src, "= null") && !strings.Contains(src, "!=")
		if got := bind(t, src).Match(nulls); got != wantNull {
			t.Errorf("%s on nulls: %v, want %v", src, got, wantNull)
		}
	}
}

func TestMatchPartition(t *testing.T) {
	d := "2024-06-01"
	b := bind(t, "day >= '2024-06-01' AND id = 3")
	if ok, err := b.MatchPartition(map[string]*string{"day": &d}); !ok || err != nil {
		t.Errorf("match: %v %v", ok, err)
	}
	old := "2024-05-31"
	if ok, _ := b.MatchPartition(map[string]*string{"day": &old}); ok {
		t.Error("older day matched")
	}
	if ok, _ := b.MatchPartition(map[string]*string{"day": nil}); ok {
		t.Error("null day matched day >= ...")
	}
	if ok, _ := bind(t, "day = null").MatchPartition(map[string]*string{"day": nil}); !ok {
		t.Error("null day did not match day = null")
	}
	bad := "junk"
	if _, err := b.MatchPartition(map[string]*string{"day": &bad}); err == nil || !strings.Contains(err.Error(), "day") {
		t.Errorf("bad partition value: %v", err)
	}
}

func TestMayMatch(t *testing.T) {
	stats := func(s string) *delta.Stats {
		st, err := delta.ParseStats(s)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	long := strings.Repeat("m", 32)
	st := stats(`{"numRecords":10,"minValues":{"id":5,"name":"b","ts":"2024-06-01T12:00:00.123Z","amount":1.50},` +
		`"maxValues":{"id":9,"name":"` + long + `","ts":"2024-06-01T12:00:00.500Z","amount":2.00},` +
		`"nullCount":{"id":0,"name":2,"ts":0,"ok":10}}`)
	for src, want := range map[string]bool{
		"id = 4": false, "id = 5": true, "id = 9": true, "id = 10": false,
		"id < 5": false, "id <= 5": true, "id > 9": false, "id >= 9": true, "id != 5": true,
		"id = null": false, "id != null": true, "name = null": true,
		// ok is all null: only = null can match.
		"ok = true": false, "ok != null": false, "ok = null": true,
		"name < 'b'": false, "name = 'a'": false,
		// The max string may be truncated: nothing above it can be ruled out.
		"name > 'zzz'": true,
		// Timestamps are floored to ms: the max is widened by 1 ms.
		"ts > '2024-06-01T12:00:00.500999Z'": true, "ts >= '2024-06-01T12:00:00.502Z'": false,
		"ts < '2024-06-01T12:00:00.123Z'": false, "ts <= '2024-06-01T12:00:00.123Z'": true,
		"amount > 2": false, "amount = 1.5": true, "amount < 1.5": false,
		// day is a partition column; stats do not decide it.
		"day = '1999-01-01'": true,
		// n has no stats.
		"n = 1": true,
	} {
		if got := bind(t, src).MayMatch(st); got != want {
			t.Errorf("MayMatch(%s) = %v, want %v", src, got, want)
		}
	}
	if !bind(t, "id = 1").MayMatch(nil) || !bind(t, "id = 1").MayMatch(stats(`{}`)) {
		t.Error("missing stats skipped a file")
	}
	if bind(t, "id = null").MayMatch(stats(`{"numRecords":0,"nullCount":{"id":0}}`)) {
		t.Error("empty file may match")
	}
}

// FuzzParse checks that Parse never panics, that errors carry a position
// inside the input, and that what parses prints back to the same filter.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"id = 1", "a != 'x''y' AND b <= -1.5e-3", "`c d` = null", "x >= true and Y < 'é'", "id = 1.2.", "'", "`"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Pos < 1 || se.Pos > len([]rune(src))+1 {
				t.Fatalf("Parse(%q): %v (pos out of range)", src, err)
			}
			return
		}
		again, err := Parse(e.String())
		if err != nil || again.String() != e.String() {
			t.Fatalf("round trip %q -> %q -> %v, %v", src, e.String(), again, err)
		}
		if b, err := Bind(e, schema, parts); err == nil {
			b.Match(make(delta.Row, len(schema.Fields)))
		}
	})
}

// A decimal partition column prunes by value; a partition value that is
// no number is an error, not a silent miss.
func TestMatchDecimalPartition(t *testing.T) {
	e, err := Parse("amount >= -0.5 AND amount < 0.01")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Bind(e, schema, []string{"amount"})
	if err != nil {
		t.Fatal(err)
	}
	for value, want := range map[string]bool{"-0.50": true, "0.00": true, "-0.01": true,
		"-0.51": false, "0.01": false, "12.50": false} {
		if ok, err := b.MatchPartition(map[string]*string{"amount": &value}); ok != want || err != nil {
			t.Errorf("amount=%s: %v, %v; want %v", value, ok, err, want)
		}
	}
	for _, bad := range []string{"12,50", "1/2", "x"} {
		if _, err := b.MatchPartition(map[string]*string{"amount": &bad}); err == nil || !strings.Contains(err.Error(), "bad decimal partition value") {
			t.Errorf("amount=%s: %v, want an error", bad, err)
		}
	}
}
