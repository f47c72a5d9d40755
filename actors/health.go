package actors

import (
	"maps"
	"sync"
)

// Health collects why the engine is degraded (storage retrying, NATS down,
// pipeline restarting); /readyz reports it. Safe for concurrent use.
type Health struct {
	mu      sync.Mutex
	reasons map[string]string
}

// NewHealth returns a healthy Health.
func NewHealth() *Health { return &Health{reasons: map[string]string{}} }

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
