"""Reads a topic from its start to its current end and prints each record as
one JSON line: {"key": <key>, "value": <value>, "offset": n, "partition": n,
"headers": {name: text}}.

The key and value are the record's bytes embedded verbatim (JsonConverter
writes JSON, so the line stays JSON and keeps Debezium's field order and
number text); null stands for a missing key or value (a tombstone's value).
Bytes that are not JSON are embedded as a JSON string instead.

usage: python read_topic.py BROKERS TOPIC [--min N] [--timeout SECONDS]
  --min N: wait (up to --timeout, default 60) until the topic holds at least
  N records in all, then read them all. Run with the venv of
  scripts/install-deps.sh (confluent-kafka).
"""

import argparse
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition


def embed(raw):
    if raw is None:
        return "null"
    try:
        text = raw.decode("utf-8")
        json.loads(text)
        return text
    except (UnicodeDecodeError, ValueError):
        return json.dumps(raw.decode("utf-8", "replace"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("brokers")
    ap.add_argument("topic")
    ap.add_argument("--min", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()

    c = Consumer({
        "bootstrap.servers": args.brokers,
        "group.id": "cdc-read-topic",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    deadline = time.monotonic() + args.timeout
    while True:
        md = c.list_topics(args.topic, timeout=10).topics[args.topic]
        if md.error is None and md.partitions:
            parts = sorted(md.partitions)
            ends = {p: c.get_watermark_offsets(TopicPartition(args.topic, p), timeout=10) for p in parts}
            if sum(hi - lo for lo, hi in ends.values()) >= args.min:
                break
        if time.monotonic() > deadline:
            sys.exit(f"read_topic: {args.topic} has fewer than {args.min} records after {args.timeout}s")
        time.sleep(0.5)

    c.assign([TopicPartition(args.topic, p, lo) for p, (lo, hi) in ends.items() if hi > lo])
    left = {p: hi for p, (lo, hi) in ends.items() if hi > lo}
    out = sys.stdout
    while left:
        if time.monotonic() > deadline + 30:
            sys.exit(f"read_topic: timed out reading {args.topic}")
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            raise KafkaException(m.error())
        p = m.partition()
        if p not in left or m.offset() >= left[p]:
            continue
        headers = {k: (v.decode("utf-8", "replace") if v is not None else None) for k, v in (m.headers() or [])}
        out.write('{"key": %s, "value": %s, "offset": %d, "partition": %d, "headers": %s}\n' % (
            embed(m.key()), embed(m.value()), m.offset(), p, json.dumps(headers)))
        if m.offset() + 1 >= left[p]:
            del left[p]
    c.close()


if __name__ == "__main__":
    main()
