// Package secret has the string type deltaflow keeps passwords, tokens and
// keys in, so that no config dump, log line or error can show them.
package secret

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
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

// RedactURL hides the user part of user:password@ (or token@) in a URL,
// or in each of a comma-separated list of URLs, for messages and logs.
func RedactURL(u string) string {
	parts := strings.Split(u, ",")
	for i, p := range parts {
		pu, err := url.Parse(strings.TrimSpace(p))
		if err != nil {
			// Unparseable: keep only what cannot hold a secret.
			if at := strings.LastIndex(p, "@"); at >= 0 {
				parts[i] = Redacted + p[at:]
			}
			continue
		}
		if pu.User != nil {
			pu.User = url.User(Redacted)
		}
		parts[i] = pu.String()
	}
	return strings.Join(parts, ",")
}
