#!/usr/bin/env python3
"""Generate the delta-spark 4 fixtures under delta/testdata/spark4-features/.

Each fixture is a small Delta table made by real delta-spark 4.4.0 on
pyspark 4.2.0 (scripts/spark4/session.py; the jar io.delta:delta-spark_4.2_2.13
comes from Maven Central), plus `expected.json`: what Spark reads with data
skipping off (queries are counted on the rows collected, not on the
table), rendered like
scripts/deltars.py renders delta-rs rows, variants as to_json text.

Rerun (Java 17; scripts/install-deps.sh makes the venv and resolves the jar):

    $DELTAFLOW_CACHE/venv-spark4/bin/python delta/testdata/spark4-features/generate.py [NAME...]

It deletes and rewrites every fixture directory it knows (or those named).
Hadoop's .crc side files are dropped; Delta's own _delta_log/*.crc version
checksums are kept, as Spark 4 writes them. The tests read each fixture from
a copy (delta/spark4_test.go, runtime/cli).

expected.json: `version`; `rows` (latest version); `rowsByVersion`;
`queries`: [{where, sql, count}] — a deltaflow --where filter, the same
predicate in Spark SQL, and the rows Spark counts with it; `rowIds` (row
tracking fixtures): id, _metadata.row_id and _metadata.row_commit_version of
every row; `json` (variant fixtures): the text parse_json read for each id.

Fixtures:
  default         a plain partitioned table, as CREATE TABLE makes one.
  cdf             change data feed, an UPDATE.
  colmap-readd    a table without column mapping gets it (name mode); then
                  raw_payload and score are dropped and added again with the
                  same names (score as BIGINT): the old files' stats are keyed
                  by the old columns' physical names, the new names' display
                  names (issue 20, item 1).
  typewidening    typeWidening: FLOAT->DOUBLE, SMALLINT->INT, INT->BIGINT,
                  INT->DOUBLE, DECIMAL(5,2)->DECIMAL(8,3), INT->DECIMAL(12,2)
                  after one insert, then more rows (item 2).
  rowtracking     what Unity Catalog tables turn on: row tracking, deletion
                  vectors, in-commit timestamps, checkpointPolicy=v2; a
                  DELETE (a DV) and Spark's OPTIMIZE (materialized row ids).
  materialize     materializePartitionColumns: partition values also in the
                  data files.
  clustered       liquid clustering by id: two appends, Spark's OPTIMIZE
                  (clusteringProvider liquid), two more appends.
  v2checkpoint    checkpointPolicy=v2 with checkpointInterval 2: Spark's V2
                  checkpoint (UUID-named, Parquet, sidecars) at version 2.
  variant         a VARIANT column: objects, arrays, numbers of each kind,
                  long and non-ASCII strings, JSON null and SQL NULL.
  variant-shredded  the same rows written shredded (variantShredding-preview,
                  typed_value columns for a, b and c).
"""
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts", "spark4"))
import session  # noqa: E402
from rowjson import sql  # noqa: E402
import rowjson  # noqa: E402


def unskipped(spark, path):
    """The table's rows as a plain DataFrame: filters on it skip no file."""
    df = session.frame(spark, path)
    return spark.createDataFrame(df.collect(), df.schema)


def finish(spark, name, path, queries=(), row_ids=False, extra=None):
    """Write expected.json."""
    hist = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    versions = sorted(h["version"] for h in hist)
    exp = {
        "version": versions[-1],
        "rows": session.rows_of(spark, path),
        "rowsByVersion": {str(v): session.rows_of(spark, path, v) for v in versions},
        "queries": [{"where": w, "sql": s, "count": unskipped(spark, path).where(s).count()} for w, s in queries],
    }
    if row_ids:
        exp["rowIds"] = session.row_ids(spark, path)
    exp.update(extra or {})
    rowjson.write_expected(name, path, exp)


def make_default(spark, t):
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT, part STRING, name STRING, ts TIMESTAMP) USING delta PARTITIONED BY (part)",
        f"INSERT INTO {t} VALUES (1, 'a', 'one', TIMESTAMP'2026-06-22 09:15:30.123456'), (2, 'b', 'two', NULL)",
        f"INSERT INTO {t} VALUES (3, 'a', 'three', TIMESTAMP'2026-06-23 00:00:00')")


def make_cdf(spark, t):
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT, name STRING) USING delta TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')",
        f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')",
        f"UPDATE {t} SET name = 'bb' WHERE id = 2")


def make_colmap_readd(spark, t):
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT, raw_payload STRING, score INT) USING delta",
        f"INSERT INTO {t} SELECT id, concat('{{\"n\": ', id, '}}'), CAST(100 + id AS INT) FROM range(0, 20)",
        f"ALTER TABLE {t} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
        "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')",
        f"ALTER TABLE {t} DROP COLUMNS (raw_payload, score)",
        f"ALTER TABLE {t} ADD COLUMNS (raw_payload STRING, score BIGINT)",
        f"INSERT INTO {t} VALUES (20, '{{\"n\": 20}}', 5), (21, NULL, NULL)")


COLMAP_QUERIES = [
    ("raw_payload = null", "raw_payload IS NULL"),
    ("raw_payload != null", "raw_payload IS NOT NULL"),
    ("score = null", "score IS NULL"),
    ("score != null", "score IS NOT NULL"),
    ("score >= 100", "score >= 100"),
    ("score < 10", "score < 10"),
    ("id >= 5 AND raw_payload = null", "id >= 5 AND raw_payload IS NULL"),
]


def make_typewidening(spark, t):
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT, part STRING, ratio FLOAT, small SMALLINT, mid INT, n INT, "
        "dec DECIMAL(5,2), i2 INT) USING delta PARTITIONED BY (part) TBLPROPERTIES ('delta.enableTypeWidening' = 'true')",
        f"INSERT INTO {t} VALUES (1, 'a', 0.8, 2, 7, 5, 1.25, 9), (2, 'a', 0.1, -3, -7, -5, -1.5, -9), "
        "(3, 'b', 2.5, 300, 70000, 6, 999.99, 2147483647)")
    for col, typ in [("ratio", "DOUBLE"), ("small", "INT"), ("mid", "BIGINT"), ("n", "DOUBLE"),
                     ("dec", "DECIMAL(8,3)"), ("i2", "DECIMAL(12,2)")]:
        spark.sql(f"ALTER TABLE {t} ALTER COLUMN {col} TYPE {typ}")
    sql(spark, f"INSERT INTO {t} VALUES (4, 'a', 0.9, 100000, 3000000000, 2.5, 12345.678, 1234567890.12)")


TYPEWIDENING_QUERIES = [
    ("ratio > 0.8", "ratio > 0.8"),
    ("ratio >= 0.8", "ratio >= 0.8"),
    ("ratio = 0.8", "ratio = 0.8"),
    ("ratio < 0.10000001", "ratio < 0.10000001"),
    ("ratio <= 0.1", "ratio <= 0.1"),
    ("ratio > 2.5", "ratio > 2.5"),
    ("small > 299", "small > 299"),
    ("mid >= 70000", "mid >= 70000"),
    ("n > 5.5", "n > 5.5"),
    ("dec >= 999.99", "dec >= 999.99"),
    ("i2 >= 2147483647", "i2 >= 2147483647"),
]


def make_rowtracking(spark, t):
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT, part STRING, name STRING) USING delta PARTITIONED BY (part) TBLPROPERTIES ("
        "'delta.enableRowTracking' = 'true', 'delta.enableDeletionVectors' = 'true', "
        "'delta.enableInCommitTimestamps' = 'true', 'delta.checkpointPolicy' = 'v2')",
        f"INSERT INTO {t} SELECT id, IF(id < 4, 'a', 'b'), concat('n', id) FROM range(0, 6)",
        f"INSERT INTO {t} VALUES (6, 'a', 'n6'), (7, 'b', 'n7')",
        f"DELETE FROM {t} WHERE id = 2",
        f"OPTIMIZE {t} WHERE part = 'b'")


def make_materialize(spark, t):
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT, part STRING, name STRING) USING delta PARTITIONED BY (part) "
        "TBLPROPERTIES ('delta.feature.materializePartitionColumns' = 'supported')",
        f"INSERT INTO {t} VALUES (1, 'a', 'one'), (2, 'b', 'two')",
        f"INSERT INTO {t} VALUES (3, 'a', 'three')")


def make_clustered(spark, t):
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT, name STRING) USING delta CLUSTER BY (id)",
        f"INSERT INTO {t} VALUES (5, 'e'), (1, 'a')",
        f"INSERT INTO {t} VALUES (3, 'c')",
        f"OPTIMIZE {t}",
        f"INSERT INTO {t} VALUES (2, 'b')",
        f"INSERT INTO {t} VALUES (4, 'd')")


def make_v2checkpoint(spark, t):
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT, name STRING) USING delta "
        "TBLPROPERTIES ('delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '2')",
        f"INSERT INTO {t} VALUES (1, 'a')",
        f"INSERT INTO {t} VALUES (2, 'b')",
        f"INSERT INTO {t} VALUES (3, 'c')")


VARIANT_JSON = [
    '{"power": 84.3, "voltage": 230.1, "current": 0.37, "energy": 12.4, "state": "ON", "linkquality": 248}',
    '{"contact": false, "battery": 97, "linkquality": 159}',
    '{"a": 1, "b": "x", "c": [1, 2, 3], "nested": {"deep": {"k": [true, null, {"z": -1}]}}}',
    '{"a": "not an int", "b": 2, "big": 123456789012345678901234567890, "huge": 1e300, "neg": -0.001}',
    '{"s": "' + "long string " * 8 + '", "u": "\\u00e9\\u2713 \\ud83d\\ude00", "esc": "q\\"b\\\\n\\n"}',
    '[1, "two", 3.5, null, {"a": 1}]',
    '42',
    '"just a string"',
    'null',
    '{}',
    '{"int8": 127, "int16": 32767, "int32": 2147483647, "int64": 9223372036854775807, "exp": 2.5E-3}',
]


def make_variant(spark, t, shredded=False):
    props = "TBLPROPERTIES ('delta.enableVariantShredding' = 'true')" if shredded else ""
    sql(spark, f"CREATE TABLE {t} (id BIGINT, part STRING, v VARIANT) USING delta PARTITIONED BY (part) {props}")
    if shredded:
        spark.conf.set("spark.sql.variant.writeShredding.enabled", "true")
        spark.conf.set("spark.sql.variant.forceShreddingSchemaForTest", "a int, b string, c array<int>")
    values = ", ".join(f"({i}, '{'a' if i % 2 else 'b'}', parse_json({json.dumps(j)}))" for i, j in enumerate(VARIANT_JSON))
    try:
        sql(spark, f"INSERT INTO {t} VALUES {values}", f"INSERT INTO {t} VALUES (100, 'a', NULL)")
    finally:
        spark.conf.unset("spark.sql.variant.writeShredding.enabled")
        spark.conf.unset("spark.sql.variant.forceShreddingSchemaForTest")


VARIANT_INPUTS = {"json": {str(i): j for i, j in enumerate(VARIANT_JSON)}}

FIXTURES = [
    ("default", make_default, (), False, None),
    ("cdf", make_cdf, (), False, None),
    ("colmap-readd", make_colmap_readd, COLMAP_QUERIES, False, None),
    ("typewidening", make_typewidening, TYPEWIDENING_QUERIES, False, None),
    ("rowtracking", make_rowtracking, (), True, None),
    ("materialize", make_materialize, (), False, None),
    ("clustered", make_clustered, (), False, None),
    ("v2checkpoint", make_v2checkpoint, (), False, None),
    ("variant", make_variant, (), False, VARIANT_INPUTS),
    ("variant-shredded", lambda spark, t: make_variant(spark, t, shredded=True), (), False, VARIANT_INPUTS),
]


def main():
    only = set(sys.argv[1:])
    spark = session.build("deltaflow-spark4-fixtures")
    for name, make, queries, row_ids, extra in FIXTURES:
        if only and name not in only:
            continue
        path = os.path.join(HERE, name)
        shutil.rmtree(path, ignore_errors=True)
        make(spark, f"delta.`{path}`")
        finish(spark, name, path, queries, row_ids, extra)
    spark.stop()


if __name__ == "__main__":
    main()
