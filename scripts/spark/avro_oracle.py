"""Spark's from_avro as the oracle of deltaflow's Avro type mapping.

  avro_oracle.py BROKERS TOPIC SCHEMA_FILE TABLE_DIR [JSON_TOPIC JSON_SCHEMA JSON_TABLE_DIR [NAME=DIR ...]]

Reads TOPIC from its start with Spark's Kafka source, keeps the records in
the schema registry's wire format (magic byte 0), decodes their bodies
with from_avro and the writer schema in SCHEMA_FILE, and compares that
with the Delta table deltaflow wrote at TABLE_DIR: the column types of
each, and the rows each holds that the other lacks (exceptAll both ways).
Then, for each decimal column, the table's rows Spark finds with filters
(= <, >= its least, middle and greatest value: Delta's data skipping reads
the files' min/max stats, the Parquet reader its row groups' bounds) are
counted against from_avro's. Prints one JSON line {"oracleTypes",
"tableTypes", "oracleRows", "tableRows", "missing", "extra",
"filterChecks", "filterMismatches"} (missing/extra: up to 5 rows). One JVM.

With JSON_TOPIC, the same JVM is from_json's oracle too: JSON_TOPIC's
records decoded with from_json and the DDL schema JSON_SCHEMA (default
options: PERMISSIVE, no formats) are compared with the table deltaflow
wrote at JSON_TABLE_DIR, as above, under "json": {"oracleTypes",
"tableTypes", "rows" (from_json's, every one, timestamps rendered as
deltars.py renders them), "tableRows", "missing", "extra"}.

Each NAME=DIR after them is a table Spark reads, whole: under "reads",
NAME: {"types", "rows" (rendered as rowjson renders them)}.
"""
import datetime
import json
import operator
import os
import sys
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.functions import col, expr, from_json, lit
from pyspark.sql.types import DecimalType

import session

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rowjson  # noqa: E402


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
    checks, mismatches = filter_counts(oracle, delta)
    out = {
        "oracleTypes": {f.name: f.dataType.simpleString() for f in oracle.schema.fields},
        "tableTypes": {f.name: f.dataType.simpleString() for f in delta.schema.fields},
        "oracleRows": oracle.count(),
        "tableRows": delta.count(),
        "missing": [r.asDict() for r in missing.limit(5).collect()],
        "extra": [r.asDict() for r in extra.limit(5).collect()],
        "filterChecks": checks,
        "filterMismatches": mismatches,
    }
    if len(sys.argv) > 5:
        out["json"] = json_oracle(spark, brokers, *sys.argv[5:8])
    out["reads"] = {}
    for arg in sys.argv[8:]:
        name, path = arg.split("=", 1)
        df = spark.read.format("delta").load(path)
        out["reads"][name] = {
            "types": {f.name: f.dataType.simpleString() for f in df.schema.fields},
            "rows": [{k: rowjson.render(v) for k, v in r.asDict().items()} for r in df.collect()],
        }
    print(json.dumps(out, default=str))
    spark.stop()


def json_oracle(spark, brokers, topic, ddl, table):
    """from_json of topic's records against the table at table."""
    raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", brokers)
           .option("subscribe", topic).option("startingOffsets", "earliest").load())
    oracle = raw.select(from_json(col("value").cast("string"), ddl).alias("r")).select("r.*")
    delta = spark.read.format("delta").load(table)
    delta = delta.select(*oracle.columns)
    return {
        "oracleTypes": {f.name: f.dataType.simpleString() for f in oracle.schema.fields},
        "tableTypes": {f.name: f.dataType.simpleString() for f in delta.schema.fields},
        "rows": [{k: render(v) for k, v in r.asDict().items()} for r in oracle.collect()],
        "tableRows": delta.count(),
        "missing": [r.asDict() for r in oracle.exceptAll(delta).limit(5).collect()],
        "extra": [r.asDict() for r in delta.exceptAll(oracle).limit(5).collect()],
    }


def render(v):
    """A value as deltars.py renders it (rowjson.render): a datetime as
    YYYY-MM-DDTHH:MM:SS.ffffff."""
    if isinstance(v, datetime.datetime):
        return "%04d-%02d-%02dT%02d:%02d:%02d.%06d" % (v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond)
    return v


def filter_counts(oracle, delta):
    """How many filters on decimal columns were compared, and those whose
    count in the table differs from the count in from_avro's rows. The
    table's counts come from one job: a union of a filtered scan per
    filter, each of which Delta skips files for."""
    preds = (("=", operator.eq), ("<", operator.lt), (">=", operator.ge))
    checks, scans = [], []
    decimals = [f for f in oracle.schema.fields if isinstance(f.dataType, DecimalType)]
    rows = oracle.select(*[f.name for f in decimals]).collect() if decimals else []
    for f in decimals:
        values = sorted(r[f.name] for r in rows if r[f.name] is not None)
        for v in (values[0], values[len(values) // 2], values[-1]) if values else ():
            for name, op in preds:
                checks.append(("%s %s %s" % (f.name, name, v), sum(1 for x in values if op(x, v))))
                scans.append(delta.where(op(col(f.name), lit(v).cast(f.dataType))).select(lit(len(scans)).alias("check")))
    got = dict(reduce(DataFrame.unionAll, scans).groupBy("check").count().collect()) if scans else {}
    mismatches = [{"filter": text, "oracle": want, "table": got.get(i, 0)}
                  for i, (text, want) in enumerate(checks) if got.get(i, 0) != want]
    return len(checks), mismatches


if __name__ == "__main__":
    main()
