package actors

import (
	"maps"
	"slices"
	"sync"
)

// Health collects why the engine is degraded (storage retrying, NATS down,
// pipeline restarting), which /readyz reports, and why it is unhealthy: it
// refuses to go on with part of its work until a human steps in (a
// partition held for data loss), which /healthz reports too. A table's
// view (Table) writes keys that name the table. Safe for concurrent use.
type Health struct {
	*healthState
	prefix string // a table view's, before every key it writes
}

type healthState struct {
	mu        sync.Mutex
	reasons   map[string]string
	unhealthy map[string]string
}

// NewHealth returns a healthy Health.
func NewHealth() *Health {
	return &Health{healthState: &healthState{reasons: map[string]string{}, unhealthy: map[string]string{}}}
}

// Table returns the view of h that table name's components write through:
// the same state, with keys "table <name>: <key>".
func (h *Health) Table(name string) *Health {
	return &Health{healthState: h.healthState, prefix: TableKey(name, "")}
}

// TableKey is the key a table's view writes key under.
func TableKey(table, key string) string { return "table " + table + ": " + key }

// Refuse records that the engine refuses what key names, and why: it is
// unhealthy until Accept(key).
func (h *Health) Refuse(key, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unhealthy[h.prefix+key] = reason
}

// Accept clears Refuse(key).
func (h *Health) Accept(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.unhealthy, h.prefix+key)
}

// Unhealthy returns key → reason for every refusal in force.
func (h *Health) Unhealthy() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.unhealthy)
}

// Refusals says every refusal in force, "key: reason", sorted: what
// /healthz answers and what `run --until-latest` fails with.
func (h *Health) Refusals() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.unhealthy))
	for key, why := range h.unhealthy {
		out = append(out, key+": "+why)
	}
	slices.Sort(out)
	return out
}

// Degrade records that component is degraded, and why.
func (h *Health) Degrade(component, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reasons[h.prefix+component] = reason
}

// Recover clears component's degradation.
func (h *Health) Recover(component string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.reasons, h.prefix+component)
}

// Degraded returns component → reason for every degraded component.
func (h *Health) Degraded() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.reasons)
}
