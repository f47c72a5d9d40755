package actors

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// registry maps, for one table, the current generation's topic partitions
// to reader PIDs and partition directories to buffer PIDs. The pipeline
// writes it; the committer and the fetch loop read it. Safe for concurrent
// use.
type registry struct {
	mu      sync.Mutex
	gen     uint64
	readers map[tp]*actor.PID
	buffers map[string]*actor.PID // by partition directory (routing key)
	// changed is called after a reader is set (reset false) and after the
	// registry is emptied for a new generation (reset true).
	changed func(reset bool)
}

func newRegistry() *registry {
	return &registry{readers: map[tp]*actor.PID{}, buffers: map[string]*actor.PID{}}
}

// reset empties the registry for a new generation.
func (r *registry) reset(gen uint64) {
	r.mu.Lock()
	r.gen = gen
	r.readers = map[tp]*actor.PID{}
	r.buffers = map[string]*actor.PID{}
	changed := r.changed
	r.mu.Unlock()
	if changed != nil {
		changed(true)
	}
}

func (r *registry) setReader(gen uint64, p tp, pid *actor.PID) {
	r.mu.Lock()
	if gen == r.gen {
		r.readers[p] = pid
	}
	changed := r.changed
	r.mu.Unlock()
	if changed != nil {
		changed(false)
	}
}

// onChange makes reset and setReader call fn: the fetch loop waits for a
// new generation's readers, and never for a dropped one's.
func (r *registry) onChange(fn func(reset bool)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changed = fn
}

// reader returns the PID of the partition's reader in generation gen.
func (r *registry) reader(gen uint64, p tp) *actor.PID {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen != r.gen {
		return nil
	}
	return r.readers[p]
}

func (r *registry) buffer(key string) *actor.PID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buffers[key]
}

func (r *registry) setBuffer(gen uint64, key string, pid *actor.PID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen == r.gen {
		r.buffers[key] = pid
	}
}

// removeBuffer forgets key's buffer if it is still pid.
func (r *registry) removeBuffer(key string, pid *actor.PID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur := r.buffers[key]; cur != nil && cur.Equal(pid) {
		delete(r.buffers, key)
	}
}

// bufferList returns every live buffer, by routing key.
func (r *registry) bufferList() map[string]*actor.PID {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]*actor.PID, len(r.buffers))
	for k, v := range r.buffers {
		out[k] = v
	}
	return out
}
