package mapping

import (
	"math"
	"time"
	"unsafe"
)

// Timestamps are int64 microseconds since the Unix epoch, UTC, within the
// range Spark and Delta support: years 0001 to 9999.
const (
	minMicros = -62135596800 * 1e6        // 0001-01-01T00:00:00Z
	maxMicros = 253402300799*1e6 + 999999 // 9999-12-31T23:59:59.999999Z
	microsDay = 86400 * 1e6               // one day
	unixToCE  = 719468                    // days from 0000-03-01 to 1970-01-01
)

// fallbackLayouts are tried, in order, when the fast parser declines: the
// forms time.Parse knows beyond strict RFC 3339 (space separator, missing
// zone, comma decimal separator, unpadded fields, >9 fraction digits, a bare
// date). A missing zone means UTC.
var fallbackLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	time.DateOnly,
}

// parseTimestamp parses an RFC 3339 timestamp into µs since the epoch (UTC);
// digits beyond microseconds are truncated, as Spark does. A zoneless value
// is read as UTC. Years 0000–9999 parse; callers check inRange.
func parseTimestamp(b []byte) (micros int64, ok bool) {
	if micros, ok = parseRFC3339(b); ok {
		return micros, true
	}
	if len(b) == 10 && b[4] == '-' && b[7] == '-' { // a bare date, midnight UTC: time.Parse's error would allocate per failed layout
		year, ok1 := digits4(b[0:4])
		month, ok2 := digits2(b[5:7])
		day, ok3 := digits2(b[8:10])
		if ok1 && ok2 && ok3 && month >= 1 && month <= 12 && day >= 1 && day <= daysIn(month, year) {
			return daysFromCivil(year, month, day) * microsDay, true
		}
	}
	s := unsafe.String(unsafe.SliceData(b), len(b)) // time.Parse does not retain it
	for _, layout := range fallbackLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMicro(), true // 4-digit years: no overflow
		}
	}
	return 0, false
}

// inRange reports whether µs lie in years 0001–9999, the range of Spark's
// timestamps (and of 4-digit date partition values).
func inRange(micros int64) bool { return micros >= minMicros && micros <= maxMicros }

// parseRFC3339 is the hand-rolled fast path (time.Parse costs ~10% of the
// decode time): YYYY-MM-DD('T'|' ')hh:mm:ss[.f{1,9}][Z|±hh:mm]. It declines
// (ok=false) anything else, leaving odd forms to time.Parse. Field ranges
// are those of time.Parse, so both agree whenever this one accepts.
func parseRFC3339(b []byte) (micros int64, ok bool) {
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || (b[10] != 'T' && b[10] != ' ') || b[13] != ':' || b[16] != ':' {
		return 0, false
	}
	year, ok1 := digits4(b[0:4])
	month, ok2 := digits2(b[5:7])
	day, ok3 := digits2(b[8:10])
	hour, ok4 := digits2(b[11:13])
	minute, ok5 := digits2(b[14:16])
	sec, ok6 := digits2(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	rest := b[19:]
	var frac int64
	if len(rest) > 0 && rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			frac = frac*10 + int64(rest[n]-'0')
			n++
		}
		if n == 1 || n > 10 { // no digit, or more than nanoseconds
			return 0, false
		}
		for i := n; i < 10; i++ {
			frac *= 10
		}
		rest = rest[n:]
	}
	var offset int64 // seconds east of UTC
	switch {
	case len(rest) == 0: // zoneless: UTC
	case len(rest) == 1 && rest[0] == 'Z':
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, okh := digits2(rest[1:3])
		om, okm := digits2(rest[4:6])
		if !okh || !okm || oh > 23 || om > 59 {
			return 0, false
		}
		offset = int64(oh*3600 + om*60)
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return 0, false
	}
	secs := daysFromCivil(year, month, day)*86400 + int64(hour*3600+minute*60+sec) - offset
	return secs*1e6 + frac/1000, true
}

func digits2(b []byte) (int, bool) {
	d0, d1 := b[0]-'0', b[1]-'0'
	return int(d0)*10 + int(d1), d0 <= 9 && d1 <= 9
}

func digits4(b []byte) (int, bool) {
	hi, ok1 := digits2(b[0:2])
	lo, ok2 := digits2(b[2:4])
	return hi*100 + lo, ok1 && ok2
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(month, year int) int {
	switch month {
	case 2:
		if isLeap(year) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is the number of days from 1970-01-01 to y-m-d in the
// proleptic Gregorian calendar (H. Hinnant's algorithm).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(int64(y), 400)
	yoe := int64(y) - era*400
	mp := int64((m + 9) % 12)
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - unixToCE
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(z int64) (y, m, d int) {
	z += unixToCE
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	m = int(mp + 3)
	if m > 12 {
		m -= 12
	}
	y = int(yoe + era*400)
	if m <= 2 {
		y++
	}
	return y, m, d
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// appendDate appends days since the epoch as YYYY-MM-DD (the Delta
// partition value form of a date); days must lie in years 0001–9999.
func appendDate(dst []byte, days int64) []byte {
	y, m, d := civilFromDays(days)
	return append(dst,
		byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+m/10), byte('0'+m%10), '-',
		byte('0'+d/10), byte('0'+d%10))
}

// scaleMicros is n of a unit µs = n * scale / div (floored), or
// math.MaxInt64 when that overflows: far out of range, as castMicros
// says.
func scaleMicros(n, scale, div int64) int64 {
	if n > math.MaxInt64/scale || n < math.MinInt64/scale {
		return math.MaxInt64
	}
	return floorDiv(n*scale, div)
}

// castMicros casts µs since the epoch (an instant, or a wall clock read
// as UTC) into timestamp, timestamp_ntz or date column c (its UTC date);
// outside years 0001–9999 is failRange.
func castMicros(us int64, c *planColumn, out *cell) failure {
	if c.kind != kTimestamp && c.kind != kTimestampNTZ && c.kind != kDate {
		return failType
	}
	if !inRange(us) {
		return failRange
	}
	out.i = us
	if c.kind == kDate {
		out.i = floorDiv(us, microsDay)
	}
	return ok
}

// castDays casts days since the epoch into date column c, or a timestamp
// or timestamp_ntz column (its midnight); outside years 0001–9999 is
// failRange.
func castDays(days int64, c *planColumn, out *cell) failure {
	switch c.kind {
	case kDate:
		out.i = days
	case kTimestamp, kTimestampNTZ:
		out.i = days * microsDay
	default:
		return failType
	}
	if days < -1e7 || days > 1e7 || !inRange(days*microsDay) { // ±27,000 years: no overflow
		return failRange
	}
	return ok
}
