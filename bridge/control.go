package bridge

import (
	"context"
	"errors"
	"fmt"
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
	// Pause stops fetching from Kafka; committed data is unaffected.
	Pause(ctx context.Context) error
	// Resume undoes Pause.
	Resume(ctx context.Context) error
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
		call func(context.Context) (any, error)
	}{
		{ControlStatus, ctrl.Status},
		{ControlFlush, okCall(ctrl.Flush)},
		{ControlPause, okCall(ctrl.Pause)},
		{ControlResume, okCall(ctrl.Resume)},
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

func (b *Bridge) controlHandler(name string, call func(context.Context) (any, error)) micro.HandlerFunc {
	return func(req micro.Request) {
		ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
		defer cancel()
		res, err := call(ctx)
		if err != nil {
			code := "500"
			if errors.Is(err, context.DeadlineExceeded) {
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
