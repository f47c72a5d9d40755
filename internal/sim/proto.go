package sim

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// ProtoField is a singular field of a message descriptor: name, number,
// type and, for a message or enum, its full type name (".pkg.Name").
func ProtoField(name string, n int32, typ descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
	f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(n), Type: typ.Enum(),
		Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String(name)}
	if typeName != "" {
		f.TypeName = proto.String(typeName)
	}
	return f
}

// ProtoFile is the sensor event as a Protobuf producer would declare it
// (for `deltaflow bench --format protobuf`), a file descriptor of
//
//	syntax = "proto3"; package deltaflow.bench;
//	import "google/protobuf/timestamp.proto"; import "google/protobuf/wrappers.proto";
//	message SensorEvent {
//	  string device_id = 1; string device_type = 2; google.protobuf.Timestamp ingested_at = 3;
//	  Payload payload = 4;
//	  message Payload {
//	    int32 linkquality = 1; google.protobuf.BoolValue contact = 2; google.protobuf.Int32Value battery = 3;
//	    google.protobuf.DoubleValue power = 4; ... voltage = 5; ... current = 6; ... energy = 7;
//	    google.protobuf.StringValue state = 8;
//	  }
//	}
//
// (the fields a device type does not have are wrappers, so they read null).
func ProtoFile() *descriptorpb.FileDescriptorProto {
	field := ProtoField
	const msg = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
	return &descriptorpb.FileDescriptorProto{
		Name: proto.String("deltaflow/bench/sensor.proto"), Package: proto.String("deltaflow.bench"), Syntax: proto.String("proto3"),
		Dependency: []string{"google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto"},
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("SensorEvent"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("device_id", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""),
				field("device_type", 2, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""),
				field("ingested_at", 3, msg, ".google.protobuf.Timestamp"),
				field("payload", 4, msg, ".deltaflow.bench.SensorEvent.Payload"),
			},
			NestedType: []*descriptorpb.DescriptorProto{{Name: proto.String("Payload"), Field: []*descriptorpb.FieldDescriptorProto{
				field("linkquality", 1, descriptorpb.FieldDescriptorProto_TYPE_INT32, ""),
				field("contact", 2, msg, ".google.protobuf.BoolValue"),
				field("battery", 3, msg, ".google.protobuf.Int32Value"),
				field("power", 4, msg, ".google.protobuf.DoubleValue"),
				field("voltage", 5, msg, ".google.protobuf.DoubleValue"),
				field("current", 6, msg, ".google.protobuf.DoubleValue"),
				field("energy", 7, msg, ".google.protobuf.DoubleValue"),
				field("state", 8, msg, ".google.protobuf.StringValue"),
			}}},
		}},
	}
}
