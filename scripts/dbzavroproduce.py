#!/usr/bin/env python3
"""Real Debezium change events re-encoded in Avro, for deltaflow's tests.

  dbzavroproduce.py --brokers B --topic T --registry URL --schema FILE --events FILE

Reads change events Debezium's Postgres connector wrote through Kafka
Connect's JSON converter with schemas.enable (FILE --events, lines of
scripts/cdc/read_topic.py: {"key", "value", ...}), and produces each to
partition 0 of topic T (a key's changes in order, as Debezium's one
partition) with its key's JSON text as the key: the value re-encoded with
the envelope schema --schema (the Apicurio AvroConverter's, see
mapping/testdata/debezium/README.md) by confluent-kafka's AvroSerializer
through the registry (the Confluent wire format, subject T-value; basic
auth from $SCHEMA_REGISTRY_USER_INFO), a tombstone as a null value. Not
a live Avro Debezium pipeline: real events and the real converter's
schema, encoded by a client we did not write.

Prints the rows the table should hold once every change is applied (each
key's last after image; a deleted key none), as JSON rows rendered as
deltars.py renders delta-rs's (rowjson.render).
"""
import argparse
import base64
import datetime
import decimal
import json

from confluent_kafka import Producer

from avroproduce import registry_serializer
from rowjson import render


def unscaled(text):
    """The integer of a base64 big-endian two's complement."""
    return int.from_bytes(base64.b64decode(text), "big", signed=True)


def datum(row):
    """A row image as fastavro takes it for the Value record, and the row
    the table should hold for it."""
    if row is None:
        return None, None
    rec, out = dict(row), dict(row)
    if row["amount"] is not None:  # numeric(12,2): Kafka Connect's Decimal
        rec["amount"] = out["amount"] = decimal.Decimal(unscaled(row["amount"])).scaleb(-2)
    if row["price"] is not None:  # numeric: VariableScaleDecimal, read into decimal(38,18)
        p = row["price"]
        rec["price"] = {"scale": p["scale"], "value": base64.b64decode(p["value"])}
        with decimal.localcontext(prec=80):  # 38 digits: past the default 28
            out["price"] = decimal.Decimal(unscaled(p["value"])).scaleb(-p["scale"]).quantize(decimal.Decimal(1).scaleb(-18))
    if row["ts"] is not None:  # timestamptz: ZonedTimestamp, an instant
        out["ts"] = datetime.datetime.fromisoformat(row["ts"].replace("Z", "+00:00"))
    return rec, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--registry", required=True)
    ap.add_argument("--schema", required=True)
    ap.add_argument("--events", required=True)
    args = ap.parse_args()
    serialize = registry_serializer(args.registry, open(args.schema).read(), args.topic)
    producer = Producer({"bootstrap.servers": args.brokers, "enable.idempotence": True})
    failed, table = [], {}

    def delivered(err, _msg):
        if err is not None:
            failed.append(err)

    for line in open(args.events):
        ev = json.loads(line)
        key = json.dumps(ev["key"]["payload"]).encode()
        value = None
        if ev["value"] is not None:
            env = dict(ev["value"]["payload"])
            env["before"], _ = datum(env["before"])
            env["after"], after = datum(env["after"])
            value = serialize(env)
            if env["op"] == "d":
                table.pop(ev["key"]["payload"]["id"], None)
            else:
                table[after["id"]] = after
        producer.produce(args.topic, key=key, value=value, partition=0, on_delivery=delivered)
        producer.poll(0)
    if producer.flush(60) != 0 or failed:
        raise SystemExit(f"dbzavroproduce.py: not delivered: {failed or 'flush timed out'}")
    rows = sorted((render(r) for r in table.values()), key=lambda r: json.dumps(r, sort_keys=True))
    print(json.dumps(rows, sort_keys=True))


if __name__ == "__main__":
    main()
