package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/micro"
)

// ServiceName is the micro service name `nats micro ls` lists.
const ServiceName = "deltaflow"

// controlTimeout bounds one control request; a flush waits for a commit.
const controlTimeout = 30 * time.Second

// ErrControlStarted is returned by StartControl when the service runs.
var ErrControlStarted = errors.New("bridge: control service already started")

// Controller is what the control service calls; the committer side
// implements it. Each method is called with a context bounded to 30s and
// may block until done.
type Controller interface {
	// Status returns a JSON-encodable snapshot (version, epoch, lag, ...).
	Status(ctx context.Context) (any, error)
	// Flush starts an epoch now and returns once it is committed.
	Flush(ctx context.Context) error
	// Pause stops fetching from Kafka for d (0: control.max_pause);
	// committed data is unaffected. A d it refuses is an ErrBadRequest.
	Pause(ctx context.Context, d time.Duration) error
	// Resume undoes Pause.
	Resume(ctx context.Context) error
}

// ErrBadRequest marks a control request refused for what it asks: the
// service answers it 400.
var ErrBadRequest = errors.New("bad request")

// PauseRequest is the body a pause takes; an empty body (or {}) pauses
// for control.max_pause.
type PauseRequest struct {
	// Duration is how long the pause lasts, in Go syntax ("30s", "10m"),
	// at most control.max_pause.
	Duration string `json:"duration"`
}

// StatusReply is the status endpoint's answer.
type StatusReply struct {
	Version       string                     `json:"version" doc:"deltaflow's version"`
	Table         string                     `json:"table" doc:"the table's name"`
	TableVersion  int64                      `json:"table_version" doc:"the table's latest version"`
	Committed     map[string]map[int32]int64 `json:"committed" doc:"per topic and partition, the next offset to read according to the table (everything before it is committed)"`
	Positions     map[string]map[int32]int64 `json:"positions" doc:"per topic and partition, the next offset the fetch loop hands the readers"`
	BufferedBytes int64                      `json:"buffered_bytes" doc:"bytes read and not yet committed, as the memory budget counts them"`
	Healthy       bool                       `json:"healthy" doc:"false while something is degraded (as /healthz)"`
	Degraded      map[string]string          `json:"degraded,omitempty" doc:"what is degraded and why, when something is"`
	PausedUntil   *time.Time                 `json:"paused_until,omitempty" doc:"when a pause by the control service ends by itself; absent while reading"`
}

// okReply answers flush, pause and resume.
type okReply struct {
	OK bool `json:"ok"`
}

// StartControl registers the micro service "deltaflow" with the endpoints
// status, flush, pause and resume in the group deltaflow.<table>.control,
// so `nats micro ls`, `nats micro info deltaflow` and
// `nats req deltaflow.<table>.control.status ”` work. Controller errors are
// answered as micro errors (code 500; 504 on timeout).
//
// The endpoints use no queue group: with several instances writing one
// table, a pause or flush reaches every one of them (the requester sees the
// first answer; `nats req --replies=0` shows all). Access is whatever the
// server's authorization grants the requester on these subjects.
func (b *Bridge) StartControl(ctrl Controller) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("start control service: bridge closed")
	}
	if b.control != nil {
		return ErrControlStarted
	}
	svc, err := micro.AddService(b.nc, micro.Config{
		Name:               ServiceName,
		Version:            b.build.version,
		Description:        "deltaflow control for table " + b.table,
		Metadata:           map[string]string{"table": b.table},
		QueueGroupDisabled: true,
		ErrorHandler: func(_ micro.Service, e *micro.NATSError) {
			b.logger.Warn("control service error", "subject", e.Subject, "err", e.Description)
		},
	})
	if err != nil {
		return fmt.Errorf("start control service: %w", err)
	}
	grp := svc.AddGroup(ControlGroup(b.table), micro.WithGroupQueueGroupDisabled())
	endpoints := []struct {
		name string
		call func(context.Context, []byte) (any, error)
	}{
		{ControlStatus, noBody(ControlStatus, ctrl.Status)},
		{ControlFlush, noBody(ControlFlush, okCall(ctrl.Flush))},
		{ControlPause, pauseCall(ctrl.Pause)},
		{ControlResume, noBody(ControlResume, okCall(ctrl.Resume))},
	}
	for _, ep := range endpoints {
		if err := grp.AddEndpoint(ep.name, b.controlHandler(ep.name, ep.call)); err != nil {
			_ = svc.Stop()
			return fmt.Errorf("add control endpoint %s: %w", ep.name, err)
		}
	}
	// A round trip to the server, so its subscriptions are in place when
	// this returns: a request right after start must find a responder.
	if err := b.nc.FlushTimeout(5 * time.Second); err != nil {
		b.logger.Warn("control service subscriptions not confirmed by the server", "err", err)
	}
	b.control = svc
	b.logger.Info("control service started", "group", ControlGroup(b.table))
	return nil
}

func okCall(f func(context.Context) error) func(context.Context) (any, error) {
	return func(ctx context.Context) (any, error) {
		if err := f(ctx); err != nil {
			return nil, err
		}
		return okReply{OK: true}, nil
	}
}

// noBody refuses a request with a body (but {}) to an endpoint that takes
// none, rather than doing something other than what it asked.
func noBody(name string, call func(context.Context) (any, error)) func(context.Context, []byte) (any, error) {
	return func(ctx context.Context, body []byte) (any, error) {
		if b := bytes.TrimSpace(body); len(b) > 0 && string(b) != "{}" {
			return nil, fmt.Errorf("%w: %s: takes no body, got %s", ErrBadRequest, name, quoteBody(b))
		}
		return call(ctx)
	}
}

// pauseCall parses a pause's body (PauseRequest) for the controller.
func pauseCall(pause func(context.Context, time.Duration) error) func(context.Context, []byte) (any, error) {
	return func(ctx context.Context, body []byte) (any, error) {
		d, err := pauseDuration(body)
		if err != nil {
			return nil, err
		}
		return okCall(func(ctx context.Context) error { return pause(ctx, d) })(ctx)
	}
}

// pauseDuration is the duration a pause's body asks for (0: none).
func pauseDuration(body []byte) (time.Duration, error) {
	b := bytes.TrimSpace(body)
	if len(b) == 0 {
		return 0, nil
	}
	var req PauseRequest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return 0, fmt.Errorf(`%w: pause: the body is not empty or {"duration": "30s"}: %v (got %s)`, ErrBadRequest, err, quoteBody(b))
	}
	if req.Duration == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(req.Duration)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w: pause: duration %q is not a duration (Go syntax: 30s, 10m, 1h)", ErrBadRequest, req.Duration)
	case d <= 0:
		return 0, fmt.Errorf("%w: pause: duration %s must be positive", ErrBadRequest, d)
	}
	return d, nil
}

// quoteBody quotes a request body for an error, cut to 40 bytes.
func quoteBody(b []byte) string {
	if len(b) > 40 {
		return strconv.Quote(string(b[:40])) + "…"
	}
	return strconv.Quote(string(b))
}

func (b *Bridge) controlHandler(name string, call func(context.Context, []byte) (any, error)) micro.HandlerFunc {
	return func(req micro.Request) {
		ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
		defer cancel()
		res, err := call(ctx, req.Data())
		if err != nil {
			code := "500"
			switch {
			case errors.Is(err, ErrBadRequest):
				code = "400"
			case errors.Is(err, context.DeadlineExceeded):
				code = "504"
			}
			b.logger.Warn("control request failed", "endpoint", name, "err", err)
			_ = req.Error(code, oneLine(err.Error()), nil)
			return
		}
		if err := req.RespondJSON(res); err != nil {
			b.logger.Warn("control reply failed", "endpoint", name, "err", err)
			if errors.Is(err, micro.ErrMarshalResponse) {
				_ = req.Error("500", oneLine(err.Error()), nil)
			}
		}
	}
}
