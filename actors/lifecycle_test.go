package actors

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// lifecycleContext is the committer's context as lifecycle uses it: what it
// spawns, sends and stops is recorded, not done.
type lifecycleContext struct {
	actor.Context
	spawned []string
	sent    []any
	stopped []*actor.PID
	self    *actor.PID
	system  *actor.ActorSystem
}

func (c *lifecycleContext) Self() *actor.PID                { return c.self }
func (c *lifecycleContext) ActorSystem() *actor.ActorSystem { return c.system }

func (c *lifecycleContext) SpawnNamed(_ *actor.Props, name string) (*actor.PID, error) {
	c.spawned = append(c.spawned, name)
	return actor.NewPID("test", "committer/"+name), nil
}

func (c *lifecycleContext) Send(_ *actor.PID, msg any) { c.sent = append(c.sent, msg) }

func (c *lifecycleContext) Stop(pid *actor.PID) { c.stopped = append(c.stopped, pid) }

// last is the last message sent, as T.
func last[T any](t *testing.T, c *lifecycleContext) T {
	t.Helper()
	if len(c.sent) == 0 {
		t.Fatal("nothing sent")
	}
	m, ok := c.sent[len(c.sent)-1].(T)
	if !ok {
		t.Fatalf("last message sent is %T", c.sent[len(c.sent)-1])
	}
	return m
}

func newTestLifecycle(idleEpochs int) *lifecycle {
	return &lifecycle{cfg: &committerConfig{
		idleEpochs: idleEpochs,
		backoff:    Backoff{Initial: time.Second, Max: 4 * time.Second},
		pipeline:   &pipelineConfig{reg: newRegistry()},
		budget:     NewBudget(1<<20, 2),
		progress:   newProgress(time.Now()),
		metrics:    NewMetrics(nil).Table("t"),
		outbox:     &dlqOutbox{},
	}}
}

// spawnFirst starts l's first generation and spawns its pipeline, as the
// committer's start does, in a context that records what l does.
func spawnFirst(l *lifecycle) *lifecycleContext {
	ctx := &lifecycleContext{}
	l.forget()
	l.next()
	l.spawn(ctx)
	return ctx
}

// A buffer idle for idleEpochs epochs in a row is retired at the next seal:
// gone from the registry, flushed with that epoch, stopped once the epoch
// is flushed. A buffer with rows starts its count over.
func TestLifecycleRetiresIdleBuffers(t *testing.T) {
	l := newTestLifecycle(2)
	ctx := spawnFirst(l)
	l.spawnReaders(ctx, map[tp]int64{{Topic: topic, Partition: 1}: 5, {Topic: topic, Partition: 0}: -1}, 0, nil)
	if got := last[*spawnReaders](t, ctx); got.epoch != 0 || len(got.from) != 2 {
		t.Fatalf("spawnReaders = %+v", got)
	}
	if got := l.reading(); !slices.Equal(got, tps(0, 1)) {
		t.Fatalf("reading %v, want partitions 0 and 1", got)
	}
	busy, quiet := actor.NewPID("test", "busy"), actor.NewPID("test", "quiet")
	l.cfg.pipeline.reg.setBuffer(l.gen, "d=busy", busy)
	l.cfg.pipeline.reg.setBuffer(l.gen, "d=quiet", quiet)

	for epoch, wantRetired := range [][]string{nil, nil, {"d=quiet"}, nil} {
		l.seal(ctx, uint64(epoch))
		seal := last[*sealReaders](t, ctx).seal
		if seal.Gen != l.gen || seal.Epoch != uint64(epoch) || !slices.Equal(seal.Retire, wantRetired) {
			t.Fatalf("epoch %d: seal %+v, want retired %v", epoch, seal, wantRetired)
		}
		flushing := len(l.buffers())
		sent := len(ctx.sent)
		l.flushed(ctx, []string{busy.Id}, []string{quiet.Id})
		switch epoch {
		case 2:
			if flushing != 2 || l.cfg.pipeline.reg.buffer("d=quiet") != nil {
				t.Fatalf("epoch 2: %d buffers flush; quiet still registered: %v", flushing, l.cfg.pipeline.reg.buffer("d=quiet"))
			}
			if stop := last[*stopBuffers](t, ctx); len(ctx.sent) != sent+1 || !slices.Equal(stop.pids, []*actor.PID{quiet}) {
				t.Fatalf("epoch 2: stopBuffers %v, want the quiet buffer", stop.pids)
			}
		case 3:
			if flushing != 1 {
				t.Fatalf("epoch 3: %d buffers flush, want the busy one", flushing)
			}
		}
		if epoch != 2 && len(ctx.sent) != sent {
			t.Fatalf("epoch %d: flushed sent %T", epoch, ctx.sent[len(ctx.sent)-1])
		}
	}
}

// drop stops the pipeline and starts the next generation (registry and
// budget empty) at once; a failure waits the streak's backoff and counts as
// the pipeline's restart, another drop does not.
func TestLifecycleDrop(t *testing.T) {
	l := newTestLifecycle(1)
	ctx := spawnFirst(l)
	l.cfg.pipeline.reg.setBuffer(l.gen, "d=x", actor.NewPID("test", "x"))
	l.cfg.budget.Add(l.gen, 100)
	restarts := func() float64 { return testutil.ToFloat64(l.cfg.metrics.Restarts.WithLabelValues("pipeline")) }

	for i, tc := range []struct {
		failure bool
		delay   time.Duration
	}{{true, time.Second}, {true, 2 * time.Second}, {false, 0}, {true, 4 * time.Second}} {
		gen, pipeline, before := l.gen, l.pipeline, restarts()
		if delay := l.drop(ctx, "test", tc.failure); delay != tc.delay {
			t.Errorf("drop %d: delay %s, want %s", i, delay, tc.delay)
		}
		if l.running() || l.gen != gen+1 || !slices.Equal(ctx.stopped[len(ctx.stopped)-1:], []*actor.PID{pipeline}) {
			t.Fatalf("drop %d: running %v, generation %d (was %d), stopped %v", i, l.running(), l.gen, gen, ctx.stopped)
		}
		if len(l.cfg.pipeline.reg.bufferList()) != 0 || l.cfg.budget.Bytes() != 0 {
			t.Errorf("drop %d: registry %v, budget %d bytes: not emptied", i, l.cfg.pipeline.reg.bufferList(), l.cfg.budget.Bytes())
		}
		if counted := restarts() - before; (counted == 1) != tc.failure {
			t.Errorf("drop %d (failure %v): %v restarts counted", i, tc.failure, counted)
		}
		l.spawn(ctx)
		if want := fmt.Sprintf("pipeline-%d", l.gen); ctx.spawned[len(ctx.spawned)-1] != want {
			t.Errorf("drop %d: spawned %s, want %s", i, ctx.spawned[len(ctx.spawned)-1], want)
		}
	}
}

// rebuildAfter asks the committer for the generation current when asked.
func TestLifecycleRebuildAfter(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	got := make(chan *rebuild, 1)
	committer := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*rebuild); ok {
			got <- m
		}
	}))
	l := newTestLifecycle(1)
	l.next()
	l.next()
	l.rebuildAfter(&lifecycleContext{self: committer, system: system}, 10*time.Millisecond)
	select {
	case m := <-got:
		if m.gen != 2 {
			t.Errorf("rebuild of generation %d, want 2", m.gen)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no rebuild")
	}
}
