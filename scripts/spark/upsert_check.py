"""Spark as the reader and second writer of tables deltaflow upserts.

  upsert_check.py [--merge CHANGES_JSON] TABLE_DIR...

Reads each table (deletion vectors applied); with --merge, then runs
Spark's own MERGE of CHANGES_JSON (a list of {"id", "name", "balance",
"delete"}: a delete removes the id, anything else is upserted) into the
first table and reads it again. Prints {"before": {dir: rows}, "after":
rows}, rows sorted by id. One JVM.
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--merge")
    p.add_argument("dirs", nargs="+")
    args = p.parse_args()
    spark = session.build("deltaflow-upsert-check")
    out = {"before": {d: rows(spark, d) for d in args.dirs}}
    if args.merge:
        with open(args.merge) as f:
            merge(spark, args.dirs[0], json.load(f))
        out["after"] = rows(spark, args.dirs[0])
    json.dump(out, sys.stdout)
    spark.stop()


if __name__ == "__main__":
    main()
