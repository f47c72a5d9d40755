// Package bytesize is the configuration's size type: plain bytes or a
// number with a unit, shared by the sections of several packages (the
// daemon's, the NATS bridge's).
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// Size is a size in bytes that YAML writes as a plain number of bytes or
// a number with a unit: "32MiB", "128MB", "512KiB", "1GiB" (KB/MB/GB are
// powers of 1000, KiB/MiB/GiB powers of 1024, as in Kubernetes).
type Size int64

var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
}

// Parse parses "32MiB", "128MB", "1048576" and the like.
func Parse(s string) (Size, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsDigit(r) })
	if i < 0 {
		i = len(s)
	}
	num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("invalid size %q (want bytes or a number with KB, MB, GB, KiB, MiB or GiB)", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q: out of range", s)
	}
	return Size(n * mult), nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a size such as 32MiB", n.Line)
	}
	v, err := Parse(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = v
	return nil
}

// String writes the size with the largest binary unit that divides it.
func (b Size) String() string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && int64(b)%u.mult == 0 {
			return fmt.Sprintf("%d%s", int64(b)/u.mult, u.name)
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// MarshalYAML implements yaml.Marshaler, writing the String form.
func (b Size) MarshalYAML() (any, error) { return b.String(), nil }
