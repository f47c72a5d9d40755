package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// envelope and payload are what the table's default mapping reads.
type envelope struct {
	DeviceID   *string `json:"device_id"`
	DeviceType *string `json:"device_type"`
	IngestedAt string  `json:"ingested_at"`
	Payload    *string `json:"payload"`
}

type payload struct {
	Power       *float64 `json:"power"`
	Voltage     *float64 `json:"voltage"`
	Current     *float64 `json:"current"`
	Energy      *float64 `json:"energy"`
	State       *string  `json:"state"`
	Contact     *bool    `json:"contact"`
	Battery     *int64   `json:"battery"`
	LinkQuality *int64   `json:"linkquality"`
}

// decode is a strict reader of one record, as the ingest path must be.
func decode(value []byte) (envelope, payload, time.Time, error) {
	var e envelope
	var p payload
	if !utf8.Valid(value) { // encoding/json would quietly substitute U+FFFD
		return e, p, time.Time{}, errors.New("invalid UTF-8")
	}
	if err := json.Unmarshal(value, &e); err != nil {
		return e, p, time.Time{}, err
	}
	if e.DeviceID == nil || *e.DeviceID == "" || e.DeviceType == nil || e.Payload == nil {
		return e, p, time.Time{}, errors.New("missing field")
	}
	ts, err := time.Parse(time.RFC3339Nano, e.IngestedAt)
	if err != nil {
		return e, p, ts, err
	}
	dec := json.NewDecoder(strings.NewReader(*e.Payload))
	dec.DisallowUnknownFields()
	return e, p, ts, dec.Decode(&p)
}

func TestDeterministic(t *testing.T) {
	gen := func(seed int64) []byte {
		s := New(Config{Seed: seed, BadRatio: 0.1})
		var out []byte
		for range 5000 {
			k, v, _ := s.Next(nil)
			out = append(append(append(out, k...), v...), '\n')
		}
		return out
	}
	if a, b := gen(7), gen(7); !bytes.Equal(a, b) {
		t.Error("same seed, different output")
	}
	if a, b := gen(7), gen(8); bytes.Equal(a, b) {
		t.Error("different seeds, same output")
	}
}

func TestGoodRecordsDecodeToTheirEvent(t *testing.T) {
	s := New(Config{Seed: 1, Events: 50000})
	var last time.Time
	energy := map[string]float64{}
	dates := map[string]bool{}
	for i := range 50000 {
		k, v, ev := s.Next(nil)
		e, p, ts, err := decode(v)
		if err != nil {
			t.Fatalf("record %d %s: %v", i, v, err)
		}
		if string(k) != ev.DeviceID || *e.DeviceID != ev.DeviceID || *e.DeviceType != ev.DeviceType || !ts.Equal(ev.IngestedAt) {
			t.Fatalf("record %d: key %s, %s does not match %+v", i, k, v, ev)
		}
		if !ts.After(last) {
			t.Fatalf("record %d: ingested_at %s not after %s", i, ts, last)
		}
		last = ts
		dates[ts.Format(time.DateOnly)] = true
		if !strings.Contains(*e.Payload, `"linkquality": `) || *p.LinkQuality != int64(ev.LinkQuality) || ev.LinkQuality < 0 || ev.LinkQuality > 255 {
			t.Fatalf("record %d: bad linkquality in %s", i, *e.Payload)
		}
		switch ev.DeviceType {
		case SmartPlug:
			if *p.Power != ev.Power || *p.Voltage != ev.Voltage || *p.Current != ev.Current || *p.Energy != ev.Energy || *p.State != ev.State {
				t.Fatalf("record %d: %s does not match %+v", i, *e.Payload, ev)
			}
			if ev.Power < 0 || ev.Power > 2500 || math.Abs(ev.Voltage-230) > 6 || (ev.Power == 0) != (ev.State == "OFF") {
				t.Fatalf("record %d: unrealistic %+v", i, ev)
			}
			if ev.Energy < energy[ev.DeviceID] {
				t.Fatalf("record %d: energy of %s went down to %v", i, ev.DeviceID, ev.Energy)
			}
			energy[ev.DeviceID] = ev.Energy
		case DoorWindow:
			if *p.Contact != ev.Contact || *p.Battery != int64(ev.Battery) || ev.Battery < 0 || ev.Battery > 100 || p.Power != nil {
				t.Fatalf("record %d: %s does not match %+v", i, *e.Payload, ev)
			}
		default:
			t.Fatalf("record %d: device type %q", i, ev.DeviceType)
		}
	}
	if len(dates) < 3 {
		t.Errorf("timestamps cover %d dates, want several", len(dates))
	}
}

func TestDistribution(t *testing.T) {
	s := New(Config{Seed: 3})
	types := map[string]int{}
	devices := map[string]bool{}
	var zeros, offs int
	contact := map[string]map[bool]bool{}
	battery := map[string][]int{}
	const n = 20000
	for range n {
		_, v, ev := s.Next(nil)
		types[ev.DeviceType]++
		devices[ev.DeviceID] = true
		if ev.DeviceType == SmartPlug && ev.Power == 0 {
			zeros++
			if !bytes.Contains(v, []byte(`\"power\": 0.0, `)) || !bytes.Contains(v, []byte(`\"current\": 0.0, `)) {
				t.Fatalf("zero power written as %s", v)
			}
		}
		if ev.State == "OFF" {
			offs++
		}
		if ev.DeviceType == DoorWindow {
			if contact[ev.DeviceID] == nil {
				contact[ev.DeviceID] = map[bool]bool{}
			}
			contact[ev.DeviceID][ev.Contact] = true
			battery[ev.DeviceID] = append(battery[ev.DeviceID], ev.Battery)
		}
	}
	if len(devices) != 50 {
		t.Errorf("%d devices, want 50", len(devices))
	}
	for typ, c := range types {
		if f := float64(c) / n; f < 0.45 || f > 0.55 {
			t.Errorf("%s: %.2f of events, want about half", typ, f)
		}
	}
	// Zeros are the classic data-loss trap downstream: make sure there are plenty.
	if zeros < n/50 || zeros != offs {
		t.Errorf("%d zero-power events, %d OFF, want > %d and equal", zeros, offs, n/50)
	}
	for id, seen := range contact {
		if len(seen) != 2 {
			t.Errorf("%s: contact never toggled", id)
		}
	}
	for id, bs := range battery {
		for i := 1; i < len(bs); i++ {
			if bs[i] > bs[i-1] && bs[i] != 99 && bs[i] != 100 { // only a replaced battery goes up
				t.Errorf("%s: battery rose from %d to %d", id, bs[i-1], bs[i])
			}
		}
		if bs[len(bs)-1] >= bs[0] {
			t.Errorf("%s: battery did not drain: %d → %d", id, bs[0], bs[len(bs)-1])
		}
	}
}

func TestBadRecords(t *testing.T) {
	s := New(Config{Seed: 5, BadRatio: 0.5})
	kinds := map[string]int{}
	const n = 1000
	for i := range n {
		k, v, ev := s.Next(nil)
		_, _, _, err := decode(v)
		if ev.Bad {
			kinds[ev.BadKind]++
			if err == nil {
				t.Errorf("record %d of kind %s decodes: %s", i, ev.BadKind, v)
			}
			if ev.BadKind == BadUTF8DeviceID && utf8.Valid(k) {
				t.Errorf("record %d: key %q of a bad-UTF-8 record is valid", i, k)
			}
		} else if err != nil {
			t.Errorf("good record %d: %v: %s", i, err, v)
		}
	}
	for _, k := range BadKinds() {
		if kinds[k] == 0 {
			t.Errorf("bad kind %s never generated", k)
		}
	}
	var bad int
	for _, c := range kinds {
		bad += c
	}
	if f := float64(bad) / n; f < 0.44 || f > 0.56 {
		t.Errorf("bad ratio %.2f, want 0.5", f)
	}
}

// TestPythonFormat checks the bytes against Python's own json.dumps and
// datetime.isoformat, which the Pi stack's bridge uses.
func TestPythonFormat(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	const script = `
import sys, json, datetime
for line in sys.stdin:
    ev = json.loads(line)
    ts = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(microseconds=ev.pop("us"))
    p = ev.pop("p")
    print(json.dumps({"device_id": ev["id"], "device_type": ev["type"], "ingested_at": ts.isoformat(), "payload": json.dumps(p)}, separators=(",", ":")))
`
	s := New(Config{Seed: 9})
	var in bytes.Buffer
	var want [][]byte
	for range 5000 {
		_, v, ev := s.Next(nil)
		want = append(want, v)
		p := map[string]any{"contact": ev.Contact, "battery": ev.Battery}
		keys := []string{"contact", "battery", "linkquality"}
		if ev.DeviceType == SmartPlug {
			p = map[string]any{"power": ev.Power, "voltage": ev.Voltage, "current": ev.Current, "energy": ev.Energy, "state": ev.State}
			keys = []string{"power", "voltage", "current", "energy", "state", "linkquality"}
		}
		p["linkquality"] = ev.LinkQuality
		// Python dicts keep insertion order: write the payload keys in order.
		var pj bytes.Buffer
		pj.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				pj.WriteByte(',')
			}
			kj, _ := json.Marshal(k)
			vj, _ := json.Marshal(p[k])
			if f, ok := p[k].(float64); ok && f == math.Trunc(f) {
				vj = fmt.Appendf(nil, "%.1f", f) // keep it a float for Python
			}
			pj.Write(kj)
			pj.WriteByte(':')
			pj.Write(vj)
		}
		pj.WriteByte('}')
		fmt.Fprintf(&in, `{"id":%q,"type":%q,"us":%d,"p":%s}`+"\n", ev.DeviceID, ev.DeviceType, ev.IngestedAt.UnixMicro(), pj.Bytes())
	}
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	got := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if len(got) != len(want) {
		t.Fatalf("python printed %d lines, want %d", len(got), len(want))
	}
	var whole int
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d:\n sim    %s\n python %s", i, want[i], got[i])
		}
		if bytes.Contains(want[i], []byte(`+00:00"`)) && !bytes.Contains(want[i][:bytes.Index(want[i], []byte(`+00:00"`))], []byte(".")) {
			whole++
		}
	}
	if whole == 0 {
		t.Error("no record on a whole second: the isoformat case without a fraction went untested")
	}
	t.Logf("%d records match Python byte for byte (%d on a whole second)", len(want), whole)
}

func TestRate(t *testing.T) {
	s := New(Config{Rate: 1000})
	start := time.Now()
	for range 101 {
		s.Next(nil)
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Errorf("101 events at 1000/s took %s", d)
	}
}

func TestBufferReuse(t *testing.T) {
	s := New(Config{Seed: 2, BadRatio: 0.2})
	r := New(Config{Seed: 2, BadRatio: 0.2})
	var k []byte
	for range 1000 {
		var v []byte
		k, v, _ = s.Next(k[:0])
		k2, v2, _ := r.Next(nil)
		if !bytes.Equal(k, k2) || !bytes.Equal(v, v2) {
			t.Fatalf("reused buffer: %s %s, fresh: %s %s", k, v, k2, v2)
		}
	}
	if slices.Equal(BadKinds(), nil) || len(BadKinds()) != 13 {
		t.Errorf("BadKinds() = %v", BadKinds())
	}
}

func BenchmarkNext(b *testing.B) {
	for _, bad := range []float64{0, 0.01} {
		b.Run(fmt.Sprintf("bad=%v", bad), func(b *testing.B) {
			s := New(Config{Seed: 1, BadRatio: bad})
			var k []byte
			var size int
			b.ReportAllocs()
			for b.Loop() {
				var v []byte
				k, v, _ = s.Next(k[:0])
				size += len(k) + len(v)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(size)/float64(b.N), "B/event")
		})
	}
}

// TestClockKeepsToTheSpan: the events of a run span Config.Span, as the
// demo's wall clock does (its clock ran 14 s ahead after 30 s: a jump to
// the next whole second, to meet isoformat's case without a fraction,
// came on top of each step), and whole seconds still come up.
func TestClockKeepsToTheSpan(t *testing.T) {
	start := time.Date(2026, 6, 22, 9, 0, 0, 0, time.UTC)
	const span, events = 30 * time.Second, 30000
	s := New(Config{Seed: 5, Start: start, Span: span, Events: events})
	var last time.Time
	for range events {
		_, _, ev := s.Next(nil)
		last = ev.IngestedAt
	}
	if ahead := last.Sub(start.Add(span)); ahead > span/100 {
		t.Errorf("the last of %d events over %s is %s past the span", events, span, ahead)
	}
	whole := 0
	s = New(Config{Seed: 5})
	for range 20000 {
		if _, _, ev := s.Next(nil); ev.IngestedAt.Nanosecond() == 0 {
			whole++
		}
	}
	if whole == 0 {
		t.Error("no event on a whole second in 20,000 of the default span")
	}
}
