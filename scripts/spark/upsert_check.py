"""Spark as the reader and second writer of tables deltaflow upserts.

  upsert_check.py [--merge CHANGES_JSON] [--changes-from V] [--feed DIR=V]... TABLE_DIR...

Reads each table (deletion vectors applied); with --merge, then runs
Spark's own MERGE of CHANGES_JSON (a list of {"id", "name", "balance",
"delete"}: a delete removes the id, anything else is upserted) into the
first table and reads it again; with --changes-from, then reads the first
table's change data feed from version V (readChangeFeed, as table_changes
does); with --feed DIR=V, DIR's feed from version V too (a column-mapped
table's, say). Prints {"before": {dir: rows}, "after": rows, "changes":
rows, "feeds": {dir: rows}}, rows sorted by id, changes with _change_type
and _commit_version. One JVM.
"""
import argparse
import json
import sys

from delta.tables import DeltaTable
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

import session


def rows(spark, path):
    df = spark.read.format("delta").load(path)
    return sorted((r.asDict() for r in df.select("id", "name", "balance").collect()), key=lambda r: r["id"])


def merge(spark, path, changes):
    schema = StructType([StructField("id", LongType()), StructField("name", StringType()),
                         StructField("balance", LongType()), StructField("delete", BooleanType())])
    source = spark.createDataFrame([(c["id"], c.get("name"), c.get("balance"), c.get("delete", False)) for c in changes], schema)
    (DeltaTable.forPath(spark, path).alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedDelete(condition="s.delete")
        .whenMatchedUpdate(set={"name": "s.name", "balance": "s.balance"})
        .whenNotMatchedInsert(condition="NOT s.delete", values={"id": "s.id", "name": "s.name", "balance": "s.balance"})
        .execute())


def changes(spark, path, start):
    df = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", start).load(path)
          .select("id", "name", "balance", "_change_type", "_commit_version"))
    return sorted((r.asDict() for r in df.collect()), key=lambda r: (r["_commit_version"], r["id"], r["_change_type"]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--merge")
    p.add_argument("--changes-from", type=int)
    p.add_argument("--feed", action="append", default=[])
    p.add_argument("dirs", nargs="+")
    args = p.parse_args()
    spark = session.build("deltaflow-upsert-check")
    out = {"before": {d: rows(spark, d) for d in args.dirs}}
    if args.merge:
        with open(args.merge) as f:
            merge(spark, args.dirs[0], json.load(f))
        out["after"] = rows(spark, args.dirs[0])
    if args.changes_from is not None:
        out["changes"] = changes(spark, args.dirs[0], args.changes_from)
    out["feeds"] = {}
    for feed in args.feed:
        path, start = feed.rsplit("=", 1)
        out["feeds"][path] = changes(spark, path, int(start))
    json.dump(out, sys.stdout)
    spark.stop()


if __name__ == "__main__":
    main()
