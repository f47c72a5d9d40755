package mapping

import (
	"strings"
	"testing"
)

// TestWhere: a route's filter over the mapped row: data and partition
// columns of every comparable kind, each operator, null as SQL's, and
// AND; errors name the column.
func TestWhere(t *testing.T) {
	m := newDefault(t, Strict)
	plug, _ := mustMap(t, m, rec(plugSample))
	door, _ := mustMap(t, m, rec(doorSample))
	for _, tc := range []struct {
		where      string
		plug, door bool
	}{
		{"device_type = 'smart_plug'", true, false},
		{"device_type != 'smart_plug'", false, true},
		{"power > 80", true, false},
		{"power <= 84.3", true, false},
		{"power = null", false, true},
		{"power != null", true, false},
		{"power != 1", true, false}, // a door's null power compares as not true
		{"linkquality >= 200", true, false},
		{"linkquality < 200", false, true},
		{"contact = false", false, true},
		{"plug_state = 'ON'", true, false},
		{"event_date = '2026-06-22'", true, true},
		{"event_date > '2026-06-21'", true, true},
		{"event_date < '2026-06-22'", false, false},
		{"event_time >= '2026-06-22T09:15:31Z'", false, true},
		{"device_type = 'smart_plug' AND power > 100", false, false},
		{"device_type = 'door_window' AND battery = 97", false, true},
	} {
		w, err := m.Where(tc.where)
		if err != nil {
			t.Fatalf("%s: %v", tc.where, err)
		}
		if got := w.Match(plug); got != tc.plug {
			t.Errorf("%s on the plug: %v, want %v", tc.where, got, tc.plug)
		}
		if got := w.Match(door); got != tc.door {
			t.Errorf("%s on the door: %v, want %v", tc.where, got, tc.door)
		}
	}
	for where, want := range map[string]string{
		"watts > 1":       `no column "watts"`,
		"power > 'lots'":  "power",
		"device_type = 3": "device_type",
		"device_type =":   "",
	} {
		if _, err := m.Where(where); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %q", where, err, want)
		}
	}
}

// TestWhereDoesNotAllocate: matching a mapped row allocates nothing.
func TestWhereDoesNotAllocate(t *testing.T) {
	m := newDefault(t, Strict)
	plug, _ := mustMap(t, m, rec(plugSample))
	w, err := m.Where("device_type = 'smart_plug' AND power > 80 AND event_date >= '2026-06-01' AND plug_state = 'ON'")
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { w.Match(plug) }); n != 0 {
		t.Errorf("%v allocations per match", n)
	}
}
