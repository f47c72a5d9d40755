package actors

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/messages"
)

// recheckPartitions is sent by the fetch loop to the committer when a fetch
// of the partitions failed with OFFSET_OUT_OF_RANGE (their offset left the
// log) or UNKNOWN_TOPIC_ID (the topic was deleted, maybe created again); the
// loop has held them. staleClient says the client fetches a topic ID the
// brokers no longer have.
type recheckPartitions struct {
	partitions  []tp
	staleClient bool
}

// recheckRetry paces rechecks that could not ask Kafka (a broker down, the
// topic deleted and not created again yet).
const recheckRetry = 2 * time.Second

// handleAssign checks the table's offsets of newly assigned partitions
// against their logs (startPartitions), spawns their readers and answers
// where each starts.
func (c *committer) handleAssign(ctx actor.Context, m *messages.Assign) {
	ps := make([]tp, len(m.Partitions))
	for i, p := range m.Partitions {
		ps[i] = tp{Topic: m.Topic, Partition: p}
	}
	c.startPartitions(ctx, ps, func(ctx actor.Context, next map[tp]int64, err error) {
		if err != nil {
			m.Reply <- messages.Assigned{Err: err}
			return
		}
		maps.Copy(c.base, nextOffsets(c.snap, c.cfg.app, ps))
		c.cfg.progress.setCommitted(c.base)
		fresh := map[tp]int64{}
		for _, p := range ps {
			delete(c.recheck, p)
			if !c.assigned[p] {
				c.assigned[p] = true
				fresh[p] = c.base[p]
			}
		}
		if c.life.running() && len(fresh) > 0 {
			c.life.spawnReaders(ctx, fresh, c.epoch, nil)
		}
		answer := make(map[int32]int64, len(ps))
		for _, p := range ps {
			answer[p.Partition] = next[p]
		}
		m.Reply <- messages.Assigned{Next: answer, Gen: c.life.gen}
	})
}

// starts is what recordStarts decided for partitions of one or more topics
// (a ledger.Plan per topic).
type starts struct {
	next      map[tp]int64 // an offset, or ledger.Held
	losses    []*ledger.DataLossError
	skip      bool
	refused   map[tp]error
	recovered map[tp]int64
}

// reason says why partition p is held ("" if it is not).
func (s *starts) reason(p tp) string {
	if err, ok := s.refused[p]; ok {
		return err.Error()
	}
	for _, l := range s.losses {
		if l.Topic == p.Topic && l.Partition == p.Partition {
			return l.Error()
		}
	}
	return ""
}

// startPartitions decides where partitions ps start and records it, off
// the actor (recordStarts: it asks Kafka and may commit); then, on it, it
// reports the losses, holds or releases each partition and calls then
// with the next offset of each (ledger.Held for a held one), or the error.
func (c *committer) startPartitions(ctx actor.Context, ps []tp, then func(actor.Context, map[tp]int64, error)) {
	work, snap := c.ctx, c.snap
	c.offActor(ctx, func() func(actor.Context) {
		st, err := c.cfg.recordStarts(work, snap, ps)
		return func(ctx actor.Context) {
			if err != nil {
				then(ctx, nil, err)
				return
			}
			for _, loss := range st.losses {
				c.reportLoss(loss, st.skip)
			}
			for p, err := range st.refused {
				c.cfg.logger.Error("partition held, not read: "+err.Error(), "topic", p.Topic, "partition", p.Partition)
			}
			for _, p := range ps {
				if st.next[p] == ledger.Held {
					c.hold(p, st.reason(p))
				} else {
					c.release(p)
				}
			}
			then(ctx, st.next, nil)
		}
	})
}

// recordStarts plans the starts of partitions ps, topic by topic
// (ledger.PlanStarts), and writes what must be durable before they are read
// (resolved start offsets, the resume points of skipped losses, recovered
// offsets, the topic ID) in a commit per topic after snap, which it
// advances. It runs off the actor: it reads nothing of the committer but
// its configuration.
func (cfg *committerConfig) recordStarts(ctx context.Context, snap *delta.Snapshot, ps []tp) (starts, error) {
	// The partitions' previous owner committed them up to its revocation,
	// after our snapshot was read: start where the log says now, not where
	// it said then (commitEpoch drops the epoch if we do not).
	if err := cfg.table.Update(ctx, snap); err != nil {
		cfg.logger.Warn("table not re-read on assignment; a stale start offset costs an epoch", "err", err)
	}
	out := starts{next: map[tp]int64{}, refused: map[tp]error{}, recovered: map[tp]int64{}, skip: cfg.starts.OnDataLoss == ledger.OnDataLossSkip}
	for topic, parts := range byTopic(ps) {
		var plan ledger.Plan
		v, err := ledger.Settle(ctx, cfg.table, snap, cfg.app, topic, func() (ledger.Change, error) {
			var err error
			if plan, err = cfg.planStarts(ctx, snap, topic, parts); err != nil {
				return ledger.Change{}, err
			}
			return ledger.Change{Next: plan.Write, TopicID: plan.TopicID,
				Op: plan.Operation(cfg.starts, ledger.TopicIDProperty(cfg.app, topic))}, nil
		})
		if err != nil {
			return starts{}, fmt.Errorf("record the start offsets of %s%v: %w", topic, parts, err)
		}
		if len(plan.Recovered) > 0 {
			cfg.logger.Warn("offsets past delta.setTransactionRetentionDuration found in the table's history; resuming there",
				"topic", topic, "last", plan.Recovered)
		}
		if v >= 0 {
			cfg.metrics.TableVersion.Set(float64(v))
			cfg.logger.Info("start offsets recorded", "version", v, "topic", topic, "next", plan.Write, "topic_id", plan.TopicID)
		}
		maps.Copy(out.next, ledger.Of(topic, plan.Next))
		maps.Copy(out.refused, ledger.Of(topic, plan.Refused))
		maps.Copy(out.recovered, ledger.Of(topic, plan.Recovered))
		out.losses = append(out.losses, plan.Losses...)
	}
	return out, nil
}

// planStarts asks Kafka for topic's logs and plans the starts of its
// partitions ps against what snap holds (ledger.ReadStarts).
func (cfg *committerConfig) planStarts(ctx context.Context, snap *delta.Snapshot, topic string, ps []int32) (ledger.Plan, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	logs, err := cfg.kafka.TopicLogs(ctx, topic)
	if err != nil {
		return ledger.Plan{}, err
	}
	ts, err := ledger.ReadStarts(ctx, cfg.table, snap, cfg.app, topic, ps)
	if err != nil {
		return ledger.Plan{}, err
	}
	return ledger.PlanStarts(ps, ts, logs, cfg.starts, cfg.app)
}

// reportLoss says, in the log, an event and the metrics, that loss was
// found and whether it is skipped or its partition held.
func (c *committer) reportLoss(loss *ledger.DataLossError, skipped bool) {
	action := "held"
	if skipped {
		action = "skipped"
	}
	part := partitionLabel(loss.Partition)
	c.cfg.metrics.DataLoss.WithLabelValues(loss.Topic, part, loss.Cause, action).Inc()
	attrs := []any{"topic", loss.Topic, "partition", loss.Partition, "cause", loss.Cause, "next_offset", loss.Next,
		"log_start", loss.Log.Start, "log_end", loss.Log.End, "records", loss.Lost()}
	if skipped {
		if n := loss.Lost(); n > 0 {
			c.cfg.metrics.DataLossRecords.WithLabelValues(loss.Topic, part).Add(float64(n))
		}
		c.cfg.logger.Warn("data loss skipped (kafka.on_data_loss: skip): "+loss.Error(), append(attrs, "resume_at", loss.Resume)...)
	} else {
		c.cfg.logger.Error("data loss: partition held, not read (kafka.on_data_loss: fail): "+loss.Error(), attrs...)
	}
	c.cfg.outbox.Publish(&bridge.DataLossEvent{Topic: loss.Topic, Partition: loss.Partition, Cause: loss.Cause, Action: action,
		Next: loss.Next, LogStart: loss.Log.Start, LogEnd: loss.Log.End, Records: loss.Lost(), ResumeAt: loss.Resume,
		TopicID: loss.ID, StoredID: loss.StoredID, Message: loss.Error()})
}

// hold marks an owned partition held for reason (a data loss, or a start
// refused): not read, the engine unhealthy until it is released.
func (c *committer) hold(p tp, reason string) {
	if reason == "" {
		reason = fmt.Sprintf("partition %s held", p)
	}
	c.held[p] = true
	c.cfg.metrics.Held.WithLabelValues(p.Topic, partitionLabel(p.Partition)).Set(1)
	c.cfg.health.Refuse(heldKey(p), reason)
	c.cfg.progress.setHeld(c.held)
}

// release undoes hold (a no-op for a partition not held).
func (c *committer) release(p tp) {
	if !c.held[p] {
		return
	}
	delete(c.held, p)
	c.cfg.metrics.Held.DeleteLabelValues(p.Topic, partitionLabel(p.Partition))
	c.cfg.health.Accept(heldKey(p))
	c.cfg.progress.setHeld(c.held)
}

func heldKey(p tp) string { return "kafka partition " + p.String() }

// runRechecks checks the partitions a fetch found out of the log once
// everything read of them is committed, so that only what was never read
// counts as lost, and no epoch is in flight. A partition held stays held;
// one skipped past its loss, or whose offset turns out to be in the log
// after all, is re-read from the table's offset by a new generation. A
// client fetching a topic ID the brokers no longer have is stale: once the
// table says what to do with the new topic, the process must restart
// (ErrTopicRecreated).
func (c *committer) runRechecks(ctx actor.Context) {
	if len(c.recheck) == 0 || c.cur != nil || !c.life.running() || c.busy {
		return
	}
	read := c.cfg.fetch.position(c.cfg.sink)
	var ready []tp
	for p := range c.recheck {
		if pos, ok := read[p]; ok && pos != c.base[p] {
			continue // records of it are read but not committed yet
		}
		ready = append(ready, p)
	}
	if len(ready) == 0 {
		return
	}
	slices.SortFunc(ready, ledger.CompareTP)
	c.startPartitions(ctx, ready, func(ctx actor.Context, next map[tp]int64, err error) {
		if err != nil {
			c.cfg.logger.Warn("partitions not checked against the Kafka log; trying again", "partitions", ready, "err", err)
			self, system := ctx.Self(), ctx.ActorSystem()
			time.AfterFunc(recheckRetry, func() { system.Root.Send(self, &recheckPartitions{}) })
			return
		}
		for _, p := range ready {
			delete(c.recheck, p)
		}
		if c.staleClient {
			c.staleClient = false
			c.cfg.fatal(ErrTopicRecreated)
			return
		}
		if slices.ContainsFunc(ready, func(p tp) bool { return next[p] != ledger.Held }) {
			c.abort(ctx, fmt.Sprintf("partitions %v checked against the Kafka log", ready), false)
		}
	})
}
