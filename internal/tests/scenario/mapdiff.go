package scenario

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// MapDiff names, in key order, the first 8 keys whose values got and want
// disagree on (a key one of them lacks shows as absent there): what a
// table holds against what it should, for a failure message.
func MapDiff[K cmp.Ordered, V comparable](got, want map[K]V) string {
	keys := slices.Collect(maps.Keys(got))
	for k := range want {
		if _, ok := got[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	show := func(v V, ok bool) string {
		if !ok {
			return "absent"
		}
		return fmt.Sprintf("%+v", v)
	}
	var out []string
	for _, k := range keys {
		g, inGot := got[k]
		w, inWant := want[k]
		if inGot == inWant && g == w {
			continue
		}
		if out = append(out, fmt.Sprintf("%v: %s, want %s", k, show(g, inGot), show(w, inWant))); len(out) == 8 {
			break
		}
	}
	return strings.Join(out, "; ")
}
