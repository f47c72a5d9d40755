"""The SparkSession of the Spark 4 checks (delta/spark4_test.go) and of the
Spark 4 fixture generator (delta/testdata/spark4-features/generate.py).

pyspark 4.2.0 (pip, its own venv) with delta-spark 4.4.0; the Delta jar
comes from Maven Central through spark.jars.packages into an Ivy cache under
$DELTAFLOW_CACHE (scripts/install-deps.sh resolves it once).
"""
import os

from pyspark.sql import SparkSession

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


if __name__ == "__main__":
    # `python session.py`: resolve the jars into the Ivy cache (install-deps.sh).
    build("resolve-jars").stop()
