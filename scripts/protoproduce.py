#!/usr/bin/env python3
"""A producer deltaflow did not write, for its Protobuf tests.

  protoproduce.py --brokers B --topic T --root DIR --proto FILE --message NAME
                  (--registry URL | --plain) --count N [--seed S] [--bad K]

Compiles the .proto files under DIR with protoc (grpcio-tools) and writes N
messages NAME (a full name) of FILE (relative to DIR) to topic T (partition
i % 3 for record i), each serialized by confluent-kafka's
ProtobufSerializer, which registers the schema under <T>-value and its
imports as references (Protobuf's well-known types are not), and frames it
in the Confluent wire format (basic auth from $SCHEMA_REGISTRY_USER_INFO);
with --plain, as the plain body protobuf's SerializeToString writes, for a
topic without a registry. Then K records framed like the others whose body
is not Protobuf. Values are drawn from the seed for every field; a scalar is
left unset one time in seven (it reads as its default) and a message or
optional field one time in four (it reads as null); one member of a oneof,
or none, is set. Prints the records as the table should hold them, as JSON
rows rendered as deltars.py renders delta-rs's (rowjson.render), sorted the
same way: the fields of a nested message (not a well-known type) as columns
<field>_<name>, a repeated field as the list of its values, a map of scalars
as the list of its [key, value] entries in key order (the serializer writes
them in an order of its own).
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


def fill_message(rng, msg):
    """Set random values in msg's fields; return the row the table should
    hold of them (see the module's doc)."""
    # Of a oneof of several members, the one set (None: none is).
    chosen = {o.name: rng.choice([*o.fields, None]) for o in msg.DESCRIPTOR.oneofs if len(o.fields) > 1}
    row = {}
    for f in msg.DESCRIPTOR.fields:
        oneof = f.containing_oneof
        if oneof is not None and oneof.name in chosen and chosen[oneof.name] is not f:
            row[f.name] = None
        elif f.message_type is not None and f.message_type.GetOptions().map_entry:
            # 0 to 3 entries of scalars, in key order (the body's order is
            # the serializer's).
            entries = {}
            for _ in range(rng.randrange(4)):
                k, _ = scalar(rng, f.message_type.fields_by_name["key"])
                v, held = scalar(rng, f.message_type.fields_by_name["value"])
                getattr(msg, f.name)[k] = v
                entries[k] = held
            row[f.name] = [[k, entries[k]] for k in sorted(entries)]
        elif f.is_repeated:
            values = [scalar(rng, f) for _ in range(rng.randrange(4))]
            getattr(msg, f.name).extend(v for v, _ in values)
            row[f.name] = [held for _, held in values]
        elif f.message_type is not None and f.message_type.full_name not in WELL_KNOWN:
            sub = getattr(msg, f.name)
            values = fill_message(rng, sub)
            sub.SetInParent()  # present even with every field left at its default
            if rng.random() < 0.25:
                msg.ClearField(f.name)
                values = dict.fromkeys(values)
            row.update({f"{f.name}_{k}": v for k, v in values.items()})
        else:
            row[f.name] = fill(rng, msg, f)
    return row


# The messages fill reads as one value.
WELL_KNOWN = {"google.protobuf.Timestamp", "google.protobuf.DoubleValue"}


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
    v, held = scalar(rng, field)
    setattr(msg, field.name, v)
    return held


def scalar(rng, field):
    """A random value of scalar field, and the value the table should hold
    for it."""
    if field.type == FieldDescriptor.TYPE_ENUM:
        value = rng.choice(field.enum_type.values)
        return value.number, value.name
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
    return v, v


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
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--registry")
    mode.add_argument("--plain", action="store_true")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bad", type=int, default=0)
    args = p.parse_args()
    cls = message_class(args.root, args.proto, args.message)
    if args.plain:
        serialize = cls.SerializeToString
    else:
        serializer = ProtobufSerializer(cls, registry_client(args.registry), {"use.deprecated.format": False})
        ctx = SerializationContext(args.topic, MessageField.VALUE)

        def serialize(msg):
            return serializer(msg, ctx)
    rng = random.Random(args.seed)
    values, rows = [], []
    for _ in range(args.count):
        msg = cls()
        row = fill_message(rng, msg)
        values.append(serialize(msg))
        rows.append({k: render(v) for k, v in row.items()})
    # The header of the last record (magic byte, id, index of the first
    # message; none of a plain body), then a body that is no message of it.
    header = b"" if args.plain else values[-1][:6]
    values += [header + b"\xff\xff\xff not protobuf"] * args.bad
    produce("protoproduce.py", args.brokers, args.topic, values, rows)


if __name__ == "__main__":
    main()
