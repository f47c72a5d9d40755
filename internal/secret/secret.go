// Package secret has the string type deltaflow keeps passwords, tokens and
// keys in, so that no config dump, log line or error can show them.
package secret

import (
	"fmt"
	"log/slog"
)

// Secret is a string that does not print itself: fmt (every verb), slog,
// JSON and YAML all show "REDACTED" (or "" when empty). Convert with
// string(s) where the value is needed.
type Secret string

// Redacted is what a Secret shows instead of its value.
const Redacted = "REDACTED"

func (s Secret) show() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// String implements fmt.Stringer.
func (s Secret) String() string { return s.show() }

// Format implements fmt.Formatter: %q, %x and %#v hide the value too.
func (s Secret) Format(f fmt.State, _ rune) { fmt.Fprint(f, s.show()) }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.show()) }

// MarshalText implements encoding.TextMarshaler, used by JSON and YAML.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.show()), nil }
