package bench

import (
	"encoding/base64"
	"fmt"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deltaflow/deltaflow/internal/sim"
)

// FormatProtobuf is the sensor events as Protobuf messages through a
// schema registry (Options.Format).
const FormatProtobuf = "protobuf"

// protoTopic is a Protobuf throughput run's registry, sim.ProtoFile
// registered in the registry's serialized form, and the message it
// encodes.
type protoTopic struct {
	registryRun
	event protoreflect.MessageDescriptor
}

func newProtoTopic(dir, topic string) (*protoTopic, error) {
	fdp := sim.ProtoFile()
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		return nil, fmt.Errorf("the sensor schema: %w", err)
	}
	b, err := proto.Marshal(fdp)
	if err != nil {
		return nil, err
	}
	r, err := newRegistryRun(dir, topic, FormatProtobuf, sr.Schema{Type: sr.TypeProtobuf, Schema: base64.StdEncoding.EncodeToString(b)})
	if err != nil {
		return nil, err
	}
	return &protoTopic{registryRun: r, event: fd.Messages().Get(0)}, nil
}

// encode appends ev as the registry's wire format of sim.ProtoFile's first
// message to b, marshaled by protobuf-go: an encoder deltaflow did not
// write.
func (p *protoTopic) encode(b []byte, ev sim.Event) ([]byte, error) {
	m := dynamicpb.NewMessage(p.event)
	fs := p.event.Fields()
	m.Set(fs.ByName("device_id"), protoreflect.ValueOfString(ev.DeviceID))
	m.Set(fs.ByName("device_type"), protoreflect.ValueOfString(ev.DeviceType))
	m.Set(fs.ByName("ingested_at"), protoreflect.ValueOfMessage(timestamppb.New(ev.IngestedAt).ProtoReflect()))
	payload := m.NewField(fs.ByName("payload")).Message()
	pf := payload.Descriptor().Fields()
	set := func(name string, v proto.Message) {
		payload.Set(pf.ByName(protoreflect.Name(name)), protoreflect.ValueOfMessage(v.ProtoReflect()))
	}
	payload.Set(pf.ByName("linkquality"), protoreflect.ValueOfInt32(int32(ev.LinkQuality)))
	if ev.DeviceType == sim.SmartPlug {
		set("power", wrapperspb.Double(ev.Power))
		set("voltage", wrapperspb.Double(ev.Voltage))
		set("current", wrapperspb.Double(ev.Current))
		set("energy", wrapperspb.Double(ev.Energy))
		set("state", wrapperspb.String(ev.State))
	} else {
		set("contact", wrapperspb.Bool(ev.Contact))
		set("battery", wrapperspb.Int32(int32(ev.Battery)))
	}
	m.Set(fs.ByName("payload"), protoreflect.ValueOfMessage(payload))
	return sr.AppendEncode(b, m, new(sr.ConfluentHeader), p.id, []int{0}, func(b []byte, v any) ([]byte, error) {
		return proto.MarshalOptions{}.MarshalAppend(b, v.(proto.Message))
	})
}
