#!/usr/bin/env python3
"""A producer deltaflow did not write, for its JSON Schema tests.

  jsonschemaproduce.py --brokers B --topic T --schema FILE --registry URL --count N
                       [--seed S] [--bad K]

Writes N records of the JSON Schema in FILE to topic T (partition i % 3 for
record i), each serialized by confluent-kafka's JSONSerializer, which
validates it, registers the schema under the subject <T>-value and frames
the body in the Confluent wire format (basic auth from
$SCHEMA_REGISTRY_USER_INFO, user:password). Then K records the schema
refuses, framed with the registered schema's id as a producer that does not
validate would write them (the first integer property a string). Values are
drawn from the seed for every property (one that is nullable or not
required is null or left out one time in four). Prints the records as the table should hold them,
as JSON rows rendered as deltars.py renders delta-rs's (rowjson.render),
sorted the same way.
"""
import argparse
import datetime
import json
import random
import struct

from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafkaproduce import draw_day, draw_instant, draw_text, produce, registry_client
from rowjson import render


def deref(prop, root):
    """The schema a local $ref names."""
    while "$ref" in prop:
        node = root
        for key in prop["$ref"].lstrip("#/").split("/"):
            node = node[key]
        prop = node
    return prop


def kind(prop, root):
    """A property's one non-null type, its format, and whether it is nullable."""
    prop = deref(prop, root)
    if "type" in prop:
        types = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
        rest = [t for t in types if t != "null"]
        return rest[0], prop.get("format"), prop, len(rest) < len(types)
    for branch in prop.get("oneOf", []) + prop.get("anyOf", []):
        branch = deref(branch, root)
        if branch.get("type") != "null":
            typ, fmt, inner, _ = kind(branch, root)
            return typ, fmt, inner, True
    raise SystemExit(f"jsonschemaproduce.py: no type in {prop!r}")


def value(rng, typ, fmt, prop, root):
    """A random value of a property (as the record holds it) and the value
    the table should hold for it: an object's every property (a struct
    column's fields), an array's 0 to 3 items."""
    if typ == "object":
        rec, row = {}, {}
        for name, p in prop["properties"].items():
            t, f, inner, _ = kind(p, root)
            rec[name], row[name] = value(rng, t, f, inner, root)
        return rec, row
    if typ == "array":
        t, f, inner, _ = kind(prop["items"], root)
        items = [value(rng, t, f, inner, root) for _ in range(rng.randrange(4))]
        return [v for v, _ in items], [r for _, r in items]
    if typ == "string" and fmt == "date-time":
        ts = draw_instant(rng)
        offset = datetime.timezone(datetime.timedelta(minutes=rng.choice([0, 60, -300, 330])))
        return ts.astimezone(offset).isoformat(), ts
    if typ == "string" and fmt == "date":
        d = draw_day(rng)
        return d.isoformat(), d
    if typ == "string":
        s = draw_text(rng)
        return s, s
    if typ == "boolean":
        b = rng.random() < 0.5
        return b, b
    if typ == "integer":
        n = rng.randrange(prop.get("minimum", -2**63), prop.get("maximum", 2**63 - 1) + 1)
        return n, n
    if typ == "number":
        x = rng.uniform(-1e12, 1e12)
        return x, x
    raise SystemExit(f"jsonschemaproduce.py: no values for type {typ!r}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--brokers", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--schema", required=True)
    p.add_argument("--registry", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bad", type=int, default=0)
    args = p.parse_args()
    with open(args.schema) as f:
        text = f.read()
    schema = json.loads(text)
    client = registry_client(args.registry)
    serializer = JSONSerializer(text, client)
    ctx = SerializationContext(args.topic, MessageField.VALUE)
    rng = random.Random(args.seed)
    required = set(schema.get("required", []))
    values, rows = [], []
    for _ in range(args.count):
        rec, row = {}, {}
        for name, prop in schema["properties"].items():
            typ, fmt, inner, nullable = kind(prop, schema)
            if (nullable or name not in required) and rng.random() < 0.25:
                if nullable and rng.random() < 0.5:
                    rec[name] = None  # else left out
                row[name] = None
                continue
            rec[name], row[name] = value(rng, typ, fmt, inner, schema)
        values.append(serializer(rec, ctx))
        rows.append({k: render(v) for k, v in row.items()})
    if args.bad:
        schema_id = client.get_latest_version(args.topic + "-value").schema_id
        number = next(n for n, prop in schema["properties"].items() if kind(prop, schema)[0] == "integer")
        body = json.dumps(dict(rec, **{number: "not a number"})).encode()
        values += [b"\0" + struct.pack(">I", schema_id) + body] * args.bad
    produce("jsonschemaproduce.py", args.brokers, args.topic, values, rows)

if __name__ == "__main__":
    main()
