"""The SparkSession of the Spark 4 checks (delta/spark4_test.go) and of the
Spark 4 fixture generator (delta/testdata/spark4-features/generate.py).

pyspark 4.2.0 (pip, its own venv) with delta-spark 4.4.0; the Delta jar
comes from Maven Central through spark.jars.packages into an Ivy cache under
$DELTAFLOW_CACHE (scripts/install-deps.sh resolves it once).
"""
import json
import os
import sys

from pyspark.sql import SparkSession

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from rowjson import render  # noqa: E402

# Keep in step with scripts/lib.sh (DELTA_SPARK4_VERSION).
PACKAGES = ["io.delta:delta-spark_4.2_2.13:4.4.0"]


def ivy_dir():
    cache = os.environ.get("DELTAFLOW_CACHE") or os.path.expanduser("~/.cache/deltaflow")
    return os.path.join(cache, "ivy-spark4")


def build(app_name):
    """A local one-core SparkSession with Delta and a small footprint."""
    builder = (
        SparkSession.builder.appName(app_name)
        .master("local[1]")
        .config("spark.jars.packages", ",".join(PACKAGES))
        .config("spark.jars.ivy", ivy_dir())
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.databricks.delta.snapshotPartitions", "1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SPARK_LOG_LEVEL", "ERROR"))
    return spark


def load(spark, path, version=None):
    """The table (at version, if not None) as Spark reads it."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(path)


def frame(spark, path, version=None):
    """The table as a DataFrame, variant columns as to_json text."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import VariantType
    df = load(spark, path, version)
    return df.select([F.to_json(F.col(f.name)).alias(f.name) if isinstance(f.dataType, VariantType) else F.col(f.name)
                      for f in df.schema.fields])


def rows_of(spark, path, version=None):
    """Every row of the table, rendered and sorted."""
    rows = [{k: render(v) for k, v in r.asDict().items()} for r in frame(spark, path, version).collect()]
    rows.sort(key=lambda r: json.dumps(r, sort_keys=True))
    return rows


def types_of(spark, path, version=None):
    """Each column's type as Spark names it (bigint, decimal(8,3), ...)."""
    return {f.name: f.dataType.simpleString() for f in load(spark, path, version).schema.fields}


def row_ids(spark, path):
    """[id, row_id, row_commit_version] of every row, sorted."""
    df = spark.read.format("delta").load(path).select("id", "_metadata.row_id", "_metadata.row_commit_version")
    return sorted([r["id"], r["row_id"], r["row_commit_version"]] for r in df.collect())


if __name__ == "__main__":
    # `python session.py`: resolve the jars into the Ivy cache (install-deps.sh).
    build("resolve-jars").stop()
