#!/usr/bin/env python3
"""A producer deltaflow did not write, for its Protobuf tests.

  protoproduce.py --brokers B --topic T --root DIR --proto FILE --message NAME
                  --registry URL --count N [--seed S] [--bad K]

Compiles the .proto files under DIR with protoc (grpcio-tools) and writes N
messages NAME (a full name) of FILE (relative to DIR) to topic T (partition
i % 3 for record i), each serialized by confluent-kafka's
ProtobufSerializer, which registers the schema under <T>-value and its
imports as references (Protobuf's well-known types are not), and frames it
in the Confluent wire format (basic auth from $SCHEMA_REGISTRY_USER_INFO).
Then K records framed like the others whose body is not Protobuf. Values are
drawn from the seed for every field; a scalar is left unset one time in
seven (it reads as its default) and a message or optional field one time in
four (it reads as null). Prints the records as the table should hold them,
as JSON rows rendered as deltars.py renders delta-rs's (rowjson.render),
sorted the same way.
"""
import argparse
import glob
import importlib
import os
import random
import struct
import sys
import tempfile

import grpc_tools
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf.descriptor import FieldDescriptor
from grpc_tools import protoc

from kafkaproduce import draw_instant, draw_text, produce, registry_client
from rowjson import render

INTS = {
    FieldDescriptor.TYPE_INT32: (-2**31, 2**31), FieldDescriptor.TYPE_SINT32: (-2**31, 2**31),
    FieldDescriptor.TYPE_SFIXED32: (-2**31, 2**31), FieldDescriptor.TYPE_INT64: (-2**63, 2**63),
    FieldDescriptor.TYPE_SINT64: (-2**63, 2**63), FieldDescriptor.TYPE_SFIXED64: (-2**63, 2**63),
    FieldDescriptor.TYPE_UINT32: (0, 2**32), FieldDescriptor.TYPE_FIXED32: (0, 2**32),
    # deltaflow keeps a uint64 in a long: those past it are dead letters.
    FieldDescriptor.TYPE_UINT64: (0, 2**63), FieldDescriptor.TYPE_FIXED64: (0, 2**63),
}


def message_class(root, proto, name):
    """The generated class of message name, compiling every .proto of root."""
    out = tempfile.mkdtemp()
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    files = [os.path.relpath(f, root) for f in glob.glob(os.path.join(root, "**", "*.proto"), recursive=True)]
    if protoc.main(["protoc", f"-I{root}", f"-I{include}", f"--python_out={out}", *files]) != 0:
        raise SystemExit(f"protoproduce.py: protoc failed on {files}")
    sys.path.insert(0, out)
    module = importlib.import_module(proto[:-len(".proto")].replace("/", ".") + "_pb2")
    return getattr(module, name.rsplit(".", 1)[-1])


def fill(rng, msg, field):
    """Set a random value of field in msg; return the value the table
    should hold for it."""
    if field.message_type is not None:
        if rng.random() < 0.25:
            return None
        kind = field.message_type.full_name
        if kind == "google.protobuf.Timestamp":
            ts = draw_instant(rng)
            getattr(msg, field.name).FromDatetime(ts)
            return ts
        if kind == "google.protobuf.DoubleValue":
            x = rng.uniform(-1e12, 1e12)
            getattr(msg, field.name).value = x
            return x
        raise SystemExit(f"protoproduce.py: no values for message {kind}")
    optional = field.has_presence
    if rng.random() < (0.25 if optional else 1 / 7):
        return None if optional else default(field)
    if field.type == FieldDescriptor.TYPE_ENUM:
        value = rng.choice(field.enum_type.values)
        setattr(msg, field.name, value.number)
        return value.name
    if field.type == FieldDescriptor.TYPE_STRING:
        v = draw_text(rng)
    elif field.type == FieldDescriptor.TYPE_BOOL:
        v = rng.random() < 0.5
    elif field.type in INTS:
        v = rng.randrange(*INTS[field.type])
    elif field.type == FieldDescriptor.TYPE_FLOAT:
        v = struct.unpack("<f", struct.pack("<f", rng.uniform(-1e6, 1e6)))[0]
    elif field.type == FieldDescriptor.TYPE_DOUBLE:
        v = rng.uniform(-1e12, 1e12)
    else:
        raise SystemExit(f"protoproduce.py: no values for field {field.name}")
    setattr(msg, field.name, v)
    return v


def default(field):
    """What an unset field without presence reads as."""
    if field.type == FieldDescriptor.TYPE_ENUM:
        return field.enum_type.values_by_number[0].name
    return field.default_value


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--brokers", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--root", required=True)
    p.add_argument("--proto", required=True)
    p.add_argument("--message", required=True)
    p.add_argument("--registry", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bad", type=int, default=0)
    args = p.parse_args()
    cls = message_class(args.root, args.proto, args.message)
    serializer = ProtobufSerializer(cls, registry_client(args.registry), {"use.deprecated.format": False})
    ctx = SerializationContext(args.topic, MessageField.VALUE)
    rng = random.Random(args.seed)
    values, rows = [], []
    for _ in range(args.count):
        msg = cls()
        row = {f.name: fill(rng, msg, f) for f in cls.DESCRIPTOR.fields}
        values.append(serializer(msg, ctx))
        rows.append({k: render(v) for k, v in row.items()})
    # The header of the last record (magic byte, id, index of the first
    # message), then a body that is no message of it.
    values += [values[-1][:6] + b"\xff\xff\xff not protobuf"] * args.bad
    produce("protoproduce.py", args.brokers, args.topic, values, rows)


if __name__ == "__main__":
    main()
