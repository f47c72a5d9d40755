package actors

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/deltaflow/deltaflow/messages"
)

// lifecycle is the committer's pipeline lifecycle: the table's generations,
// each one pipeline actor with its readers and buffers. Dropping one (an
// abort) stops it all and starts the next generation at once, so that the
// dropped one's late messages, rows and bytes count for nothing; the next
// pipeline is spawned after the failure streak's backoff (rebuildAfter).
// Buffers idle for long are retired along the epochs. It is plain state
// driven by the committer, which decides when a generation is dropped and
// built, and from which offsets it reads.
type lifecycle struct {
	cfg *committerConfig
	// gen is the current generation: messages of others are ignored.
	gen      uint64
	pipeline *actor.PID // nil from a drop until the rebuild
	// readers are the partitions this generation's pipeline was asked to
	// read: those an epoch is sealed on.
	readers map[tp]bool
	// idle counts, per buffer (by PID id), the epochs in a row it had no
	// rows in; retiring are the buffers retired at the running epoch's seal,
	// stopped once it is flushed.
	idle     map[string]int
	retiring []*actor.PID
	failures failureStreak // paces rebuilds
}

// rebuild asks the committer to build generation gen (rebuildAfter).
type rebuild struct{ gen uint64 }

// forget forgets the generation's actors: stopped already (by a restart of
// the committer, their parent) or being stopped (drop).
func (l *lifecycle) forget() {
	l.pipeline, l.idle, l.retiring = nil, map[string]int{}, nil
}

// next starts a generation: its registry and budget begin empty.
func (l *lifecycle) next() {
	l.gen++
	l.cfg.pipeline.reg.reset(l.gen)
	l.cfg.budget.NewGeneration(l.gen)
}

// running reports whether the generation has a pipeline (none from a drop
// until the rebuild).
func (l *lifecycle) running() bool { return l.pipeline != nil }

// spawn spawns the generation's pipeline, reading nothing yet.
func (l *lifecycle) spawn(ctx actor.Context) {
	pid, err := ctx.SpawnNamed(newPipelineProps(l.cfg.pipeline, l.gen), fmt.Sprintf("pipeline-%d", l.gen))
	if err != nil {
		panic(fmt.Errorf("committer: spawn pipeline: %w", err))
	}
	l.pipeline, l.readers = pid, map[tp]bool{}
}

// spawnReaders asks the pipeline for readers of partitions, each
// continuing from its offset and tagging rows with epoch; epochs sealed
// from now on include them.
func (l *lifecycle) spawnReaders(ctx actor.Context, from map[tp]int64, epoch uint64, limits map[tp]*readLimit) {
	for p := range from {
		l.readers[p] = true
	}
	ctx.Send(l.pipeline, &spawnReaders{from: from, epoch: epoch, limits: limits})
}

// reading are the partitions the generation reads, ascending.
func (l *lifecycle) reading() []tp { return sortedTPs(l.readers) }

// seal hands every reader the seal of epoch. Buffers idle for long stop
// with it: forgotten by the registry now and by the readers at the seal,
// flushed once more with it, then stopped (flushed).
func (l *lifecycle) seal(ctx actor.Context, epoch uint64) {
	reg := l.cfg.pipeline.reg
	var retire []string
	for key, pid := range reg.bufferList() {
		if l.idle[pid.Id] >= l.cfg.idleEpochs {
			reg.removeBuffer(key, pid)
			l.retiring = append(l.retiring, pid)
			retire = append(retire, key)
			delete(l.idle, pid.Id)
		}
	}
	ctx.Send(l.pipeline, &sealReaders{seal: &messages.Seal{Gen: l.gen, Epoch: epoch, Retire: retire}})
}

// buffers are those that flush the sealed epoch: every live one, and those
// retired at its seal.
func (l *lifecycle) buffers() []*actor.PID {
	return append(slices.Collect(maps.Values(l.cfg.pipeline.reg.bufferList())), l.retiring...)
}

// flushed takes the buffers' answers to the epoch's flush (by PID id:
// those that had rows in it and those that had none): the retired ones are
// stopped, and the others' idle epochs counted.
func (l *lifecycle) flushed(ctx actor.Context, active, idle []string) {
	if len(l.retiring) > 0 {
		ctx.Send(l.pipeline, &stopBuffers{pids: l.retiring})
		l.retiring = nil
	}
	for _, id := range active {
		delete(l.idle, id)
	}
	for _, id := range idle {
		l.idle[id]++
	}
}

// drop throws the generation away (its pipeline stopped, its registry and
// budget emptied by the next generation's start) and returns the wait
// before the next is built (rebuildAfter): the failure streak's backoff
// when a failure caused the drop, reported as the pipeline's restart; none
// otherwise.
func (l *lifecycle) drop(ctx actor.Context, reason string, failure bool) time.Duration {
	if l.pipeline != nil {
		ctx.Stop(l.pipeline)
	}
	l.forget()
	var delay time.Duration
	if failure {
		now := time.Now()
		var n int
		delay, n = l.failures.fail(now, l.cfg.backoff)
		l.cfg.progress.failing(delay >= l.cfg.backoff.Max, now)
		reportRestart(l.cfg.metrics, l.cfg.outbox, "pipeline", "committer/pipeline", reason, n)
	}
	l.next() // the dropped one's readers take nothing more
	return delay
}

// rebuildAfter asks the committer, after delay, to build the generation's
// pipeline (rebuild).
func (l *lifecycle) rebuildAfter(ctx actor.Context, delay time.Duration) {
	gen, self, system := l.gen, ctx.Self(), ctx.ActorSystem()
	time.AfterFunc(delay, func() { system.Root.Send(self, &rebuild{gen: gen}) })
}
