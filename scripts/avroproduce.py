#!/usr/bin/env python3
"""A producer deltaflow did not write, for its Avro tests.

  avroproduce.py --brokers B --topic T --schema FILE --count N [--seed S] [--bad K]
                 [--registry URL [--key-schema FILE]]

Writes N records of the record schema in FILE to topic T (partition i % 3
for record i), each an Avro binary body written by fastavro's
schemaless_writer (no header), produced by confluent-kafka; then K records
that are not Avro of the schema. With --registry, each record is written
by confluent-kafka's AvroSerializer instead, which registers the schema
under the subject <T>-value and frames the body in the Confluent wire
format (basic auth from $SCHEMA_REGISTRY_USER_INFO, user:password); with
--key-schema, each record also has a key of that record schema, written by
an AvroSerializer under the subject <T>-key, whose fields the printed rows
hold as key_<field>. Values are drawn from the seed for every
field of the types deltaflow derives columns from (null in a nullable union
one time in four; decimals of up to their precision's digits, either
sign; records, arrays and maps of them, with 0 to 3 items or entries). Prints the records as the table should hold them, as
JSON rows rendered as deltars.py renders delta-rs's (rowjson.render), sorted
the same way.
"""
import argparse
import datetime
import decimal
import io
import json
import random
import struct
import uuid

import fastavro

from kafkaproduce import draw_day, draw_instant, draw_text, produce, registry_client
from rowjson import render

def value(rng, typ, named):
    """A random value of Avro type typ (as fastavro takes it) and the value
    the table should hold for it."""
    if isinstance(typ, list):  # ["null", T]
        if rng.random() < 0.25:
            return None, None
        return value(rng, [t for t in typ if t != "null"][0], named)
    if isinstance(typ, str) and typ in named:
        typ = named[typ]
    if isinstance(typ, dict):
        logical = typ.get("logicalType")
        base = typ["type"]
        if base == "enum":
            named[typ["name"]] = typ
            s = rng.choice(typ["symbols"])
            return s, s
        if logical == "date":
            d = draw_day(rng)
            return d, d
        if logical in ("timestamp-millis", "timestamp-micros"):
            ts = draw_instant(rng, 1000 if logical == "timestamp-millis" else 1)
            return ts, ts
        if logical in ("local-timestamp-millis", "local-timestamp-micros"):
            # A wall clock: a naive datetime, as fastavro writes one.
            ts = draw_instant(rng, 1000 if logical == "local-timestamp-millis" else 1).replace(tzinfo=None)
            return ts, ts
        if logical == "time-millis":
            ms = rng.randrange(0, 86_400_000)
            return datetime.time(ms // 3_600_000, ms // 60_000 % 60, ms // 1000 % 60, ms % 1000 * 1000), ms
        if logical == "uuid":
            u = str(uuid.UUID(int=rng.getrandbits(128)))
            return u, u
        if logical == "decimal":  # bytes or fixed: up to precision digits at the scale, either sign
            d = draw_decimal(rng, typ["precision"], typ.get("scale", 0))
            return d, d
        if base == "record":
            named[typ["name"]] = typ
            return draw_record(rng, typ, named)
        if base == "array":  # 0 to 3 items
            items = [value(rng, typ["items"], named) for _ in range(rng.randrange(4))]
            return [v for v, _ in items], [r for _, r in items]
        if base == "map":  # 0 to 3 entries; the table's map is its entries, in order, as pyarrow reads one
            entries = {draw_text(rng): value(rng, typ["values"], named) for _ in range(rng.randrange(4))}
            return {k: v for k, (v, _) in entries.items()}, [[k, r] for k, (_, r) in entries.items()]
        if base == "fixed":
            named[typ["name"]] = typ
            b = rng.randbytes(typ["size"])
            return b, b
        return value(rng, base, named)
    if typ == "string":
        s = draw_text(rng)
        return s, s
    if typ == "boolean":
        b = rng.random() < 0.5
        return b, b
    if typ == "int":
        n = rng.randrange(-2**31, 2**31)
        return n, n
    if typ == "long":
        n = rng.randrange(-2**63, 2**63)
        return n, n
    if typ == "float":
        x = struct.unpack("<f", struct.pack("<f", rng.uniform(-1e6, 1e6)))[0]
        return x, x
    if typ == "double":
        x = rng.uniform(-1e12, 1e12)
        return x, x
    if typ == "bytes":
        b = rng.randbytes(rng.randrange(0, 9))
        return b, b
    raise SystemExit(f"avroproduce.py: no values for type {typ!r}")


def draw_decimal(rng, precision, scale):
    """A decimal of 1 to precision digits (a zero one time in eight), scale
    of them after the point, built from its digits: Decimal arithmetic
    would round it to the context's 28 digits."""
    unscaled = 0 if rng.random() < 0.125 else rng.randrange(10 ** rng.randrange(1, precision + 1))
    sign = rng.randrange(2) if unscaled else 0  # no negative zero: no table holds one
    return decimal.Decimal((sign, tuple(int(c) for c in str(unscaled)), -scale))


def schemaless(schema):
    """An encoder of bodies without a header."""
    def encode(rec):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, rec)
        return buf.getvalue()
    return encode


def registry_serializer(url, schema_str, topic, field="value"):
    """confluent-kafka's AvroSerializer of the record's field (value or
    key), registering schema_str."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(registry_client(url), schema_str)
    ctx = SerializationContext(topic, MessageField.KEY if field == "key" else MessageField.VALUE)
    return lambda rec: serializer(rec, ctx)


def draw_record(rng, raw, named, prefix=""):
    """A random record of the record schema raw and its row (the fields
    named prefix + name)."""
    rec, row = {}, {}
    for field in raw["fields"]:
        rec[field["name"]], row[prefix + field["name"]] = value(rng, field["type"], named)
    return rec, row


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--brokers", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--schema", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bad", type=int, default=0)
    p.add_argument("--registry")
    p.add_argument("--key-schema")
    args = p.parse_args()
    with open(args.schema) as f:
        raw = json.load(f)
    schema = fastavro.parse_schema(raw)
    encode = schemaless(schema)
    if args.registry:
        encode = registry_serializer(args.registry, json.dumps(raw), args.topic)
    key_raw, encode_key, keys = None, None, None
    if args.key_schema:
        with open(args.key_schema) as f:
            key_raw = json.load(f)
        encode_key, keys = registry_serializer(args.registry, json.dumps(key_raw), args.topic, "key"), []
    rng = random.Random(args.seed)
    values, rows = [], []
    named = {}
    for _ in range(args.count):
        rec, row = draw_record(rng, raw, named)
        values.append(encode(rec))
        if key_raw:
            key, key_row = draw_record(rng, key_raw, named, "key_")
            keys.append(encode_key(key))
            row.update(key_row)
        rows.append({k: render(v) for k, v in row.items()})
    values += [b"\xff\xff\xff not avro"] * args.bad
    if keys is not None:
        keys += [None] * args.bad
    produce("avroproduce.py", args.brokers, args.topic, values, rows, keys)

if __name__ == "__main__":
    main()
