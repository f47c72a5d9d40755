package mapping

import (
	"errors"
	"strings"
)

// ErrSkip is Map's answer for a record that has nothing to write and is
// no error: a change event's tombstone, after the delete it follows.
var ErrSkip = errors.New("mapping: nothing to write")

// MapError is why a record cannot be mapped; the record goes to the DLQ with
// Reason. Reasons are short and stable ("missing required field device_id",
// "power: cannot cast \"abc\" to double") so DLQ consumers can group them;
// a quoted offending value is cut to 40 bytes.
type MapError struct {
	// Reason is the stable, human-readable cause.
	Reason string
	// Column is the table column concerned, if any.
	Column string
	// Path is the JSON path (or source) concerned, if any: "payload.power".
	Path string
}

func (e *MapError) Error() string {
	var b strings.Builder
	b.WriteString("mapping: ")
	b.WriteString(e.Reason)
	if e.Column != "" || e.Path != "" {
		b.WriteString(" (")
		if e.Column != "" {
			b.WriteString("column ")
			b.WriteString(e.Column)
			if e.Path != "" {
				b.WriteString(", ")
			}
		}
		if e.Path != "" {
			b.WriteString("source ")
			b.WriteString(e.Path)
		}
		b.WriteString(")")
	}
	return b.String()
}
