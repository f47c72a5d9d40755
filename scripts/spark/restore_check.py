"""Spark's RESTORE next to `deltaflow restore`, in one JVM, for
internal/tests/restore.

  restore_check.py --deltaflow BIN --dir DIR

Builds a table with Spark 3.5.1 / Delta 3.2.0 (deletion vectors on): three
partitioned appends (one partition value with a space, one with '='), an
OPTIMIZE, a DELETE (deletion vectors), ADD COLUMNS, an append, another
DELETE. For each case (a version, or the commit time of one) it copies the
table twice, runs Spark's RESTORE TABLE on one copy and BIN restore on the
other, and reads both back with Spark: rows, the files Spark reads, the
schema and the RESTORE commit as DESCRIBE HISTORY shows it. Then it vacuums
a copy (retention 0) and asks both to restore a version whose files are
gone. Prints one JSON document, on the last line.
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys

import session

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from rowjson import render, sql  # noqa: E402

PARTS = ["a", "b c", "d=e"]


def build(spark, path):
    sql(spark,
        f"CREATE TABLE delta.`{path}` (id BIGINT, part STRING, v DOUBLE) USING delta PARTITIONED BY (part) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    for lo in (0, 20, 40):
        rows = ", ".join(f"({i}, '{PARTS[i % 3]}', {i * 1.5})" for i in range(lo, lo + 20))
        sql(spark, f"INSERT INTO delta.`{path}` VALUES {rows}")
    sql(spark,
        f"OPTIMIZE delta.`{path}`",
        f"DELETE FROM delta.`{path}` WHERE id % 7 = 0",
        f"ALTER TABLE delta.`{path}` ADD COLUMNS (w STRING)")
    rows = ", ".join(f"({i}, '{PARTS[i % 3]}', {i * 1.5}, 'w{i}')" for i in range(60, 70))
    sql(spark,
        f"INSERT INTO delta.`{path}` VALUES {rows}",
        f"DELETE FROM delta.`{path}` WHERE id % 5 = 0")


def commit_time(path, version):
    """The commit's time as Spark's time travel reads it (the file's
    modification time, in ms), as a timestamp literal in UTC."""
    ms = os.stat(os.path.join(path, "_delta_log", "%020d.json" % version)).st_mtime_ns // 1_000_000
    t = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + "%03d" % (ms % 1000)


def deltaflow(bin_path, *args):
    p = subprocess.run([bin_path, "restore", *args], capture_output=True, text=True)
    return {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}


def view(spark, path):
    df = spark.read.format("delta").load(path)
    rows = [{k: render(v) for k, v in r.asDict().items()} for r in df.collect()]
    rows.sort(key=lambda r: json.dumps(r, sort_keys=True))
    root = "file:" + path + "/"
    h = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]
    return {
        "rows": rows,
        "files": sorted(f[len(root):] if f.startswith(root) else f for f in df.inputFiles()),
        "columns": df.columns,
        "version": h["version"],
        "operation": h["operation"],
        "operationParameters": dict(h["operationParameters"] or {}),
        "operationMetrics": dict(h["operationMetrics"] or {}),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--deltaflow", required=True)
    p.add_argument("--dir", required=True)
    a = p.parse_args()
    spark = session.build("restore-check")
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    base = os.path.join(a.dir, "base")
    build(spark, base)
    out = {"latest": view(spark, base)["version"], "cases": {}}
    # 3: before OPTIMIZE (by its commit time); 5: the first deletion
    # vectors; 7: after ADD COLUMNS, before the second DELETE's vectors.
    cases = {"ts3": ("TIMESTAMP", commit_time(base, 3)), "v5": ("VERSION", 5), "v7": ("VERSION", 7)}
    for name, (kind, at) in cases.items():
        ours, theirs = os.path.join(a.dir, name + "-deltaflow"), os.path.join(a.dir, name + "-spark")
        shutil.copytree(base, ours)
        shutil.copytree(base, theirs)
        literal = at if kind == "VERSION" else f"'{at}'"
        sql(spark, f"RESTORE TABLE delta.`{theirs}` TO {kind} AS OF {literal}")
        run = deltaflow(a.deltaflow, "--table", ours, "--" + kind.lower(), str(at), "--json")
        out["cases"][name] = {"deltaflowDir": ours, "sparkDir": theirs, "deltaflowRun": run,
                              "deltaflow": view(spark, ours) if run["rc"] == 0 else None, "spark": view(spark, theirs)}
    # Vacuumed: the appends' files went with OPTIMIZE at version 4.
    vac = os.path.join(a.dir, "vacuumed")
    shutil.copytree(base, vac)
    sql(spark, f"VACUUM delta.`{vac}` RETAIN 0 HOURS")
    before = view(spark, vac)["version"]
    try:
        sql(spark, f"RESTORE TABLE delta.`{vac}` TO VERSION AS OF 3")
        spark_error = None
    except Exception as e:  # py4j / AnalysisException: what Spark says
        spark_error = str(e).splitlines()[0]
    out["vacuumed"] = {"dir": vac, "versionBefore": before, "sparkError": spark_error,
                       "dryRun": deltaflow(a.deltaflow, "--table", vac, "--version", "3", "--dry-run"),
                       "run": deltaflow(a.deltaflow, "--table", vac, "--version", "3"),
                       "versionAfter": view(spark, vac)["version"]}
    spark.stop()
    # The last line: Ivy and VACUUM print on stdout too.
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
