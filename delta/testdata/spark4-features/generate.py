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
  variant-types   a VARIANT of every scalar type Spark SQL makes (decimals
                  with trailing zeros at scales 0 to 37, floats and doubles
                  with exponents, NaN and infinities, dates and timestamps
                  of years 0 to 10000, timestamp_ntz, binaries, strings
                  needing escapes, booleans, nulls), each alone, as a field
                  of objects and in arrays: Spark's to_json of each is how
                  deltaflow must render it (issue 29, item 8).
  variant-types-shredded  the same rows written shredded: the objects'
                  fields in typed_value columns (a decimal(18,4) holds 4.0
                  as 4.0000).
"""
import json
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


def _cast(typ, *texts):
    return [f"CAST(CAST('{t}' AS {typ}) AS VARIANT)" for t in texts]


# Variant scalars by kind (the object field each kind fills): JSON text
# (parse_json, the rest as in VARIANT_JSON) or a SQL expression of a
# VARIANT. Values whose Java rendering depends on the JVM are left out:
# Double.toString and Float.toString print the shortest digits only from
# Java 19 (Java 17 prints 1e23 as 9.999999999999999E22, Float.MIN_NORMAL as
# 1.17549435E-38).
VARIANT_SCALARS = {
    "d": ["4.0", "4.00", "100.0", "0.0", "-0.0", "-1.50", "0.000", "10.01", "0.10", "0.0000001000",
          "1000000000.000000000", "12345678901234567890.10", "-99999999999999999999999999999999999.90",
          "1." + "0" * 37, "123456789", "-123456789.000"]
         + [f"CAST(CAST('{v}' AS DECIMAL({p},{s})) AS VARIANT)" for v, p, s in [
             ("4", 10, 2), ("-0.5", 38, 20), ("1200", 6, 0), ("0", 3, 2), ("0.0000001", 18, 10),
             ("1" + "0" * 37, 38, 0), ("0.1", 9, 9), ("-1", 38, 37), ("12345678901234567", 19, 2),
             ("9.9", 18, 17)]],
    "f": _cast("FLOAT", "1.5", "NaN", "Infinity", "-Infinity", "1e-5", "1e7", "0.1", "-0.0", "3.4028235e38",
               "1.4e-45", "100", "9999999", "0.001", "16777216", "2e-8"),
    "g": ["1e300", "1e-300", "4.9e-324", "1.7976931348623157e308", "1e2", "2.5E-3", "1E-7", "1.5e3", "-2.5e-10"]
         + _cast("DOUBLE", "NaN", "Infinity", "-Infinity", "-0.0", "1e7", "9999999", "0.001", "9.999e-4", "2",
                 "123456789012.5", "0.1", "1e-5", "1e21"),
    "dt": _cast("DATE", "2024-02-29", "0001-01-01", "9999-12-31", "1500-03-01", "1582-10-10", "1969-12-31",
                "1970-01-01")
          + ["CAST(date_add(DATE'9999-12-31', 1) AS VARIANT)", "CAST(date_add(DATE'0001-01-01', -1) AS VARIANT)",
             "CAST(date_add(DATE'0001-01-01', -400) AS VARIANT)"],
    "ts": _cast("TIMESTAMP", "2024-01-01 00:00:00", "2024-01-01 12:34:56.5", "2024-01-01 12:34:56.123456",
                "2024-01-01 00:00:00.000001", "1969-12-31 23:59:59.999999", "0001-01-01 00:00:00",
                "1500-03-01 01:02:03.010", "9999-12-31 23:59:59.999999", "2024-06-01 12:00:00+02:00")
          + ["CAST(timestamp_seconds(253402300800) AS VARIANT)", "CAST(timestamp_seconds(-62135596801) AS VARIANT)"],
    "ntz": _cast("TIMESTAMP_NTZ", "2024-01-01 00:00:00", "2024-01-01 12:34:56.000100", "1969-12-31 23:59:59.9",
                 "0001-01-01 00:00:00", "9999-12-31 23:59:59.999999", "2024-01-01 12:34:56.123456"),
    "bin": ["CAST(X'' AS VARIANT)", "CAST(X'00FF' AS VARIANT)", "CAST(X'DEADBEEFCA' AS VARIANT)",
            "CAST(X'FBFF' AS VARIANT)", "CAST(unhex(repeat('AB', 100)) AS VARIANT)"],
    "s": ['""', '"plain"', '"q\\"b\\\\n\\n\\t\\r\\b\\f"', '"\\u0001\\u001f\\u007f\\u2028 </a>"',
          '"\\u00e9\\u2713 \\ud83d\\ude00"', '"' + "long string " * 8 + '"'],
    "b": ["true", "false"],
    "i": ["127", "-128", "32767", "-32768", "2147483647", "-2147483648", "9223372036854775807",
          "-9223372036854775808", "0"]
         + [f"CAST(CAST({v} AS {t}) AS VARIANT)" for v, t in [(-5, "TINYINT"), (300, "SMALLINT"), (70000, "INT")]],
    "n": ["null"],
}

# The objects' shredding schema (variant-types-shredded): one typed column
# per kind.
VARIANT_SCALARS_SHREDDED = ("b boolean, bin binary, d decimal(18,4), dt date, f float, g double, i bigint, "
                            "ntz timestamp_ntz, s string, ts timestamp")


def _variant(v):
    """A VARIANT_SCALARS value as SQL."""
    return v if v.startswith("CAST(") else f"parse_json({json.dumps(v)})"


def variant_types_rows():
    """(id, kind, SQL of the VARIANT) of every row, and the JSON texts of
    the parse_json ones by id."""
    rows, texts = [], {}

    def add(kind, expr, text=None):
        if text is not None:
            texts[str(len(rows))] = text
        rows.append((len(rows), kind, expr))

    for kind, values in VARIANT_SCALARS.items():  # each alone
        for v in values:
            add(kind, _variant(v), None if v.startswith("CAST(") else v)
    for k in range(max(len(vs) for vs in VARIANT_SCALARS.values())):  # objects of the k-th value of each kind
        add("object", "to_variant_object(named_struct(" +
            ", ".join(f"'{kind}', {_variant(vs[k % len(vs)])}" for kind, vs in VARIANT_SCALARS.items()) + "))")
    for values in VARIANT_SCALARS.values():  # an array of each kind
        add("array", f"to_variant_object(array({', '.join(_variant(v) for v in values)}))")
    add("object", "to_variant_object(named_struct('a', array(named_struct('b', CAST(1.50 AS DECIMAL(4,2)), "
        "'c', array(DATE'2024-01-01'))), 'e', named_struct(), 'm', map('k \\\"q\\\"', CAST(2.0 AS FLOAT))))")
    nested = '{"x": [], "y": {}, "z": [[1.0, {"w": 0.50}], -0.0]}'
    add("nested", _variant(nested), nested)
    add("null", "NULL")
    return rows, texts


def make_variant_types(spark, t, shredded=False):
    props = "TBLPROPERTIES ('delta.enableVariantShredding' = 'true')" if shredded else ""
    sql(spark, f"CREATE TABLE {t} (id BIGINT, kind STRING, v VARIANT) USING delta {props}")
    if shredded:
        spark.conf.set("spark.sql.variant.writeShredding.enabled", "true")
        spark.conf.set("spark.sql.variant.forceShreddingSchemaForTest", VARIANT_SCALARS_SHREDDED)
    rows, _ = variant_types_rows()
    try:
        sql(spark, f"INSERT INTO {t} VALUES " + ", ".join(f"({i}, '{k}', {e})" for i, k, e in rows))
    finally:
        spark.conf.unset("spark.sql.variant.writeShredding.enabled")
        spark.conf.unset("spark.sql.variant.forceShreddingSchemaForTest")


VARIANT_TYPES_INPUTS = {"json": variant_types_rows()[1]}

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
    ("variant-types", make_variant_types, (), False, VARIANT_TYPES_INPUTS),
    ("variant-types-shredded", lambda spark, t: make_variant_types(spark, t, shredded=True), (), False,
     VARIANT_TYPES_INPUTS),
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
