#!/usr/bin/env python3
"""Generate the delta-spark feature fixtures under delta/testdata/spark-features/.

Each fixture is a small Delta table made by real delta-spark (pyspark 3.5.1 +
delta-spark 3.2.0) with one table feature in use, plus `expected.json`: the
rows Spark reads at the latest version (and per version where the test needs
it), rendered like scripts/deltars.py renders delta-rs rows.

Rerun (needs Java 17 and network access to Maven Central for the Delta jars):

    python3 -m venv /tmp/sparkvenv
    /tmp/sparkvenv/bin/pip install pyspark==3.5.1 delta-spark==3.2.0
    /tmp/sparkvenv/bin/python delta/testdata/spark-features/generate.py

It deletes and rewrites every fixture directory it knows (or only those
named as arguments, e.g. `generate.py dv ict`). A fixture whose feature this
Spark version cannot make is reported and left out. delta-spark 3.2 writes
no .crc version checksum files for these tables. The tests read each
fixture from a copy (delta/spark_features_test.go, runtime/cli).

Fixtures:
  dv              DELETE with deletion vectors (file DVs, storageType 'u'),
                  twice on the same file (the DV is replaced), partitioned.
  dv-inline       dv with every DV rewritten inline (storageType 'i', Z85);
                  delta-spark 3.2 DML never writes inline DVs itself.
  colmap-name     column mapping mode name, partitioned, RENAME COLUMN.
  colmap-id       column mapping mode id, RENAME COLUMN and DROP COLUMN.
  v2checkpoint    checkpointPolicy=v2: UUID-named JSON checkpoint with sidecars.
  v2checkpoint-parquet  the same with a Parquet top-level checkpoint file.
  ict             in-commit timestamps (delta 3.2: inCommitTimestamp-preview).
  constraints     a CHECK constraint.
  generated       a generated column.
  cdf             change data feed enabled (no constraint or generated column).
  rowtracking     row tracking (rowTracking + domainMetadata).
  identity        an identity column: delta-spark 3.2 cannot make one, so
                  there is no such fixture (the run reports it).
  typewidening    type widening (typeWidening-preview).
  dv-vectors      not a table: DV files Spark wrote for a 70000-row file
                  (bitmap, array and run containers), each with its
                  descriptor and the DELETE predicate in vectors.json.
"""
import datetime
import glob
import json
import os
import shutil
import sys

from delta import configure_spark_with_delta_pip
from pyspark.sql import SparkSession

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts"))
from rowjson import render, sql, write_expected  # noqa: E402

Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85encode(data):
    """Z85 (ZeroMQ RFC 32); pads to a multiple of 4 bytes with zeros, as Delta does."""
    data = bytes(data) + b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        n = int.from_bytes(data[i:i + 4], "big")
        chunk = []
        for _ in range(5):
            n, r = divmod(n, 85)
            chunk.append(Z85[r])
        out.extend(reversed(chunk))
    return "".join(out)


def spark_session():
    b = (SparkSession.builder.appName("deltaflow-fixtures").master("local[1]")
         .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
         .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
         .config("spark.sql.shuffle.partitions", "1")
         .config("spark.default.parallelism", "1")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.ui.enabled", "false"))
    return configure_spark_with_delta_pip(b).getOrCreate()


def rows_of(spark, path, version=None):
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    df = reader.load(path)
    rows = [{k: render(v) for k, v in r.asDict().items()} for r in df.collect()]
    rows.sort(key=lambda r: json.dumps(r, sort_keys=True))
    return rows


def finish(spark, name, path, extra=None):
    """Write expected.json (latest rows, rows per version) and drop Hadoop's .crc side files."""
    hist = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    versions = sorted(h["version"] for h in hist)
    exp = {
        "version": versions[-1],
        "rows": rows_of(spark, path),
        "rowsByVersion": {str(v): rows_of(spark, path, v) for v in versions},
        "history": [{"version": h["version"], "operation": h["operation"],
                     "timestamp": h["timestamp"].astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"}
                    for h in sorted(hist, key=lambda h: h["version"])],
    }
    if extra:
        exp.update(extra)
    write_expected(name, path, exp)


def make_dv(spark, path):
    t = f"delta.`{path}`"
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT, part STRING, name STRING) USING delta PARTITIONED BY (part) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
        f"INSERT INTO {t} SELECT id, IF(id < 12, 'a', 'b'), concat('n', id) FROM range(0, 16)",
        f"DELETE FROM {t} WHERE id IN (1, 4, 13)",
        f"DELETE FROM {t} WHERE id IN (7, 8)")


def make_dv_inline(spark, src, path):
    """Copy dv and rewrite each DV as an inline one (and drop the DV files)."""
    shutil.copytree(src, path)
    os.remove(os.path.join(path, "expected.json"))
    for f in glob.glob(os.path.join(path, "deletion_vector_*.bin")):
        os.remove(f)
    for f in sorted(glob.glob(os.path.join(path, "_delta_log", "*.crc"))):
        os.remove(f)  # they would describe the file DVs
    for f in sorted(glob.glob(os.path.join(path, "_delta_log", "*.json"))):
        lines = []
        for line in open(f):
            a = json.loads(line)
            for kind in ("add", "remove"):
                dv = a.get(kind, {}).get("deletionVector")
                if dv and dv["storageType"] == "u":
                    blob = open(os.path.join(src, dv_relative_path(dv["pathOrInlineDv"])), "rb").read()
                    off = dv.get("offset", 0) or 0
                    size = int.from_bytes(blob[off:off + 4], "big")
                    data = blob[off + 4:off + 4 + size]
                    a[kind]["deletionVector"] = {"storageType": "i", "pathOrInlineDv": z85encode(data),
                                                 "sizeInBytes": size, "cardinality": dv["cardinality"]}
            lines.append(json.dumps(a, separators=(",", ":")))
        with open(f, "w") as out:
            out.write("\n".join(lines) + "\n")


def dv_relative_path(p):
    import uuid
    prefix, enc = p[:-20], p[-20:]
    n = 0
    raw = b""
    for i in range(0, 20, 5):
        n = 0
        for c in enc[i:i + 5]:
            n = n * 85 + Z85.index(c)
        raw += n.to_bytes(4, "big")
    name = f"deletion_vector_{uuid.UUID(bytes=raw)}.bin"
    return os.path.join(prefix, name) if prefix else name


def make_colmap(mode):
    def make(spark, path):
        t = f"delta.`{path}`"
        stmts = [
            f"CREATE TABLE {t} (id BIGINT, part STRING, name STRING, score INT) USING delta PARTITIONED BY (part) "
            f"TBLPROPERTIES ('delta.columnMapping.mode' = '{mode}', 'delta.minReaderVersion' = '2', "
            "'delta.minWriterVersion' = '5')",
            f"INSERT INTO {t} VALUES (1, 'x', 'one', 10), (2, 'y', 'two', 20)",
            f"ALTER TABLE {t} RENAME COLUMN name TO label",
            f"INSERT INTO {t} VALUES (3, 'x', 'three', 30)",
        ]
        if mode == "id":
            stmts += [f"ALTER TABLE {t} DROP COLUMN score",
                      f"ALTER TABLE {t} ADD COLUMNS (score BIGINT)",
                      f"INSERT INTO {t} VALUES (4, 'y', 'four', 40)"]
        sql(spark, *stmts)
    return make


def make_v2checkpoint(spark, path, top="json"):
    t = f"delta.`{path}`"
    spark.conf.set("spark.databricks.delta.checkpointV2.topLevelFileFormat", top)
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT, name STRING) USING delta "
        "TBLPROPERTIES ('delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '3')",
        f"INSERT INTO {t} VALUES (1, 'a')",
        f"INSERT INTO {t} VALUES (2, 'b')",
        f"INSERT INTO {t} VALUES (3, 'c')",
        f"DELETE FROM {t} WHERE id = 2",
        f"INSERT INTO {t} VALUES (4, 'd')")
    spark.conf.unset("spark.databricks.delta.checkpointV2.topLevelFileFormat")


def make_ict(spark, path):
    t = f"delta.`{path}`"
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT, name STRING) USING delta "
        "TBLPROPERTIES ('delta.enableInCommitTimestamps-preview' = 'true')",
        f"INSERT INTO {t} VALUES (1, 'a')",
        f"INSERT INTO {t} VALUES (2, 'b')")


def make_constraints(spark, path):
    t = f"delta.`{path}`"
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT, value INT) USING delta",
        f"ALTER TABLE {t} ADD CONSTRAINT positive CHECK (value > 0)",
        f"INSERT INTO {t} VALUES (1, 5), (2, 7)")


def make_generated(spark, path):
    # SQL cannot declare generated columns on a path; the builder can.
    from delta.tables import DeltaTable
    (DeltaTable.create(spark).location(path)
     .addColumn("id", "BIGINT")
     .addColumn("doubled", "BIGINT", generatedAlwaysAs="id * 2")
     .execute())
    sql(spark, f"INSERT INTO delta.`{path}` (id) VALUES (1), (2)")


def make_cdf(spark, path):
    t = f"delta.`{path}`"
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT, name STRING) USING delta "
        "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')",
        f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')",
        f"UPDATE {t} SET name = 'bb' WHERE id = 2")


def make_rowtracking(spark, path):
    t = f"delta.`{path}`"
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT, name STRING) USING delta "
        "TBLPROPERTIES ('delta.enableRowTracking' = 'true')",
        f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')")


def make_identity(spark, path):
    t = f"delta.`{path}`"
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT GENERATED ALWAYS AS IDENTITY, name STRING) USING delta",
        f"INSERT INTO {t} (name) VALUES ('a'), ('b')")


def make_typewidening(spark, path):
    t = f"delta.`{path}`"
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT, small SMALLINT) USING delta "
        "TBLPROPERTIES ('delta.enableTypeWidening' = 'true')",
        f"INSERT INTO {t} VALUES (1, 2)",
        f"ALTER TABLE {t} ALTER COLUMN small TYPE INT",
        f"INSERT INTO {t} VALUES (2, 100000)")


def make_dv_vectors(spark, path):
    """Keep only the DV files of DELETEs on a large one-file table."""
    import tempfile
    tmp = tempfile.mkdtemp()
    t = f"delta.`{tmp}`"
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT) USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
        f"INSERT INTO {t} SELECT id FROM range(0, 70000)")
    vectors = []
    for where in ["id % 2 = 0 AND id < 65536", "id BETWEEN 66000 AND 69000", "id IN (3, 65537)"]:
        sql(spark, f"DELETE FROM {t} WHERE {where}")
        last = sorted(glob.glob(os.path.join(tmp, "_delta_log", "*.json")))[-1]
        for line in open(last):
            dv = json.loads(line).get("add", {}).get("deletionVector")
            if dv:
                vectors.append({"deleted": where, "deletionVector": dv})
    os.makedirs(path)
    for f in glob.glob(os.path.join(tmp, "deletion_vector_*.bin")):
        shutil.copy(f, path)
    with open(os.path.join(path, "vectors.json"), "w") as f:
        json.dump({"rows": 70000, "vectors": vectors}, f, indent=1)
        f.write("\n")
    shutil.rmtree(tmp)


FIXTURES = [
    ("dv", make_dv),
    ("colmap-name", make_colmap("name")),
    ("colmap-id", make_colmap("id")),
    ("v2checkpoint", make_v2checkpoint),
    ("v2checkpoint-parquet", lambda spark, path: make_v2checkpoint(spark, path, "parquet")),
    ("ict", make_ict),
    ("constraints", make_constraints),
    ("generated", make_generated),
    ("cdf", make_cdf),
    ("rowtracking", make_rowtracking),
    ("identity", make_identity),
    ("typewidening", make_typewidening),
    ("dv-vectors", make_dv_vectors),
]


def main():
    only = set(sys.argv[1:])
    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    failed = []
    for name, make in FIXTURES:
        if only and name not in only:
            continue
        path = os.path.join(HERE, name)
        shutil.rmtree(path, ignore_errors=True)
        try:
            make(spark, path)
            if name != "dv-vectors":
                finish(spark, name, path)
        except Exception as e:  # this Spark cannot make the feature: leave it out
            shutil.rmtree(path, ignore_errors=True)
            failed.append(name)
            print(f"{name}: not generated: {str(e).splitlines()[0]}", file=sys.stderr)
        if name == "dv":
            inline = os.path.join(HERE, "dv-inline")
            shutil.rmtree(inline, ignore_errors=True)
            make_dv_inline(spark, path, inline)
            finish(spark, "dv-inline", inline)
    print("not generated: " + (", ".join(failed) or "none"), file=sys.stderr)


if __name__ == "__main__":
    main()
