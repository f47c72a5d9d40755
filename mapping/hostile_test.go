package mapping

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta"
)

// envelope builds a record around a payload object given as JSON text.
func envelope(deviceType, ingestedAt, payload string) string {
	return `{"device_id":"d1","device_type":` + jsonQuote(deviceType) + `,"ingested_at":` + jsonQuote(ingestedAt) +
		`,"payload":` + jsonQuote(payload) + `}`
}

// jsonQuote quotes s as a JSON string, leaving non-ASCII bytes (valid or
// not) raw, unlike encoding/json.
func jsonQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func plug(payload string) string { return envelope("smart_plug", "2026-06-22T09:15:30Z", payload) }

func TestHostileInput(t *testing.T) {
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	deepObj := `{"device_id":` + strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000) + "}"
	deepPayload := plug(strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000))
	huge := `{"device_id":"` + strings.Repeat("x", 10<<20) + `"}`
	for _, tc := range []struct {
		name  string
		value *string // nil: tombstone
		// want is the strict-mode reason ("" = maps), permissive the
		// permissive one ("=" = same as strict, "" = maps).
		want, permissive string
	}{
		{"not JSON", ptr("hello"), "not JSON", "="},
		{"truncated", ptr(plugSample[:len(plugSample)-10]), "not JSON", "="},
		{"empty", ptr(""), "empty value", "="},
		{"whitespace", ptr("  \n"), "not JSON", "="},
		{"tombstone", nil, "null value (tombstone)", "="},
		{"array", ptr(`[{"device_id":"a"}]`), "not a JSON object", "="},
		{"number", ptr(`42`), "not a JSON object", "="},
		{"string", ptr(`"{}"`), "not a JSON object", "="},
		{"trailing garbage", ptr(`{"device_id":"a"} x`), "not JSON", "="},
		{"missing device_id", ptr(`{"device_type":"smart_plug","ingested_at":"2026-06-22T09:15:30Z"}`), "missing required field device_id", "="},
		{"device_id null", ptr(`{"device_id":null,"device_type":"smart_plug","ingested_at":"2026-06-22T09:15:30Z"}`), "missing required field device_id", "="},
		{"device_type null", ptr(`{"device_id":"a","device_type":null,"ingested_at":"2026-06-22T09:15:30Z"}`), "missing required field device_type", "="},
		{"device_type number", ptr(`{"device_id":"a","device_type":7,"ingested_at":"2026-06-22T09:15:30Z"}`), "device_type: expected string, got number", "="}, // required: no null fallback
		{"device_id object", ptr(`{"device_id":{},"device_type":"x","ingested_at":"2026-06-22T09:15:30Z"}`), "device_id: expected string, got object", "="},
		{"missing ingested_at", ptr(`{"device_id":"a","device_type":"x"}`), "missing required field event_time", "="},
		{"payload missing", ptr(`{"device_id":"a","device_type":"x","ingested_at":"2026-06-22T09:15:30Z"}`), "", ""},
		{"payload null", ptr(`{"device_id":"a","device_type":"x","ingested_at":"2026-06-22T09:15:30Z","payload":null}`), "", ""},
		{"payload number", ptr(`{"device_id":"a","device_type":"x","ingested_at":"2026-06-22T09:15:30Z","payload":12}`), "payload: not a JSON string", ""},
		{"payload array", ptr(`{"device_id":"a","device_type":"x","ingested_at":"2026-06-22T09:15:30Z","payload":[1]}`), "payload: not a JSON string", ""},
		{"payload object", ptr(`{"device_id":"a","device_type":"x","ingested_at":"2026-06-22T09:15:30Z","payload":{"power":1}}`), "raw_payload: expected string, got object", ""},
		{"payload not JSON", ptr(plug(`power=1`)), "payload: not JSON", ""},
		{"payload truncated", ptr(plug(`{"power":1`)), "payload: not JSON", ""},
		{"payload JSON array", ptr(plug(`[1,2]`)), "payload: not a JSON object", ""},
		{"payload too deep", ptr(deepPayload), "payload: nesting too deep", ""},
		{"power string", ptr(plug(`{"power":"abc"}`)), `power: cannot cast "abc" to double`, ""},
		{"power bool", ptr(plug(`{"power":true}`)), `power: expected number, got boolean`, ""},
		{"power array", ptr(plug(`{"power":[1]}`)), `power: expected number, got array`, ""},
		{"contact number", ptr(plug(`{"contact":1}`)), `contact: expected boolean, got number`, ""},
		{"contact string", ptr(plug(`{"contact":"true"}`)), `contact: cannot cast "true" to boolean`, ""},
		{"battery string", ptr(plug(`{"battery":"97"}`)), `battery: cannot cast "97" to integer`, ""},
		{"battery fraction", ptr(plug(`{"battery":248.5}`)), `battery: cannot cast "248.5" to integer`, ""},
		{"battery 248.0", ptr(plug(`{"battery":248.0}`)), "", ""},
		{"battery 2.48e2", ptr(plug(`{"battery":2.48e2}`)), "", ""},
		{"linkquality overflow", ptr(plug(`{"linkquality":2147483648}`)), "linkquality: integer overflow", ""},
		{"linkquality underflow", ptr(plug(`{"linkquality":-2147483649}`)), "linkquality: integer overflow", ""},
		{"linkquality huge", ptr(plug(`{"linkquality":99999999999999999999999}`)), "linkquality: integer overflow", ""},
		{"linkquality exp overflow", ptr(plug(`{"linkquality":1e10}`)), "linkquality: integer overflow", ""},
		{"linkquality 1e400", ptr(plug(`{"linkquality":1e400}`)), "linkquality: integer overflow", ""},
		{"linkquality min", ptr(plug(`{"linkquality":-2147483648}`)), "", ""},
		{"linkquality bad number", ptr(plug(`{"linkquality":1-2}`)), `linkquality: cannot cast "1-2" to integer`, ""},
		{"battery NaN", ptr(plug(`{"battery":NaN}`)), "battery: not a finite number", ""},
		{"power NaN", ptr(plug(`{"power":NaN}`)), "power: not a finite number", ""},
		{"power Infinity", ptr(plug(`{"power":Infinity}`)), "payload: not JSON", ""}, // fastjson reads only "inf"
		{"power inf", ptr(plug(`{"power":inf}`)), "power: not a finite number", ""},
		{"power -inf", ptr(plug(`{"power":-inf}`)), "power: not a finite number", ""},
		{"power 1e400", ptr(plug(`{"power":1e400}`)), "power: not a finite number", ""},
		{"power NaN outer", ptr(`{"device_id":"a","device_type":"x","ingested_at":"2026-06-22T09:15:30Z","x":nan}`), "", ""},
		{"10 MB value", &huge, "value too large (10485776 bytes > 1048576)", "="},
		{"invalid UTF-8 device_type", ptr("{\"device_id\":\"a\",\"device_type\":\"x\xff\",\"ingested_at\":\"2026-06-22T09:15:30Z\"}"), "device_type: invalid UTF-8", "="},
		{"invalid UTF-8 payload string", ptr(plug("{\"state\":\"O\xc3\"}")), "plug_state: invalid UTF-8", "="},
		{"lone surrogate escape", ptr(plug(`{"state":"\ud800"}`)), "", ""}, // fastjson keeps the escape text: valid UTF-8
		{"NUL bytes", ptr(`{"device_id":"a\u0000b","device_type":"x\u0000","ingested_at":"2026-06-22T09:15:30Z"}`), "", ""},
		{"timestamp unparsable", ptr(envelope("x", "yesterday", "{}")), `event_time: unparsable timestamp "yesterday"`, "="},
		{"timestamp number", ptr(`{"device_id":"a","device_type":"x","ingested_at":1750000000}`), "event_time: expected string, got number", "="},
		{"timestamp year 0", ptr(envelope("x", "0000-12-31T00:00:00Z", "{}")), "event_time: timestamp out of range (years 0001-9999)", "="},
		{"timestamp year 1", ptr(envelope("x", "0001-01-01T00:00:00Z", "{}")), "", ""},
		{"timestamp year 9999", ptr(envelope("x", "9999-12-31T23:59:59.999999999Z", "{}")), "", ""},
		{"timestamp past 9999 via offset", ptr(envelope("x", "9999-12-31T23:59:59-01:00", "{}")), "event_time: timestamp out of range (years 0001-9999)", "="},
		{"timestamp Feb 30", ptr(envelope("x", "2026-02-30T00:00:00Z", "{}")), `event_time: unparsable timestamp "2026-02-30T00:00:00Z"`, "="},
		{"deep array", &deep, "nesting too deep", "="},
		{"deep object", &deepObj, "nesting too deep", "="},
		{"duplicate keys", ptr(`{"device_id":"first","device_id":"second","device_type":"x","ingested_at":"2026-06-22T09:15:30Z"}`), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []Mode{Strict, Permissive} {
				want := tc.want
				if mode == Permissive && tc.permissive != "=" {
					want = tc.permissive
				}
				m := newDefault(t, mode)
				r := rec("")
				if tc.value == nil {
					r.Value = nil
				} else {
					r.Value = []byte(*tc.value)
				}
				var row Row
				err := m.Map(r, &row)
				if want == "" {
					if err != nil {
						t.Errorf("%s: %v", mode, err)
					} else {
						decoded(t, m, &row) // levels and indexes are sane
					}
					continue
				}
				var me *MapError
				if !errors.As(err, &me) {
					t.Fatalf("%s: err = %v, want MapError %q", mode, err, want)
				}
				if me.Reason != want {
					t.Errorf("%s: reason %q, want %q", mode, me.Reason, want)
				}
			}
		})
	}
}

func ptr(s string) *string { return &s }

// Permissive mode stores null where strict mode refuses the record.
func TestPermissiveNulls(t *testing.T) {
	m := newDefault(t, Permissive)
	_, got := mustMap(t, m, rec(plug(`{"power":"abc","battery":1.5,"linkquality":1e10,"contact":1,"voltage":NaN,"current":2,"state":5}`)))
	checkRow(t, got, map[string]any{"power": nil, "battery": nil, "linkquality": nil, "contact": nil, "voltage": nil,
		"current": 2.0, "plug_state": nil, "device_id": "d1"})
	_, got = mustMap(t, m, rec(plug(`not json`)))
	checkRow(t, got, map[string]any{"power": nil, "raw_payload": "not json", "device_id": "d1"})
}

func TestEdgeValues(t *testing.T) {
	m := newDefault(t, Strict)
	_, got := mustMap(t, m, rec(plug(`{"battery":248.0,"linkquality":-0,"power":-1.5e-3,"state":"a\u0000b\n\"c"}`)))
	checkRow(t, got, map[string]any{"battery": int32(248), "linkquality": int32(0), "power": -0.0015, "plug_state": "a\x00b\n\"c"})

	// Duplicate keys: the first occurrence wins, also when a later one is
	// written with escapes (fastjson's Get would pick by raw text first).
	_, got = mustMap(t, m, rec(`{"device\u005fid":"escaped-first","device_id":"plain-second","device_type":"x","ingested_at":"2026-06-22T09:15:30Z"}`))
	if got["device_id"] != "escaped-first" {
		t.Errorf("duplicate keys: got %v", got["device_id"])
	}
	_, got = mustMap(t, m, rec(`{"device_id":"first","device_id":null,"device_type":"x","ingested_at":"2026-06-22T09:15:30Z"}`))
	if got["device_id"] != "first" {
		t.Errorf("duplicate keys: got %v", got["device_id"])
	}

	for _, tc := range []struct{ in, want, date string }{
		{"0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "0001-01-01"},
		{"9999-12-31T23:59:59.999999999Z", "9999-12-31T23:59:59.999999Z", "9999-12-31"},
		{"2026-06-22T09:15:30", "2026-06-22T09:15:30Z", "2026-06-22"},                 // zoneless = UTC
		{"2026-06-22 09:15:30.5", "2026-06-22T09:15:30.5Z", "2026-06-22"},             // space, zoneless
		{"2026-06-22T01:15:30+02:00", "2026-06-21T23:15:30Z", "2026-06-21"},           // offset: UTC date
		{"2026-06-22T23:15:30.1-02:00", "2026-06-23T01:15:30.1Z", "2026-06-23"},       // offset the other way
		{"2026-06-22T09:15:30,25Z", "2026-06-22T09:15:30.25Z", "2026-06-22"},          // comma, via time.Parse
		{"2026-06-22", "2026-06-22T00:00:00Z", "2026-06-22"},                          // bare date
		{"1969-12-31T23:59:59.9999995Z", "1969-12-31T23:59:59.999999Z", "1969-12-31"}, // truncation before epoch
	} {
		_, got := mustMap(t, m, rec(envelope("x", tc.in, "{}")))
		if g := got["event_time"].(time.Time).Format(time.RFC3339Nano); g != tc.want {
			t.Errorf("%s: event_time %s, want %s", tc.in, g, tc.want)
		}
		var row Row
		_ = m.Map(rec(envelope("x", tc.in, "{}")), &row)
		if d := *row.PartitionValues[1]; d != tc.date {
			t.Errorf("%s: event_date %s, want %s", tc.in, d, tc.date)
		}
	}
}

// Hostile device types map fine; the routing key is delta.PartitionDir:
// one escaped path segment per partition column.
func TestHostilePartitionValues(t *testing.T) {
	m := newDefault(t, Strict)
	for _, dt := range []string{"../../etc", "a/b", "x=y", "%2F", "line\nbreak", "🔌 plug", "..", ".", " ", "a\\b", "\x00", "#{}[]"} {
		var row Row
		if err := m.Map(rec(envelope(dt, "2026-06-22T09:15:30Z", "{}")), &row); err != nil {
			t.Errorf("%q: %v", dt, err)
			continue
		}
		if got := *row.PartitionValues[0]; got != dt {
			t.Errorf("partition value %q, want %q", got, dt)
		}
		want := delta.PartitionDir(m.PartitionColumns(), m.PartitionMap(&row))
		if string(row.Key) != want {
			t.Errorf("%q: key %q, want %q", dt, row.Key, want)
		}
		segs := strings.Split(string(row.Key), "/")
		if len(segs) != 2 || !strings.HasPrefix(segs[0], "device_type=") || segs[1] != "event_date=2026-06-22" {
			t.Errorf("%q: key %q is not one segment per column", dt, row.Key)
		}
		if strings.ContainsAny(segs[0], "\n\x00") {
			t.Errorf("%q: control characters left in %q", dt, segs[0])
		}
	}
}

// TestPartitionPathLimits: with PathLimits, a partition value whose
// escaped directory name passes the segment limit, or whose directory
// ("device_type=<v>/event_date=2026-06-22", 34 bytes more than v) passes
// the directory limit, rejects the record naming the column and the
// lengths; within them, mapping is unchanged and allocates nothing.
func TestPartitionPathLimits(t *testing.T) {
	m := newDefault(t, Strict).WithPathLimits(PathLimits{Segment: 255, Dir: 270})
	for _, c := range []struct {
		deviceType string
		want       string // "" maps
	}{
		{strings.Repeat("x", 236), ""},
		{strings.Repeat("x", 237), "device_type: partition directory of 271 bytes (escaped; its longest part 249) is longer than the 270 bytes the store's keys leave for it"},
		{strings.Repeat("x", 244), "device_type: partition directory name of 256 bytes (escaped) is longer than the 255 bytes a store takes"},
		{strings.Repeat("/", 90), "device_type: partition directory name of 282 bytes (escaped)"},
		{strings.Repeat("é", 122), "device_type: partition directory name of 256 bytes (escaped)"},
	} {
		var row Row
		err := m.Map(rec(envelope(c.deviceType, "2026-06-22T09:15:30Z", "{}")), &row)
		var me *MapError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%d bytes: %v", len(c.deviceType), err)
		case c.want != "" && (!errors.As(err, &me) || !strings.Contains(me.Reason, c.want) || me.Column != "device_type"):
			t.Errorf("%d bytes: error %v; want %q on column device_type", len(c.deviceType), err, c.want)
		}
	}
	if allocs := mapAllocs(t, m); allocs != 0 {
		t.Errorf("Map with path limits allocates %.1f times per record", allocs)
	}
}
