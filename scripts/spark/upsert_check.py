"""Spark as the reader and second writer of a table deltaflow upserts.

  upsert_check.py TABLE_DIR CHANGES_JSON

Reads the table (deletion vectors applied), then runs Spark's own MERGE of
CHANGES_JSON (a list of {"id", "name", "balance", "delete"}: a delete
removes the id, anything else is upserted) into it, and reads it again.
Prints {"before": rows, "after": rows}, rows sorted by id. One JVM.
"""
import json
import sys

from delta.tables import DeltaTable
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

import session


def rows(spark, path):
    df = spark.read.format("delta").load(path)
    return sorted((r.asDict() for r in df.select("id", "name", "balance").collect()), key=lambda r: r["id"])


def main():
    path, changes_file = sys.argv[1], sys.argv[2]
    with open(changes_file) as f:
        changes = json.load(f)
    spark = session.build("deltaflow-upsert-check")
    before = rows(spark, path)
    schema = StructType([StructField("id", LongType()), StructField("name", StringType()),
                         StructField("balance", LongType()), StructField("delete", BooleanType())])
    source = spark.createDataFrame([(c["id"], c.get("name"), c.get("balance"), c.get("delete", False)) for c in changes], schema)
    (DeltaTable.forPath(spark, path).alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedDelete(condition="s.delete")
        .whenMatchedUpdate(set={"name": "s.name", "balance": "s.balance"})
        .whenNotMatchedInsert(condition="NOT s.delete", values={"id": "s.id", "name": "s.name", "balance": "s.balance"})
        .execute())
    after = rows(spark, path)
    json.dump({"before": before, "after": after}, sys.stdout)
    spark.stop()


if __name__ == "__main__":
    main()
