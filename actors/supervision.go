package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/deltaflow/deltaflow/bridge"
)

// streakReset is how long without a failure ends a failure streak.
const streakReset = time.Minute

// failureStreak counts consecutive failures, for a backoff that grows with
// them: pipeline rebuilds and actor restarts wait longer the more often
// they fail, and start over after a minute without failure.
type failureStreak struct {
	n    int       // failures in the streak
	last time.Time // the latest one
}

// fail records a failure at now. It returns the wait before recovering
// (backoff's delay for the streak so far) and the streak's length with
// this failure.
func (s *failureStreak) fail(now time.Time, backoff Backoff) (delay time.Duration, n int) {
	if now.Sub(s.last) > streakReset {
		s.n = 0
	}
	s.last = now
	delay = backoff.Delay(s.n)
	s.n++
	return delay, s.n
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
	name    string // the actor's name: the event's actor
	label   string // its kind: the metric label (committer, maintenance)
	backoff Backoff
	streak  failureStreak
	metrics *Metrics
	outbox  Outbox
	logger  *slog.Logger
}

func (s *restartStrategy) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason any, _ any) {
	delay, n := s.streak.fail(time.Now(), s.backoff)
	s.logger.Error(s.name+" failed; restarting", "reason", reason, "restarts", n, "delay", delay)
	reportRestart(s.metrics, s.outbox, s.label, s.name, fmt.Sprint(reason), n)
	time.AfterFunc(delay, func() { sup.RestartChildren(child) })
}
