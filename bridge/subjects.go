package bridge

import (
	"fmt"
	"strings"
)

// The subject catalogue. Every subject deltaflow uses is listed here once, as
// a wildcard (for subscribers, permissions and stream bindings) beside the
// format it is built from. Table and topic names are escaped with Token
// before they are put into a subject, so each fills exactly one token.
const (
	// Root matches every subject deltaflow publishes or serves.
	Root = "deltaflow.>"

	// EventsSubject matches every event of every table.
	EventsSubject = "deltaflow.*.events.*"
	// EventsSubjectT formats the subject of one event: table token, kind.
	EventsSubjectT = "deltaflow.%s.events.%s"

	// DLQSubject matches every dead letter of every table.
	DLQSubject = "deltaflow.*.dlq.*.*"
	// DLQSubjectT formats the subject of one dead letter: table token,
	// topic token, partition.
	DLQSubjectT = "deltaflow.%s.dlq.%s.%d"
	// DLQStreamSubjectT formats the subjects bound to one table's DLQ stream.
	DLQStreamSubjectT = "deltaflow.%s.dlq.>"

	// ControlSubject matches every control endpoint of every table.
	ControlSubject = "deltaflow.*.control.*"
	// ControlGroupT formats the micro service group of one table's control
	// endpoints; the endpoint names (ControlStatus, ...) follow it.
	ControlGroupT = "deltaflow.%s.control"

	// OffsetKeyT formats the KV key of one partition's recovery offset:
	// table token, topic token, partition.
	OffsetKeyT = "%s.%s.%d"
	// WatchdogKeyT formats the KV key of a table's stall watchdog exits:
	// table token. Two tokens, so it never matches an offset key.
	WatchdogKeyT = "%s.watchdog"
)

// Control endpoint names, the last token of a control subject.
const (
	ControlStatus = "status"
	ControlFlush  = "flush"
	ControlPause  = "pause"
	ControlResume = "resume"
)

// Defaults for the JetStream assets.
const (
	// DefaultKVBucket is the KV bucket holding the recovery offsets mirror.
	DefaultKVBucket = "deltaflow_offsets"
	// DLQStreamPrefix starts the default DLQ stream name, followed by the
	// table name upper-cased and reduced to [A-Z0-9_-].
	DLQStreamPrefix = "DELTAFLOW_DLQ_"
)

// Token escapes s into exactly one subject token that is also a valid KV key
// token: every byte outside [A-Za-z0-9_-] becomes "=XX" (upper-case hex).
// The escape is reversible, so distinct names never collide: Kafka topics may
// contain '.', which would otherwise split them into several tokens
// ("sensor.events" becomes "sensor=2Eevents"; "sensor-events" stays as is).
func Token(s string) string {
	if s == "" {
		return "="
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isTokenByte(c) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "=%02X", c)
	}
	return b.String()
}

func isTokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// EventSubject returns the subject an event of kind is published on.
func EventSubject(table string, kind Kind) string {
	return fmt.Sprintf(EventsSubjectT, Token(table), kind)
}

// DLQLetterSubject returns the subject a dead letter from topic/partition is
// stored under.
func DLQLetterSubject(table, topic string, partition int32) string {
	return fmt.Sprintf(DLQSubjectT, Token(table), Token(topic), partition)
}

// DLQStreamSubject returns the subjects bound to the table's DLQ stream.
func DLQStreamSubject(table string) string {
	return fmt.Sprintf(DLQStreamSubjectT, Token(table))
}

// ControlGroup returns the micro service group of the table's control
// endpoints; a request goes to ControlGroup(table)+"."+ControlStatus etc.
func ControlGroup(table string) string {
	return fmt.Sprintf(ControlGroupT, Token(table))
}

// OffsetKey returns the KV key of one partition's recovery offset.
func OffsetKey(table, topic string, partition int32) string {
	return fmt.Sprintf(OffsetKeyT, Token(table), Token(topic), partition)
}

// DefaultDLQStream returns the default DLQ stream name of a table:
// DLQStreamPrefix plus the table name upper-cased, with every byte JetStream
// stream names do not allow (and every byte outside [A-Z0-9_-], to keep the
// name usable in file names and shells) replaced by '_'.
func DefaultDLQStream(table string) string {
	b := []byte(strings.ToUpper(table))
	for i, c := range b {
		if !isTokenByte(c) {
			b[i] = '_'
		}
	}
	return DLQStreamPrefix + string(b)
}

// WatchdogKey returns the KV key holding the table's last watchdog exits.
func WatchdogKey(table string) string {
	return fmt.Sprintf(WatchdogKeyT, Token(table))
}
