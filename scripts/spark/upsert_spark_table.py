"""Spark makes, with deletion vectors, the accounts table deltaflow then
upserts into (internal/tests/upsert).

  upsert_spark_table.py TABLE_DIR

Creates the table at TABLE_DIR with Spark 3.5.1 / Delta 3.2.0: columns id
BIGINT, name STRING, balance BIGINT (all nullable, as deltaflow's upsert
config declares them), deletion vectors on. Two INSERTs of three files
each: ids 0..199, then 200..399, spread round-robin over the files, as
name "s<id>" and balance id * 10. Then a DELETE of the ids divisible by 7
(a deletion vector on every file) and an UPDATE of the ids divisible by 5
(name "u" + name, balance -balance: deletion vectors on the old files, the
new rows in new files). Reads the table back and replays its log. Prints,
on the last line, {"rows": [{id, name, balance, file}] sorted by id (file:
the name of the data file the row is in), "files": [{path, dv, records}]
(the live adds, dv their deletion vector's cardinality or null),
"protocol": the protocol action, "operations": the commits' operations}.
One JVM.
"""
import glob
import json
import os
import sys
import urllib.parse

import session

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from rowjson import sql  # noqa: E402


def build(spark, path):
    t = f"delta.`{path}`"
    sql(spark,
        f"CREATE TABLE {t} (id BIGINT, name STRING, balance BIGINT) USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    for lo, hi in ((0, 200), (200, 400)):
        sql(spark,
            f"INSERT INTO {t} SELECT /*+ REPARTITION(3) */ id, concat('s', id), id * 10 FROM range({lo}, {hi})")
    sql(spark,
        f"DELETE FROM {t} WHERE id % 7 = 0",
        f"UPDATE {t} SET name = concat('u', name), balance = -balance WHERE id % 5 = 0")


def file_id(action):
    """A logical file of the log: its path and deletion vector (a commit
    removes a file and adds it back with a new deletion vector, in either
    order)."""
    dv = action.get("deletionVector")
    return action["path"], dv and (dv["storageType"], dv["pathOrInlineDv"], dv.get("offset"))


def replay(path):
    """The live adds, the protocol and the operations of the table's log
    (JSON commits only: Spark checkpoints every 10th, and these are 5)."""
    live, protocol, ops = {}, None, []
    commits = sorted(glob.glob(os.path.join(path, "_delta_log", "*.json")))
    for c in commits:
        with open(c) as f:
            for line in f:
                a = json.loads(line)
                if "add" in a:
                    live[file_id(a["add"])] = a["add"]
                elif "remove" in a:
                    live.pop(file_id(a["remove"]), None)
                elif "protocol" in a:
                    protocol = a["protocol"]
                elif "commitInfo" in a:
                    ops.append(a["commitInfo"]["operation"])
    files = []
    for (p, _), add in sorted(live.items(), key=lambda kv: kv[0][0]):
        dv = add.get("deletionVector")
        files.append({
            "path": urllib.parse.unquote(p),
            "dv": dv["cardinality"] if dv else None,
            "records": json.loads(add["stats"])["numRecords"] if add.get("stats") else None,
        })
    return files, protocol, ops


def main():
    path = os.path.abspath(sys.argv[1])
    spark = session.build("deltaflow-upsert-spark-table")
    build(spark, path)
    df = spark.read.format("delta").load(path).select("id", "name", "balance", "_metadata.file_name")
    rows = sorted(({"id": r["id"], "name": r["name"], "balance": r["balance"], "file": r["file_name"]}
                   for r in df.collect()), key=lambda r: r["id"])
    spark.stop()
    files, protocol, ops = replay(path)
    json.dump({"rows": rows, "files": files, "protocol": protocol, "operations": ops}, sys.stdout)


if __name__ == "__main__":
    main()
