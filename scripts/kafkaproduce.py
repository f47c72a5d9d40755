"""What deltaflow's format producers (avroproduce.py, jsonschemaproduce.py)
share: the random values they draw, the registry client they serialize
through, and producing their values with confluent-kafka and printing the
rows the table should hold."""
import datetime
import json
import os
import sys

from confluent_kafka import Producer


EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def draw_text(rng):
    """A short string, with quotes, escapes and characters of 2 to 4 bytes."""
    return "".join(rng.choice("abcxyz é€😀'\"\\") for _ in range(rng.randrange(0, 12)))


def draw_day(rng):
    """A date within a century or so of 2026."""
    return datetime.date(2026, 1, 1) + datetime.timedelta(days=rng.randrange(-40000, 40000))


def draw_instant(rng, unit_us=1):
    """A UTC datetime between 1935 and 2005, a whole number of unit_us."""
    return EPOCH + datetime.timedelta(microseconds=rng.randrange(-2**40, 2**50) // unit_us * unit_us)


def registry_client(url):
    """confluent-kafka's SchemaRegistryClient for url, with basic auth from
    $SCHEMA_REGISTRY_USER_INFO (user:password) when set."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    conf = {"url": url}
    if os.environ.get("SCHEMA_REGISTRY_USER_INFO"):
        conf["basic.auth.user.info"] = os.environ["SCHEMA_REGISTRY_USER_INFO"]
    return SchemaRegistryClient(conf)


def produce(script, brokers, topic, values, rows, keys=None):
    """Produce values to topic, value i to partition i % 3 (with keys[i]
    as its key when keys are given), and print rows
    (the rendered rows the table should hold) as a JSON array, sorted as
    deltars.py sorts delta-rs's."""
    producer = Producer({"bootstrap.servers": brokers, "enable.idempotence": True})
    failed = []

    def delivered(err, _msg):
        if err is not None:
            failed.append(err)

    for i, value in enumerate(values):
        producer.produce(topic, key=keys[i] if keys else None, value=value, partition=i % 3, on_delivery=delivered)
        producer.poll(0)
    if producer.flush(60) != 0 or failed:
        raise SystemExit(f"{script}: not delivered: {failed or 'flush timed out'}")
    rows = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))
    json.dump(rows, sys.stdout, sort_keys=True)
