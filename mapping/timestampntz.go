package mapping

// parseTimestampNTZ parses a local date-time, without zone or offset, into
// µs since 1970-01-01T00:00:00 (the wall clock read as UTC: how Delta and
// Parquet hold a timestamp_ntz), accepting exactly what Spark 3.5's
// from_json accepts for a TimestampNTZType without a timestampNTZFormat
// (DateTimeUtils.stringToTimestampWithoutTimeZone, checked against Spark
// 3.5.1 in TestParseTimestampNTZ):
//
//	[+|-]yyyy[y[y]][-[m]m[-[d]d[('T'|' ')[h]h[:[m]m[:[s]s[.[f…]]]]]]]
//
// with leading and trailing ASCII whitespace and control characters
// ignored: "2026", "2026-06", "2026-06-22", "2026-6-2 1:2", "2026-06-22T10",
// "2026-06-22T10:15:30." all parse, missing fields being their least
// value. A fraction of any length is truncated to µs. Anything after the
// time (a zone "Z", an offset "+02:00", " UTC") is refused, as from_json
// refuses it: f is failZone when that text looks like a zone (a letter, a
// sign or a space begins it), failTimestamp for any other malformed text
// or a field out of range (month 13, February 29 of a common year, hour
// 24, second 60). Years outside 0001–9999 (from_json takes up to six
// digits and a sign, "0000", "+10000") are failRange: Delta's and
// deltaflow's range. It does not allocate.
func parseTimestampNTZ(b []byte) (micros int64, f failure) {
	start, end := 0, len(b)
	for start < end && isTrimmed(b[start]) {
		start++
	}
	for end > start && isTrimmed(b[end-1]) {
		end--
	}
	s := b[start:end]
	// year, month, day, hour, minute, second, µs; month and day default to 1.
	seg := [7]int{0, 1, 1, 0, 0, 0, 0}
	neg := false
	k := 0
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		neg, k = s[0] == '-', 1
	}
	i, val, digits := 0, 0, 0 // the segment being read, its value and digit count
	for ; k < len(s); k++ {
		c := s[k]
		if d := c - '0'; d <= 9 {
			// Only the first 6 digits of the fraction count (truncated);
			// more than 6 in any other field make it invalid anyway.
			if digits < 6 || (i != 6 && digits < 7) {
				val = val*10 + int(d)
			}
			digits++
			continue
		}
		next := (i < 2 && c == '-') || (i == 2 && (c == 'T' || c == ' ')) || ((i == 3 || i == 4) && c == ':') || (i == 5 && c == '.')
		if !next {
			if (i == 5 || i == 6) && validNTZDigits(i, digits) && zoneStart(c) {
				return 0, failZone
			}
			return 0, failTimestamp
		}
		if !validNTZDigits(i, digits) {
			return 0, failTimestamp
		}
		seg[i] = val
		i, val, digits = i+1, 0, 0
	}
	if !validNTZDigits(i, digits) {
		return 0, failTimestamp
	}
	seg[i] = val
	if i == 6 {
		for n := min(digits, 6); n < 6; n++ {
			seg[6] *= 10
		}
	}
	year, month, day := seg[0], seg[1], seg[2]
	if neg {
		year = -year
	}
	if month < 1 || month > 12 || day < 1 || day > daysIn(month, year) || seg[3] > 23 || seg[4] > 59 || seg[5] > 59 {
		return 0, failTimestamp
	}
	if year < 1 || year > 9999 {
		return 0, failRange
	}
	secs := daysFromCivil(year, month, day)*86400 + int64(seg[3]*3600+seg[4]*60+seg[5])
	return secs*1e6 + int64(seg[6]), ok
}

// validNTZDigits reports whether n digits make segment i: a year of 4 to
// 6, a fraction of any number, any other field 1 or 2.
func validNTZDigits(i, n int) bool {
	switch i {
	case 0:
		return n >= 4 && n <= 6
	case 6:
		return true
	}
	return n >= 1 && n <= 2
}

// isTrimmed reports whether Spark trims c off a date-time string: ASCII
// whitespace and control characters (UTF8String.isWhitespaceOrISOControl).
func isTrimmed(c byte) bool { return c <= ' ' || c == 0x7f }

// zoneStart reports whether c may begin a zone after a time: "Z", "+02:00",
// "-05:00", " UTC", "GMT", "Europe/Paris".
func zoneStart(c byte) bool {
	return c == '+' || c == '-' || c == ' ' || (c|0x20 >= 'a' && c|0x20 <= 'z')
}
