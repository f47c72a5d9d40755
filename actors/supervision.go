package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/deltaflow/deltaflow/bridge"
)

// restartStreak paces the restarts of one supervised thing (a top-level
// actor, or the pipeline): a capped exponential backoff over consecutive
// failures, the streak starting over after a minute without one.
// protoactor's own "exponential" backoff is linear and uncapped.
type restartStreak struct {
	failures int
	last     time.Time // of the latest failure
}

// fail counts a failure now and returns the streak's length so far and how
// long to wait before restarting.
func (s *restartStreak) fail(b Backoff) (n int, delay time.Duration) {
	if time.Since(s.last) > time.Minute {
		s.failures = 0
	}
	s.last = time.Now()
	delay = b.Delay(s.failures)
	s.failures++
	return s.failures, delay
}

// reportRestart counts a restart in deltaflow_actor_restarts_total under
// label and publishes the `restarted` event for actorPath.
func reportRestart(m *Metrics, o Outbox, label, actorPath, reason string, n int) {
	m.Restarts.WithLabelValues(label).Inc()
	o.Publish(&bridge.ActorEvent{Actor: actorPath, Action: bridge.ActorRestarted, Reason: reason, Restarts: n})
}

// restartStrategy is the guardian of a top-level actor (top-level actors
// ignore WithSupervisor): it restarts the failed actor after its streak's
// backoff and reports every restart.
type restartStrategy struct {
	name    string // the actor's name: the metric label and the event's actor
	backoff Backoff
	streak  restartStreak
	deps    *Deps
}

func (s *restartStrategy) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason any, _ any) {
	n, delay := s.streak.fail(s.backoff)
	s.deps.Logger.Error(s.name+" failed; restarting", "reason", reason, "restarts", n, "delay", delay)
	reportRestart(s.deps.Metrics, s.deps.Outbox, s.name, s.name, fmt.Sprint(reason), n)
	time.AfterFunc(delay, func() { sup.RestartChildren(child) })
}
