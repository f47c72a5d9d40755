package actors

import (
	"context"
	"time"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/messages"
)

// Outbox is what the committer needs of the NATS bridge: the DLQ (which
// must acknowledge before an epoch commits), events, and the KV mirror of
// recovery offsets (a hint; the Delta log is the authority).
type Outbox interface {
	PublishDLQ(ctx context.Context, letters []messages.DeadLetter) error
	Publish(ev bridge.Event)
	MirrorOffset(topic string, partition int32, offset, version int64)
}

// NewOutbox adapts a bridge to Outbox.
func NewOutbox(b *bridge.Bridge) Outbox { return bridgeOutbox{b} }

type bridgeOutbox struct{ b *bridge.Bridge }

func (o bridgeOutbox) PublishDLQ(ctx context.Context, letters []messages.DeadLetter) error {
	return o.b.PublishDLQ(ctx, letters)
}

// Publish is fire-and-forget: events never hold up ingestion (nats.go
// buffers them while reconnecting).
func (o bridgeOutbox) Publish(ev bridge.Event) { _ = o.b.Publish(ev) }

func (o bridgeOutbox) MirrorOffset(topic string, partition int32, offset, version int64) {
	o.b.Mirror().Update(topic, partition, bridge.OffsetRecord{Offset: offset, Version: version, Time: time.Now()})
}
