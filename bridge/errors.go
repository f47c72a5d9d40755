package bridge

import (
	"context"
	"errors"
	"net"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoEmbeddedServer is returned by New when nats.url is empty in a build
// without the embedded server (built with -tags nonatsserver, as the
// container image is).
var ErrNoEmbeddedServer = errors.New("bridge: this build has no embedded NATS server (built with -tags nonatsserver); set nats.url (NATS_URL) to an external server")

// transientErrs are the failures that go away by themselves: the server is
// restarting, unreachable for a while, or slow. Everything else (bad config,
// permissions, a message too large, a closed bridge) needs a human or a bug
// fix, and retrying would only hide it.
var transientErrs = []error{
	context.DeadlineExceeded,
	os.ErrDeadlineExceeded,
	nats.ErrTimeout,
	nats.ErrNoResponders,
	nats.ErrDisconnected,
	nats.ErrConnectionReconnecting,
	nats.ErrNoServers,
	nats.ErrStaleConnection,
	nats.ErrReconnectBufExceeded,
	nats.ErrSlowConsumer,
	jetstream.ErrNoStreamResponse,
	jetstream.ErrAsyncPublishTimeout,
	jetstream.ErrTooManyStalledMsgs,
	jetstream.ErrServerShutdown,
	jetstream.ErrJetStreamNotEnabled, // also what a restarting server answers
}

// IsTransient reports whether err is worth retrying inside the actor (with
// capped backoff) rather than escalating to the supervisor: timeouts, no
// responders, a disconnected or reconnecting connection, JetStream
// unavailable (HTTP-like code 503). Context cancellation, permission and
// validation errors, and a closed bridge are not transient. For joined
// errors (PublishDLQ) it is true when any part is transient.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	for _, t := range transientErrs {
		if errors.Is(err, t) {
			return true
		}
	}
	if apiErr := (*jetstream.APIError)(nil); errors.As(err, &apiErr) && apiErr.Code == 503 {
		return true
	}
	if netErr := net.Error(nil); errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	return false
}
