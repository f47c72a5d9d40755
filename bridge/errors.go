package bridge

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoEmbeddedServer is returned by New when nats.url is empty in a build
// without the embedded server (built with -tags nonatsserver, as the
// container image is).
var ErrNoEmbeddedServer = errors.New("bridge: this build has no embedded NATS server (built with -tags nonatsserver); set nats.url (NATS_URL) to an external server")

// ErrStoreFailed is wrapped by PublishDLQ when the DLQ stream answers but
// stores nothing: a write of its JetStream store failed (its disk was
// full), and nats-server then drops every write to the stream without an
// answer, even once the disk has room, until the store is opened again (a
// restart of JetStream or of the server). IsFull holds for it.
var ErrStoreFailed = errors.New("bridge: the DLQ stream's JetStream store failed a write")

// transientErrs are the failures that go away by themselves: the server is
// restarting, unreachable for a while, or slow. Those in permanentErrs (bad
// config, permissions, a message too large, a closed bridge) need a human
// or a bug fix, and retrying would only hide them; the engine fails on them
// at once and retries everything else.
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

// IsTransient reports whether err is known to go away by itself: timeouts,
// no responders, a disconnected or reconnecting connection, JetStream
// unavailable (HTTP-like code 503, but for a full store: see IsFull).
// Context cancellation, permission and validation errors, and a closed
// bridge are not transient. For joined
// errors (PublishDLQ) it is true when any part is transient. The engine's
// policy rests on IsPermanent, which never holds for a transient error:
// what is not permanent is retried with capped, jittered backoff.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	for _, t := range transientErrs {
		if errors.Is(err, t) {
			return true
		}
	}
	if apiErr := (*jetstream.APIError)(nil); errors.As(err, &apiErr) && apiErr.Code == 503 && !storeFull(apiErr) {
		return true
	}
	if netErr := net.Error(nil); errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	return false
}

// JetStream API errors of a store out of room, which nats.go names no
// constant for.
const (
	// jsErrInsufficientResources: the account's or server's JetStream
	// store is full.
	jsErrInsufficientResources jetstream.ErrorCode = 10023
	// jsErrStorageResourcesExceeded: a stream's max bytes cannot be
	// reserved in the store.
	jsErrStorageResourcesExceeded jetstream.ErrorCode = 10047
	// jsErrStreamStoreFailed: a message not stored; a stream at its limits
	// with discard new says which limit (storeLimits).
	jsErrStreamStoreFailed jetstream.ErrorCode = 10077
	// jsErrStreamNotMatch: a message expected another stream (the
	// Nats-Expected-Stream header), refused before it is stored.
	jsErrStreamNotMatch jetstream.ErrorCode = 10060
)

// storeLimits are the descriptions of jsErrStreamStoreFailed for a stream
// at its limits (nats-server's ErrMaxBytes, ErrMaxMsgs,
// ErrMaxMsgsPerSubject); its other causes (a message too large) are not
// about room.
var storeLimits = []string{"maximum bytes exceeded", "maximum messages exceeded", "maximum messages per subject exceeded"}

func storeFull(e *jetstream.APIError) bool {
	switch e.ErrorCode {
	case jsErrInsufficientResources, jsErrStorageResourcesExceeded:
		return true
	case jsErrStreamStoreFailed:
		return slices.Contains(storeLimits, e.Description)
	}
	return false
}

// IsFull reports whether err says a JetStream store has no room: the DLQ
// stream at nats.dlq_max_bytes, the account's or server's store full, or
// the stream's store failed a write on a full disk (ErrStoreFailed). It is
// neither transient (room is not made by waiting a few seconds, but by
// letters expiring, a purge, a larger bound or a larger disk) nor
// permanent (making room cures it without a restart of deltaflow): the
// engine keeps retrying and reports itself unhealthy meanwhile.
func IsFull(err error) bool {
	apiErr := (*jetstream.APIError)(nil)
	return errors.Is(err, ErrStoreFailed) || errors.As(err, &apiErr) && storeFull(apiErr)
}

// permanentErrs are the failures a retry cannot cure: the credentials or
// permissions are wrong, the request can never be valid, the bridge is
// closed or was never configured right.
var permanentErrs = []error{
	nats.ErrConnectionClosed, // a closed bridge
	nats.ErrAuthorization,
	nats.ErrAuthExpired,
	nats.ErrAuthRevoked,
	nats.ErrAccountAuthExpired,
	nats.ErrPermissionViolation,
	nats.ErrMaxPayload,
	nats.ErrBadSubject,
	nats.ErrInvalidMsg,
	ErrInvalidConfig,
	ErrInvalidOption,
	ErrNoEmbeddedServer,
}

// permanentAPICodes are the JetStream API errors no retry cures: a request
// the server rejects as malformed, or a message larger than the stream
// takes. (Other 400s, a stale KV revision say, are conflicts their caller
// resolves.)
var permanentAPICodes = []jetstream.ErrorCode{
	jetstream.JSErrCodeBadRequest,
	jetstream.JSErrCodeStreamMessageExceedsMaximum,
}

// IsPermanent reports whether err needs a human or a bug fix rather than a
// retry: authorization and permission errors, a request the server can
// never accept, a closed bridge, a bad configuration. It never holds for an
// error IsTransient accepts, so a joined error with one transient part is
// retried. Errors neither function knows are for the caller's policy (the
// engine retries them).
func IsPermanent(err error) bool {
	if err == nil || IsTransient(err) {
		return false
	}
	for _, p := range permanentErrs {
		if errors.Is(err, p) {
			return true
		}
	}
	if apiErr := (*jetstream.APIError)(nil); errors.As(err, &apiErr) {
		return apiErr.Code == 401 || apiErr.Code == 403 || slices.Contains(permanentAPICodes, apiErr.ErrorCode)
	}
	return false
}

// IsTooLarge reports whether err says a message is larger than the server
// or the stream takes (nats.ErrMaxPayload, or JetStream's "message size
// exceeds maximum allowed"): it follows the message, and sending it again
// fails the same way.
func IsTooLarge(err error) bool {
	if errors.Is(err, nats.ErrMaxPayload) {
		return true
	}
	apiErr := (*jetstream.APIError)(nil)
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum
}
