#!/usr/bin/env python3
"""Spark 4's reading of tables deltaflow wrote, for delta/spark4_test.go.

    check.py REQUEST.json

REQUEST is {"tables": [{"name", "path", "version" (optional), "rowIds"
(bool)}]}. One JVM reads every table (the checks of the whole suite share
it) and prints {name: {"rows": [...], "types": {...}, "rowIds": [...],
"error": "..."}} on stdout: rows rendered as scripts/deltars.py renders
delta-rs rows, variants as to_json text; types each column's Spark type
(simpleString); rowIds as [id, _metadata.row_id, _metadata.row_commit_version];
error is the first lines of the exception Spark raised reading the table.
"""
import json
import sys

import session


def main():
    with open(sys.argv[1]) as f:
        req = json.load(f)
    spark = session.build("deltaflow-spark4-check")
    out = {}
    for t in req["tables"]:
        res = {}
        try:
            res["rows"] = session.rows_of(spark, t["path"], t.get("version"))
            res["types"] = session.types_of(spark, t["path"], t.get("version"))
            if t.get("rowIds"):
                res["rowIds"] = session.row_ids(spark, t["path"])
        except Exception as e:  # the verdict on this table: reported, not fatal
            # Py4J's first line only names the call; the next has the cause.
            res["error"] = " ".join(str(e).strip().splitlines()[:2])
        out[t["name"]] = res
    spark.stop()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
