package actors

import (
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/messages"
)

// pipelineConfig is what the pipeline of every generation of one table
// shares.
type pipelineConfig struct {
	tableName string
	mapper    *mapping.Mapper // cloned for each reader
	where     *mapping.Where  // the table's filter; nil: every row
	// deleteWhen, in an upsert table, makes a row a delete of its key.
	deleteWhen *mapping.Where
	// unrouted says, per topic, whether the readers of this table decide
	// which records no route takes (Engine.unroutedFor).
	unrouted  func(topic string) *unrouted
	buffer    *bufferConfig
	committer *actor.PID
	reg       *registry
	metrics   *Metrics
	logger    *slog.Logger
	// behind tells the fetch loop that a reader stopped at from for want
	// of need bytes of room, or of the writer schema with id schema
	// (fetcher.behind, for this table).
	behind func(gen uint64, p tp, from, need int64, schema int)
}

// Messages to the pipeline. The committer's are sent, never awaited: a
// mailbox delivers one sender's messages in order, so readers spawned by
// spawnReaders exist when a later sealReaders reaches them.
type (
	// spawnReaders starts readers for partitions, each continuing from
	// its offset (-1: where the partition starts), tagging rows with
	// epoch; limits bound some while a record is isolated.
	spawnReaders struct {
		from   map[tp]int64
		epoch  uint64
		limits map[tp]*readLimit
	}
	// sealReaders hands seal to every reader.
	sealReaders struct{ seal *messages.Seal }
	// stopBuffers stops retired buffers (by PID).
	stopBuffers struct{ pids []*actor.PID }
	// routeRows hands batch to the buffer of a partition directory,
	// spawning it, and tells the reader that sent it the buffer
	// (bufferFound): a reader never waits for a buffer, and its rows reach
	// the buffer in the order it sent them (those it sends itself go after
	// the answer).
	routeRows struct {
		key    string
		values map[string]*string
		batch  *messages.RowBatch
	}
	// bufferFound answers routeRows.
	bufferFound struct {
		key string
		pid *actor.PID
	}
)

// pipeline is the parent of one generation's readers and buffers. Any
// failure among them stops them all and reports to the committer, which
// throws the generation away and builds the next one.
type pipeline struct {
	cfg     *pipelineConfig
	gen     uint64
	nextID  int
	readers []*actor.PID
	// dead is set once a child failed or the pipeline is stopping: it
	// spawns nothing more, so that stopping it stops everything it made.
	dead bool
}

func newPipelineProps(cfg *pipelineConfig, gen uint64) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &pipeline{cfg: cfg, gen: gen} })
}

// HandleFailure makes the pipeline its children's supervisor (protoactor
// prefers an actor that implements SupervisorStrategy): every child is
// stopped, since their epochs are void, and the failure reported once.
func (p *pipeline) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason any, _ any) {
	system.Logger().Error("pipeline actor failed; stopping the generation", slog.String("actor", child.Id), slog.Any("reason", reason))
	sup.StopChildren(sup.Children()...)
	if !p.dead {
		p.dead = true
		system.Root.Send(p.cfg.committer, &messages.PipelineFailed{Gen: p.gen, Actor: child.Id, Reason: fmt.Sprint(reason)})
	}
}

func (p *pipeline) Receive(c actor.Context) {
	if p.dead {
		return // the readers are about to be stopped too
	}
	switch m := c.Message().(type) {
	case *actor.Stopping:
		p.dead = true
	case *spawnReaders:
		for _, part := range sortedTPs(m.from) {
			props := actor.PropsFromProducer(newReader(p.cfg, p.gen, part, m.from[part], m.epoch, c.Self(), m.limits[part]))
			pid, err := c.SpawnNamed(props, fmt.Sprintf("reader-%s-%d", part.Topic, part.Partition))
			if err != nil {
				panic(fmt.Errorf("spawn reader %s: %w", part, err))
			}
			p.cfg.reg.setReader(p.gen, part, pid)
			p.readers = append(p.readers, pid)
		}
	case *sealReaders:
		for _, pid := range p.readers {
			c.Send(pid, m.seal)
		}
	case *routeRows:
		pid := p.cfg.reg.buffer(m.key)
		if pid == nil {
			p.nextID++
			id := fmt.Sprintf("buffer-%d", p.nextID)
			props := actor.PropsFromProducer(newBuffer(p.cfg.buffer, p.gen, m.key, m.values))
			var err error
			if pid, err = c.SpawnNamed(props, id); err != nil {
				panic(fmt.Errorf("spawn buffer %s: %w", m.key, err))
			}
			p.cfg.reg.setBuffer(p.gen, m.key, pid)
			// Given back by the buffer when it stops.
			p.cfg.buffer.budget.Add(p.gen, bufferMemory(m.key))
		}
		c.Send(pid, m.batch)
		c.Send(c.Sender(), &bufferFound{key: m.key, pid: pid})
	case *stopBuffers:
		for _, pid := range m.pids {
			c.Stop(pid)
		}
	}
}
