"""Spark's from_avro as the oracle of deltaflow's Avro type mapping.

  avro_oracle.py BROKERS TOPIC SCHEMA_FILE TABLE_DIR

Reads TOPIC from its start with Spark's Kafka source, keeps the records in
the schema registry's wire format (magic byte 0), decodes their bodies
with from_avro and the writer schema in SCHEMA_FILE, and compares that
with the Delta table deltaflow wrote at TABLE_DIR: the column types of
each, and the rows each holds that the other lacks (exceptAll both ways).
Prints one JSON line {"oracleTypes", "tableTypes", "oracleRows",
"tableRows", "missing", "extra"} (missing/extra: up to 5 rows). One JVM.
"""
import json
import sys

from pyspark.sql.avro.functions import from_avro
from pyspark.sql.functions import col, expr

import session


def main():
    brokers, topic, schema_file, table = sys.argv[1:5]
    with open(schema_file) as f:
        schema = f.read()
    spark = session.build("deltaflow-avro-oracle")
    raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", brokers)
           .option("subscribe", topic).option("startingOffsets", "earliest").load())
    framed = raw.where(expr("substring(value, 1, 1) = X'00'"))
    oracle = framed.select(from_avro(expr("substring(value, 6, length(value) - 5)"), schema).alias("r")).select("r.*")
    delta = spark.read.format("delta").load(table)
    cols = [c for c in oracle.columns]
    delta = delta.select(*cols)
    missing = oracle.exceptAll(delta)
    extra = delta.exceptAll(oracle)
    out = {
        "oracleTypes": {f.name: f.dataType.simpleString() for f in oracle.schema.fields},
        "tableTypes": {f.name: f.dataType.simpleString() for f in delta.schema.fields},
        "oracleRows": oracle.count(),
        "tableRows": delta.count(),
        "missing": [r.asDict() for r in missing.limit(5).collect()],
        "extra": [r.asDict() for r in extra.limit(5).collect()],
    }
    print(json.dumps(out, default=str))
    spark.stop()


if __name__ == "__main__":
    main()
