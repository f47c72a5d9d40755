#!/usr/bin/env python3
"""The seed's Spark Structured Streaming job, as the tests run it.

Reads the Kafka topic sensor-events from the earliest offset, parses the
envelope {device_id, device_type, ingested_at, payload} and its JSON-string
payload with from_json (PERMISSIVE: what does not parse becomes null), and
appends to the Delta table partitioned by device_type and event_date, every
--trigger seconds (60 on the Pi), with its checkpoint at --checkpoint.

Test-only options (off by default, so the job is the seed's):
  --kafka-columns   add kafka_partition and kafka_offset, for exactly-once
                    accounting by Kafka coordinates
  --crash-device ID a record of this device_id makes its batch fail
                    (raise_error): the query dies after writing offsets/N
                    and before the table commit and commits/N, as a crash
                    between the two would leave it
  --stop-file PATH  once PATH exists and the query has caught up with the
                    topic, stop the query cleanly and exit 0

Prints one JSON line {"event": "started", "queryId": ...} once running and
{"event": "stopped"} or {"event": "failed", "error": ...} at the end.
"""
import argparse
import json
import os
import sys
import time

from pyspark.sql.functions import col, current_timestamp, from_json, lit, raise_error, to_date, to_timestamp, when
from pyspark.sql.types import BooleanType, DoubleType, IntegerType, StringType, StructField, StructType

import session

ENVELOPE = StructType([
    StructField("device_id", StringType()),
    StructField("device_type", StringType()),
    StructField("ingested_at", StringType()),
    StructField("payload", StringType()),
])

PAYLOAD = StructType([
    StructField("power", DoubleType()),
    StructField("voltage", DoubleType()),
    StructField("current", DoubleType()),
    StructField("energy", DoubleType()),
    StructField("state", StringType()),
    StructField("linkquality", IntegerType()),
    StructField("contact", BooleanType()),
    StructField("battery", IntegerType()),
])


def events(raw, kafka_columns, crash_device):
    """The job's transformation: Kafka rows to sensor_events rows."""
    env = raw.select(
        from_json(col("value").cast("string"), ENVELOPE, {"mode": "PERMISSIVE"}).alias("e"),
        col("partition").alias("kafka_partition"),
        col("offset").alias("kafka_offset"),
    )
    p = from_json(col("e.payload"), PAYLOAD, {"mode": "PERMISSIVE"})
    out = env.select(
        col("e.device_id").alias("device_id"),
        col("e.device_type").alias("device_type"),
        to_timestamp(col("e.ingested_at")).alias("event_time"),
        p.alias("p"),
        col("e.payload").alias("raw_payload"),
        "kafka_partition",
        "kafka_offset",
    ).select(
        "device_id",
        "device_type",
        "event_time",
        col("p.linkquality").alias("linkquality"),
        col("p.contact").alias("contact"),
        col("p.battery").alias("battery"),
        col("p.power").alias("power"),
        col("p.voltage").alias("voltage"),
        col("p.current").alias("current"),
        col("p.energy").alias("energy"),
        col("p.state").alias("plug_state"),
        "raw_payload",
        current_timestamp().alias("processed_at"),
        to_date(col("event_time")).alias("event_date"),
        "kafka_partition",
        "kafka_offset",
    )
    if crash_device:
        out = out.withColumn(
            "device_id",
            when(col("device_id") == lit(crash_device), raise_error(lit("sensor_stream: crash record"))).otherwise(col("device_id")),
        )
    if not kafka_columns:
        out = out.drop("kafka_partition", "kafka_offset")
    return out


def say(**kv):
    print(json.dumps(kv), flush=True)


def caught_up(q):
    """The query has no batch running and has read everything available."""
    st = q.status
    if st["isTriggerActive"] or st["isDataAvailable"]:
        return False
    p = q.lastProgress
    if not p or not p.get("sources"):
        return False
    s = p["sources"][0]
    return s.get("endOffset") is not None and s.get("endOffset") == s.get("latestOffset")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default=os.environ.get("KAFKA_BOOTSTRAP", "kafka:9092"))
    ap.add_argument("--topic", default="sensor-events")
    ap.add_argument("--table", default="s3a://sensor-data/delta/sensor_events")
    ap.add_argument("--checkpoint", default="s3a://sensor-data/checkpoints/sensor_stream")
    ap.add_argument("--trigger", type=float, default=60, help="seconds between micro-batches (default 60)")
    ap.add_argument("--max-offsets", type=int, default=1000, help="maxOffsetsPerTrigger (default 1000)")
    ap.add_argument("--kafka-columns", action="store_true")
    ap.add_argument("--crash-device", default="")
    ap.add_argument("--stop-file", default="")
    a = ap.parse_args()

    spark = session.build("sensor_stream")
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", a.brokers)
        .option("subscribe", a.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", a.max_offsets)
        .option("failOnDataLoss", "false")
        .load()
    )
    q = (
        events(raw, a.kafka_columns, a.crash_device)
        .writeStream.format("delta")
        .outputMode("append")
        .partitionBy("device_type", "event_date")
        .option("checkpointLocation", a.checkpoint)
        .trigger(processingTime=f"{a.trigger} seconds")
        .start(a.table)
    )
    say(event="started", queryId=q.id, runId=q.runId)
    try:
        while q.isActive:
            if a.stop_file and os.path.exists(a.stop_file) and caught_up(q):
                q.stop()
                break
            time.sleep(0.2)
        err = q.exception()
    except Exception as e:  # noqa: BLE001 - reported, then exit 1
        err = e
    if err is not None:
        say(event="failed", error=str(err)[:2000])
        spark.stop()
        sys.exit(1)
    say(event="stopped")
    spark.stop()


if __name__ == "__main__":
    main()
