#!/usr/bin/env python3
"""The seed's maintenance job, as the tests run it: OPTIMIZE the table, then
VACUUM files unreferenced for --retain-days (30 by default).

--report prints, before OPTIMIZE, one JSON line with the version Spark read
and the rows it sees there (count and distinct Kafka coordinates when the
table has them): the tests' proof that Spark reads the table.
"""
import argparse
import json
import time

from pyspark.sql.functions import countDistinct

import session


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--table", default="s3a://sensor-data/delta/sensor_events")
    ap.add_argument("--retain-days", type=float, default=30)
    ap.add_argument("--report", action="store_true")
    a = ap.parse_args()

    t0 = time.monotonic()
    spark = session.build("sensor_optimize")
    took = {"startSeconds": round(time.monotonic() - t0, 1)}
    t = time.monotonic()
    if a.report:
        from delta.tables import DeltaTable

        version = DeltaTable.forPath(spark, a.table).history(1).collect()[0]["version"]
        df = spark.read.format("delta").option("versionAsOf", version).load(a.table)
        report = {"event": "read", "version": version, "rows": df.count(),
                  "schema": json.loads(df.schema.json())}
        if "kafka_offset" in df.columns:
            report["distinct"] = df.select(countDistinct("kafka_partition", "kafka_offset")).collect()[0][0]
        print(json.dumps(report), flush=True)
        took["readSeconds"] = round(time.monotonic() - t, 1)
        t = time.monotonic()
    spark.sql(f"OPTIMIZE delta.`{a.table}`").show(truncate=False)
    took["optimizeSeconds"] = round(time.monotonic() - t, 1)
    t = time.monotonic()
    hours = a.retain_days * 24
    if hours < 168:
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    spark.sql(f"VACUUM delta.`{a.table}` RETAIN {hours} HOURS")
    took["vacuumSeconds"] = round(time.monotonic() - t, 1)
    print(json.dumps({"event": "done", **took}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
