package mapping

import (
	"strings"
	"testing"
	"time"
)

// refTimestamp is what time.Parse makes of s with the fallback layouts.
func refTimestamp(s string) (int64, bool) {
	for _, layout := range fallbackLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMicro(), true
		}
	}
	return 0, false
}

func checkTimestamp(t *testing.T, s string) {
	t.Helper()
	got, ok := parseTimestamp([]byte(s))
	want, wantOK := refTimestamp(s)
	if ok != wantOK || got != want {
		t.Errorf("parseTimestamp(%q) = %d, %v; time.Parse gives %d, %v", s, got, ok, want, wantOK)
	}
	if fast, ok := parseRFC3339([]byte(s)); ok && (!wantOK || fast != want) {
		t.Errorf("fast path accepts %q as %d; time.Parse gives %d, %v", s, fast, want, wantOK)
	}
}

func TestParseTimestampAgainstTimeParse(t *testing.T) {
	n, fast := 0, 0
	for _, date := range []string{"0000-01-01", "0001-01-01", "1582-10-10", "1900-02-29", "1969-12-31", "1970-01-01",
		"2000-02-29", "2024-02-29", "2026-02-29", "2026-04-31", "2026-06-22", "2026-13-01", "2026-00-10", "2026-06-00",
		"9999-12-31", "2026-6-22", "20260622", "2026-06-2a"} {
		for _, sep := range []string{"T", "t", " ", "x", ""} {
			for _, clock := range []string{"00:00:00", "09:15:30", "23:59:59", "24:00:00", "23:60:00", "23:59:60", "9:15:30", "09:15", ""} {
				for _, frac := range []string{"", ".", ",5", ".1", ".12", ".123456", ".1234567", ".123456789", ".1234567891", ".999999999"} {
					for _, zone := range []string{"", "Z", "z", "+00:00", "+02:00", "-02:30", "+23:59", "-23:59", "+24:00", "+02:60", "+0200", "+02", " UTC"} {
						s := date + sep + clock + frac + zone
						if sep == "" && clock != "" {
							continue
						}
						checkTimestamp(t, s)
						n++
						if _, ok := parseRFC3339([]byte(s)); ok {
							fast++
						}
					}
				}
			}
		}
	}
	t.Logf("%d inputs, %d on the fast path", n, fast)
	for _, s := range []string{"", "x", "2026-06-22T09:15:30.123456+00:00\x00", strings.Repeat("9", 40), "２０２６-06-22T09:15:30Z"} {
		checkTimestamp(t, s)
	}
}

func TestParseTimestampValues(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"2026-06-22T09:15:30.123456+00:00", time.Date(2026, 6, 22, 9, 15, 30, 123456000, time.UTC)},
		{"2026-06-22T09:15:30Z", time.Date(2026, 6, 22, 9, 15, 30, 0, time.UTC)},
		{"2026-06-22T09:15:30", time.Date(2026, 6, 22, 9, 15, 30, 0, time.UTC)},
		{"2026-06-22T11:15:30.5+02:00", time.Date(2026, 6, 22, 9, 15, 30, 5e8, time.UTC)},
		{"0001-01-01T00:00:00Z", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"9999-12-31T23:59:59.999999Z", time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)},
	} {
		got, ok := parseTimestamp([]byte(tc.in))
		if !ok || got != tc.want.UnixMicro() {
			t.Errorf("%s: %d %v, want %d", tc.in, got, ok, tc.want.UnixMicro())
		}
	}
	for frac := 0; frac <= 9; frac++ {
		s := "2026-06-22T09:15:30" + map[bool]string{true: "." + "123456789"[:frac], false: ""}[frac > 0] + "Z"
		if _, ok := parseRFC3339([]byte(s)); !ok {
			t.Errorf("fast path declines %s", s)
		}
		checkTimestamp(t, s)
	}
}

func TestCivilDays(t *testing.T) {
	for d := daysFromCivil(1, 1, 1); d <= daysFromCivil(9999, 12, 31); d += 17 {
		y, m, dd := civilFromDays(d)
		want := time.Unix(d*86400, 0).UTC()
		if y != want.Year() || m != int(want.Month()) || dd != want.Day() || daysFromCivil(y, m, dd) != d {
			t.Fatalf("day %d: %04d-%02d-%02d, want %s", d, y, m, dd, want.Format(time.DateOnly))
		}
		if got := string(appendDate(nil, d)); got != want.Format(time.DateOnly) {
			t.Fatalf("appendDate(%d) = %s", d, got)
		}
	}
}

func FuzzParseTimestamp(f *testing.F) {
	for _, s := range []string{"2026-06-22T09:15:30.123456+00:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999-23:59",
		"2026-06-22 09:15:30", "2026-06-22T09:15:30,5Z", "2024-02-29T00:00:00z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkTimestamp(t, s)
	})
}

func BenchmarkParseTimestamp(b *testing.B) {
	for _, in := range []string{"2026-06-22T09:15:30.123456+00:00", "2026-06-22T09:15:30Z"} {
		s := []byte(in)
		b.Run(in, func(b *testing.B) {
			for b.Loop() {
				if _, ok := parseTimestamp(s); !ok {
					b.Fatal("no")
				}
			}
		})
	}
	b.Run("time.Parse", func(b *testing.B) {
		for b.Loop() {
			if _, err := time.Parse(time.RFC3339Nano, "2026-06-22T09:15:30.123456+00:00"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fallback", func(b *testing.B) {
		s := []byte("2026-06-22 09:15:30,5")
		for b.Loop() {
			if _, ok := parseTimestamp(s); !ok {
				b.Fatal("no")
			}
		}
	})
}
