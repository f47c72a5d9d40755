// Package sim generates the sensor records deltaflow ingests, byte for byte in
// the format the Pi stack's MQTT→Kafka bridge writes (docs/design.md,
// "Input records"): key = device_id, value = a compact JSON envelope whose
// "payload" is a JSON-encoded string written by Python's json.dumps (", " and
// ": " separators). It feeds `deltaflow produce`, the demo, tests and
// benchmarks.
//
// [New] takes a [Config]; [Sim.Next] returns one record and the [Event] it
// encodes, so tests can compare what landed in the table with what was sent,
// keyed by (device_id, ingested_at), which is unique: the virtual clock
// strictly increases. Output is deterministic for a given Config (Rate only
// paces it). With BadRatio > 0, malformed records of every kind in
// [BadKinds] are mixed in.
package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// Device types, as written in "device_type".
const (
	SmartPlug  = "smart_plug"
	DoorWindow = "door_window"
)

// Config configures a [Sim]. Zero fields take the defaults in their comments.
type Config struct {
	// Devices is the number of devices, half smart plugs (rounded up), half
	// door sensors. Default 50.
	Devices int
	// Seed makes the output reproducible.
	Seed int64
	// Start is the first ingested_at. Default 2026-06-22T00:00:00Z.
	Start time.Time
	// Span is the time Events events cover: the virtual clock advances by
	// Span/Events on average, so a span of days yields several event_date
	// partitions. Past Events events the clock keeps going. Default 72h.
	Span time.Duration
	// Events is the number of events expected, to spread them over Span.
	// Default 100000.
	Events int
	// Rate paces Next to this many events per second of wall time (the
	// timestamps stay virtual); 0 means as fast as possible.
	Rate float64
	// BadRatio is the fraction of malformed records, in [0, 1].
	BadRatio float64
}

// Event holds the values one record carries. For a bad record the fields
// hold what the record would have said had it been good.
type Event struct {
	DeviceID    string
	DeviceType  string // SmartPlug or DoorWindow
	IngestedAt  time.Time
	LinkQuality int

	// Smart plugs only.
	Power, Voltage, Current, Energy float64
	State                           string // "ON" or "OFF"

	// Door sensors only.
	Contact bool
	Battery int

	Bad     bool
	BadKind string // one of BadKinds, when Bad
}

// Bad record kinds.
const (
	BadNotJSON        = "not_json"
	BadTruncated      = "truncated_json"
	BadEmpty          = "empty_value"
	BadArray          = "array"
	BadNoDeviceID     = "missing_device_id"
	BadTypeNull       = "device_type_null"
	BadPayloadObject  = "payload_not_string"
	BadPayloadNotJSON = "payload_not_json"
	BadNumberString   = "number_is_string" // "power": "abc" (plug), "battery": "abc" (door)
	BadLQOverflow     = "linkquality_overflow"
	BadNaN            = "nan" // "power": NaN (plug), "battery": NaN (door)
	BadTimestamp      = "bad_timestamp"
	BadUTF8DeviceID   = "invalid_utf8_device_id"
)

var badKinds = []string{
	BadNotJSON, BadTruncated, BadEmpty, BadArray, BadNoDeviceID, BadTypeNull, BadPayloadObject,
	BadPayloadNotJSON, BadNumberString, BadLQOverflow, BadNaN, BadTimestamp, BadUTF8DeviceID,
}

// BadKinds lists every kind of malformed record the simulator writes.
func BadKinds() []string { return append([]string(nil), badKinds...) }

// Sim generates records. It is not safe for concurrent use.
type Sim struct {
	cfg     Config
	rng     *rand.Rand
	devices []device
	now     time.Time     // virtual clock
	step    time.Duration // mean clock advance
	n       int64         // events generated
	began   time.Time     // wall time of the first Next, for Rate

	tsMinute int64  // the minute tsPrefix formats
	tsPrefix []byte // "2026-06-22T09:15:"
}

type device struct {
	id, typ string
	last    time.Time // last event, for energy
	lq      int

	on     bool
	load   float64 // watts drawn when on
	energy float64 // kWh, never decreases

	contact bool
	battery float64
}

// New returns a simulator for cfg.
func New(cfg Config) *Sim {
	if cfg.Devices <= 0 {
		cfg.Devices = 50
	}
	if cfg.Start.IsZero() {
		cfg.Start = time.Date(2026, 6, 22, 0, 0, 0, 0, time.UTC)
	}
	if cfg.Span <= 0 {
		cfg.Span = 72 * time.Hour
	}
	if cfg.Events <= 0 {
		cfg.Events = 100000
	}
	s := &Sim{
		cfg:  cfg,
		rng:  rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5e5_0a_de17a)),
		now:  cfg.Start.UTC().Truncate(time.Microsecond),
		step: max(cfg.Span/time.Duration(cfg.Events), time.Microsecond),
	}
	plugs := (cfg.Devices + 1) / 2
	for i := range cfg.Devices {
		d := device{lq: 60 + s.rng.IntN(196)}
		if i < plugs {
			d.id, d.typ = fmt.Sprintf("smart-plug-%02d", i+1), SmartPlug
			d.on = s.rng.IntN(3) > 0
			d.load = 2 + s.rng.Float64()*2000
			d.energy = s.rng.Float64() * 500
		} else {
			d.id, d.typ = fmt.Sprintf("door-sensor-%02d", i-plugs+1), DoorWindow
			d.contact = s.rng.IntN(2) == 0
			d.battery = 40 + s.rng.Float64()*60
		}
		s.devices = append(s.devices, d)
	}
	return s
}

// Next appends the next record's key and then its value to buf and returns
// them as sub-slices, with the event they encode. The two share memory: do
// not append to key. To reuse memory, pass the previous key[:0]; to keep
// records (e.g. while a producer holds them), pass nil or a fresh buffer.
func (s *Sim) Next(buf []byte) (key, value []byte, ev Event) {
	s.pace()
	s.n++
	// Strictly increasing: (device_id, ingested_at) identifies an event.
	next := s.now.Add(time.Microsecond * time.Duration(1+s.rng.Int64N(int64(2*s.step/time.Microsecond))))
	if whole := next.Truncate(time.Second); whole.After(s.now) && s.rng.IntN(1000) == 0 {
		// Python's isoformat() drops the fraction on a whole second; that
		// happens once in a million in life, so make it common enough to
		// meet in every test: a step that passes one stops on it (never
		// past the step, so the clock keeps to the span and the wall).
		next = whole
	}
	s.now = next
	d := &s.devices[s.rng.IntN(len(s.devices))]
	ev = s.advance(d)

	if s.cfg.BadRatio > 0 && s.rng.Float64() < s.cfg.BadRatio {
		ev.Bad, ev.BadKind = true, badKinds[s.rng.IntN(len(badKinds))]
	}
	start := len(buf)
	if ev.BadKind == BadUTF8DeviceID {
		buf = append(buf, badUTF8ID...) // the key is the broken device_id too
	} else {
		buf = append(buf, d.id...)
	}
	kend := len(buf)
	if ev.Bad {
		buf = s.appendBad(buf, &ev)
	} else {
		buf = s.appendGood(buf, &ev)
	}
	return buf[start:kend], buf[kend:], ev
}

// pace sleeps until the next event is due at cfg.Rate.
func (s *Sim) pace() {
	if s.cfg.Rate <= 0 {
		return
	}
	now := time.Now()
	if s.began.IsZero() {
		s.began = now
	}
	due := s.began.Add(time.Duration(float64(s.n) / s.cfg.Rate * float64(time.Second)))
	if wait := due.Sub(now); wait > 0 {
		time.Sleep(wait)
	}
}

// advance moves device d to the clock's time and returns its event.
func (s *Sim) advance(d *device) Event {
	r := s.rng
	dt := time.Duration(0)
	if !d.last.IsZero() {
		dt = s.now.Sub(d.last)
	}
	d.last = s.now
	d.lq = min(max(d.lq+r.IntN(21)-10, 0), 255)
	ev := Event{DeviceID: d.id, DeviceType: d.typ, IngestedAt: s.now, LinkQuality: d.lq}
	if d.typ == DoorWindow {
		if r.IntN(10) < 3 {
			d.contact = !d.contact
		}
		d.battery -= r.Float64() * 0.02
		if d.battery < 0 {
			d.battery = 100 // battery replaced
		}
		ev.Contact, ev.Battery = d.contact, int(d.battery)
		return ev
	}
	// The plug drew its previous power since its last event.
	if d.on {
		d.energy += d.load * dt.Hours() / 1000
	}
	if r.IntN(20) == 0 {
		d.on = !d.on
	}
	ev.Voltage = round(225+r.Float64()*10, 1)
	ev.Energy = round(d.energy, 2)
	ev.State = "OFF"
	if d.on {
		ev.State = "ON"
		d.load = min(max(d.load*(0.9+r.Float64()*0.2), 0.5), 2500)
		ev.Power = round(d.load, 1)
		ev.Current = round(ev.Power/ev.Voltage, 2)
	}
	return ev // off: power and current are exactly 0.0
}

func round(v float64, decimals int) float64 {
	p := math.Pow10(decimals)
	return math.Round(v*p) / p
}

// appendGood writes the envelope of ev as the bridge does.
func (s *Sim) appendGood(b []byte, ev *Event) []byte {
	b = append(b, `{"device_id":"`...)
	b = append(b, ev.DeviceID...)
	b = append(b, `","device_type":"`...)
	b = append(b, ev.DeviceType...)
	b = append(b, `","ingested_at":"`...)
	b = s.appendTime(b, ev.IngestedAt)
	b = append(b, `","payload":"`...)
	b = appendPayload(b, ev, "")
	return append(b, `"}`...)
}

// appendPayload writes the payload as json.dumps does, already escaped for
// the enclosing JSON string. override, when set, replaces the value of power
// (plug) or battery (door).
func appendPayload(b []byte, ev *Event, override string) []byte {
	if ev.DeviceType == DoorWindow {
		b = append(b, `{\"contact\": `...)
		b = strconv.AppendBool(b, ev.Contact)
		b = append(b, `, \"battery\": `...)
		if override != "" {
			b = append(b, override...)
		} else {
			b = strconv.AppendInt(b, int64(ev.Battery), 10)
		}
	} else {
		b = append(b, `{\"power\": `...)
		if override != "" {
			b = append(b, override...)
		} else {
			b = appendPyFloat(b, ev.Power)
		}
		b = append(b, `, \"voltage\": `...)
		b = appendPyFloat(b, ev.Voltage)
		b = append(b, `, \"current\": `...)
		b = appendPyFloat(b, ev.Current)
		b = append(b, `, \"energy\": `...)
		b = appendPyFloat(b, ev.Energy)
		b = append(b, `, \"state\": \"`...)
		b = append(b, ev.State...)
		b = append(b, `\"`...)
	}
	b = append(b, `, \"linkquality\": `...)
	b = strconv.AppendInt(b, int64(ev.LinkQuality), 10)
	return append(b, '}')
}

// appendPyFloat writes v as Python's repr does for our ranges: shortest
// round-trip digits, always with a fraction ("0.0", "230.0").
func appendPyFloat(b []byte, v float64) []byte {
	start := len(b)
	b = strconv.AppendFloat(b, v, 'f', -1, 64)
	for _, c := range b[start:] {
		if c == '.' {
			return b
		}
	}
	return append(b, ".0"...)
}

// appendTime writes t as Python's datetime.isoformat() does for a UTC time:
// microseconds, omitted when zero, and "+00:00". Formatting the date and
// hour:minute once a minute halves the cost of Next.
func (s *Sim) appendTime(b []byte, t time.Time) []byte {
	if m := t.Unix() / 60; m != s.tsMinute || s.tsPrefix == nil {
		s.tsMinute = m
		s.tsPrefix = t.Truncate(time.Minute).AppendFormat(s.tsPrefix[:0], "2006-01-02T15:04:")
	}
	b = append(b, s.tsPrefix...)
	sec := t.Unix() % 60
	b = append(b, byte('0'+sec/10), byte('0'+sec%10))
	if us := t.Nanosecond() / 1000; us != 0 {
		b = append(b, '.')
		for d := 100000; d > 0; d /= 10 {
			b = append(b, byte('0'+us/d%10))
		}
	}
	return append(b, "+00:00"...)
}

// badUTF8ID is the device_id (and key) of BadUTF8DeviceID records.
const badUTF8ID = "door-\xff\xfe-sensor"

// bad describes how a malformed envelope deviates from a good one.
type bad struct {
	id       string // device_id; "" omits the field
	rawType  string // device_type as raw JSON
	rawTime  string // ingested_at, used when set
	rawLoad  string // payload as raw JSON instead of the encoded string
	override string // replaces the payload's power (plug) or battery (door) value
}

// appendBad writes a malformed record of kind ev.BadKind.
func (s *Sim) appendBad(b []byte, ev *Event) []byte {
	e := bad{id: ev.DeviceID, rawType: `"` + ev.DeviceType + `"`}
	switch ev.BadKind {
	case BadNotJSON:
		return append(b, "device="+ev.DeviceID+" power=on"...)
	case BadTruncated:
		start := len(b)
		b = s.appendGood(b, ev)
		return b[:start+1+s.rng.IntN(len(b)-start-2)]
	case BadEmpty:
		return b
	case BadArray:
		b = append(b, '[')
		b = s.appendGood(b, ev)
		return append(b, ']')
	case BadNoDeviceID:
		e.id = ""
	case BadTypeNull:
		e.rawType = "null"
	case BadPayloadObject:
		e.rawLoad = `{"linkquality":` + strconv.Itoa(ev.LinkQuality) + `}`
	case BadPayloadNotJSON:
		e.rawLoad = `"power=84.3 state=ON"`
	case BadNumberString:
		e.override = `\"abc\"`
	case BadNaN:
		e.override = "NaN" // what json.dumps writes for float("nan")
	case BadLQOverflow:
		b = e.append(s, b, ev)
		// Replace the linkquality digits at the end of the payload.
		i := len(b) - len(`}"}`)
		for b[i-1] >= '0' && b[i-1] <= '9' {
			i--
		}
		return append(b[:i], `99999999999999999999}"}`...)
	case BadTimestamp:
		e.rawTime = []string{"yesterday", "2026-13-45T25:61:00+00:00", "", "1750583730"}[s.rng.IntN(4)]
	case BadUTF8DeviceID:
		e.id = badUTF8ID
	default:
		panic("sim: unknown bad kind " + ev.BadKind)
	}
	return e.append(s, b, ev)
}

func (e bad) append(s *Sim, b []byte, ev *Event) []byte {
	b = append(b, '{')
	if e.id != "" {
		b = append(b, `"device_id":"`...)
		b = append(b, e.id...)
		b = append(b, `",`...)
	}
	b = append(b, `"device_type":`...)
	b = append(b, e.rawType...)
	b = append(b, `,"ingested_at":"`...)
	if e.rawTime != "" || ev.BadKind == BadTimestamp {
		b = append(b, e.rawTime...)
	} else {
		b = s.appendTime(b, ev.IngestedAt)
	}
	b = append(b, `","payload":`...)
	if e.rawLoad != "" {
		b = append(b, e.rawLoad...)
		return append(b, '}')
	}
	b = append(b, '"')
	b = appendPayload(b, ev, e.override)
	return append(b, `"}`...)
}

// AvroSchema is the sensor event as an Avro producer writes it: its
// payload a nested record rather than a JSON string (for the Avro tests
// and `deltaflow bench --format avro`).
const AvroSchema = `{"type": "record", "name": "SensorEvent", "fields": [
	{"name": "device_id", "type": "string"},
	{"name": "device_type", "type": "string"},
	{"name": "ingested_at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
	{"name": "payload", "type": {"type": "record", "name": "Payload", "fields": [
		{"name": "linkquality", "type": ["null", "int"], "default": null},
		{"name": "contact", "type": ["null", "boolean"], "default": null},
		{"name": "battery", "type": ["null", "int"], "default": null},
		{"name": "power", "type": ["null", "double"], "default": null},
		{"name": "voltage", "type": ["null", "double"], "default": null},
		{"name": "current", "type": ["null", "double"], "default": null},
		{"name": "energy", "type": ["null", "double"], "default": null},
		{"name": "state", "type": ["null", "string"], "default": null}
	]}}
]}`
