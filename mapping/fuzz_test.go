package mapping

import (
	"errors"
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/delta"
)

// FuzzMap feeds arbitrary values through the default mapping in both modes:
// Map must never panic, must fail only with a *MapError, and a mapped row
// must be well formed with a routing key of one escaped segment per column.
// The seed corpus is in testdata/fuzz/FuzzMap.
func FuzzMap(f *testing.F) {
	f.Add([]byte(plugSample), false)
	f.Add([]byte(doorSample), true)
	strict, permissive := newDefault(f, Strict), newDefault(f, Permissive)
	f.Fuzz(func(t *testing.T, value []byte, lenient bool) {
		m := strict
		if lenient {
			m = permissive
		}
		var row Row
		err := m.Map(&Record{Topic: "sensor-events", Value: value}, &row)
		if err != nil {
			var me *MapError
			if !errors.As(err, &me) || me.Reason == "" {
				t.Fatalf("error %v is not a MapError with a reason", err)
			}
			return
		}
		decoded(t, m, &row)
		want := delta.PartitionDir(m.PartitionColumns(), m.PartitionMap(&row))
		if string(row.Key) != want {
			t.Fatalf("key %q, want %q", row.Key, want)
		}
		if n := strings.Count(want, "/"); n != len(m.PartitionColumns())-1 {
			t.Fatalf("key %q has %d separators", want, n)
		}
		if row.Size <= 0 {
			t.Fatalf("size %d", row.Size)
		}
	})
}
