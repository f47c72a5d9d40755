package actors

import (
	"maps"
	"sync"
)

// Health collects why the engine is degraded (storage retrying, NATS down,
// pipeline restarting), which /readyz reports, and why it is unhealthy: it
// refuses to go on with part of its work until a human steps in (a
// partition held for data loss), which /healthz reports too. Safe for
// concurrent use.
type Health struct {
	mu        sync.Mutex
	reasons   map[string]string
	unhealthy map[string]string
}

// NewHealth returns a healthy Health.
func NewHealth() *Health {
	return &Health{reasons: map[string]string{}, unhealthy: map[string]string{}}
}

// Refuse records that the engine refuses what key names, and why: it is
// unhealthy until Accept(key).
func (h *Health) Refuse(key, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unhealthy[key] = reason
}

// Accept clears Refuse(key).
func (h *Health) Accept(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.unhealthy, key)
}

// Unhealthy returns key → reason for every refusal in force.
func (h *Health) Unhealthy() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.unhealthy)
}

// Degrade records that component is degraded, and why.
func (h *Health) Degrade(component, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reasons[component] = reason
}

// Recover clears component's degradation.
func (h *Health) Recover(component string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.reasons, component)
}

// Degraded returns component → reason for every degraded component.
func (h *Health) Degraded() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.reasons)
}
