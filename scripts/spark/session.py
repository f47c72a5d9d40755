"""The SparkSession the seed's jobs build, for the test copies of them.

Spark 3.5.1 with delta-spark 3.2.0 (pip) and the Kafka source; the jars come
from Maven Central through spark.jars.packages into the Ivy cache under
$DELTAFLOW_CACHE (scripts/install-deps.sh resolves them once).
"""
import os

from pyspark.sql import SparkSession

# The jars the seed's image carries: keep in step with scripts/lib.sh; and
# spark-avro, whose from_avro is the tests' oracle of the Avro type mapping
# (scripts/spark/avro_oracle.py).
PACKAGES = [
    "io.delta:delta-spark_2.12:3.2.0",
    "org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.1",
    "org.apache.spark:spark-avro_2.12:3.5.1",
]


def ivy_dir():
    cache = os.environ.get("DELTAFLOW_CACHE") or os.path.expanduser("~/.cache/deltaflow")
    return os.path.join(cache, "ivy")


def build(app_name):
    """A local SparkSession with Delta's extensions and a small footprint."""
    builder = (
        SparkSession.builder.appName(app_name)
        .master(os.environ.get("SPARK_MASTER", "local[2]"))
        .config("spark.jars.packages", ",".join(PACKAGES))
        .config("spark.jars.ivy", ivy_dir())
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        # The Pi's job runs with a 512 MB heap; so do the tests.
        .config("spark.driver.memory", os.environ.get("SPARK_DRIVER_MEMORY", "512m"))
        .config("spark.sql.shuffle.partitions", "2")
        # Small tables: replaying the Delta log in 50 tasks (the default)
        # costs a JVM on 2 cores tens of seconds per batch.
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        # VACUUM lists the table in this many tasks (default 10000).
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SPARK_LOG_LEVEL", "WARN"))
    return spark


if __name__ == "__main__":
    # `python session.py`: resolve the jars into the Ivy cache (install-deps.sh).
    build("resolve-jars").stop()
