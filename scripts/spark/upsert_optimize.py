"""Spark's OPTIMIZE racing deltaflow's upserts on one table.

  upsert_optimize.py --stop FILE [--go-dir DIR | --sleep S] [--ops OPS]
                     [--max-retries N] [--max-seconds S] TABLE_DIR

Builds the session and reads the table once, printing a "ready" line; then
runs rounds until the file --stop exists (or --max-seconds pass): round n
runs the n-th of --ops (a comma-separated list, cycled; default
OPTIMIZE,OPTIMIZE,REORG): OPTIMIZE is `OPTIMIZE` of the table, REORG
`REORG TABLE ... APPLY (PURGE)`. With --go-dir, round n starts once
DIR/go-<n> exists (the caller paces the rounds); without, rounds follow
each other --sleep seconds apart. A round that loses to a concurrent commit (Delta's
ConcurrentDeleteRead / ConcurrentDeleteDelete / ConcurrentAppend / ...
exceptions: deltaflow committed an epoch touching a file the round read) is
Spark's own conflict, and is retried, up to --max-retries times in a row.
Each round prints a JSON line {"event": "round", "round", "op",
"attempts", "retries", "errors", "filesAdded", "filesRemoved", "seconds"}.

Once --stop exists (deltaflow has caught up and stopped), it reads the
table (deletion vectors applied) and prints a last JSON line {"event":
"done", "rounds", "retries", "rows"}, rows sorted by id. One JVM.

OPTIMIZE's own retry (OptimizeExecutor.commitAndRetry, after a conflict,
when every file it compacted is still in the table by path) is logged at
INFO on stderr: "Retrying commit after checking for semantic conflicts".
That retry commits the actions of the first attempt: a file a concurrent
commit gave a new deletion vector is removed with its old one, and
compacted with the rows the new one deletes (delta-spark 3.2.0). A caller
that needs a correct table paces the rounds (--go-dir) so that no commit
changes a file's deletion vector while a round runs.
"""
import argparse
import json
import os
import sys
import time

from delta.exceptions import (ConcurrentAppendException, ConcurrentDeleteDeleteException,
                              ConcurrentDeleteReadException, ConcurrentTransactionException,
                              ConcurrentWriteException, DeltaConcurrentModificationException,
                              MetadataChangedException, ProtocolChangedException)

import session

CONFLICTS = (ConcurrentAppendException, ConcurrentDeleteDeleteException, ConcurrentDeleteReadException,
             ConcurrentTransactionException, ConcurrentWriteException, DeltaConcurrentModificationException,
             MetadataChangedException, ProtocolChangedException)


def is_conflict(e):
    """Whether e is Delta's commit conflict (a concurrent writer won)."""
    if isinstance(e, CONFLICTS):
        return True
    text = str(e)
    return "io.delta.exceptions.Concurrent" in text or "DELTA_CONCURRENT" in text


def emit(obj):
    print(json.dumps(obj), flush=True)


def rows(spark, path):
    df = spark.read.format("delta").load(path)
    return sorted((r.asDict() for r in df.select("id", "name", "balance").collect()), key=lambda r: r["id"])


def run_round(spark, table, op, max_retries):
    """Runs op until it commits (or has nothing to do), retrying conflicts."""
    sql = {"OPTIMIZE": f"OPTIMIZE delta.`{table}`",
           "REORG": f"REORG TABLE delta.`{table}` APPLY (PURGE)"}[op]
    errors = []
    t0 = time.monotonic()
    for attempt in range(1, max_retries + 2):
        try:
            out = spark.sql(sql).collect()
        except Exception as e:  # noqa: BLE001: conflicts are retried, the rest raised
            if not is_conflict(e) or attempt > max_retries:
                raise
            errors.append(f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
            time.sleep(0.2)
            continue
        metrics = out[0]["metrics"] if out else None
        return {"event": "round", "op": op, "attempts": attempt, "retries": attempt - 1, "errors": errors,
                "filesAdded": metrics["numFilesAdded"] if metrics else None,
                "filesRemoved": metrics["numFilesRemoved"] if metrics else None,
                "seconds": round(time.monotonic() - t0, 2)}
    raise AssertionError("unreachable")


def wait_for(*paths):
    """Waits until one of paths exists and returns it."""
    while True:
        for p in paths:
            if os.path.exists(p):
                return p
        time.sleep(0.05)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--stop", required=True)
    p.add_argument("--go-dir")
    p.add_argument("--sleep", type=float, default=1.5)
    p.add_argument("--ops", default="OPTIMIZE,OPTIMIZE,REORG")
    p.add_argument("--max-retries", type=int, default=50)
    p.add_argument("--max-seconds", type=float, default=300)
    p.add_argument("table")
    a = p.parse_args()

    spark = session.build("deltaflow-upsert-optimize")
    # OPTIMIZE's own retry after a conflict ("Retrying commit after checking
    # for semantic conflicts") logs at INFO: on stderr for the test to count.
    jvm = spark.sparkContext._jvm
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.sql.delta.commands.OptimizeExecutor", jvm.org.apache.logging.log4j.Level.INFO)
    spark.read.format("delta").load(a.table).count()  # the table is there, and Delta's classes loaded
    emit({"event": "ready"})
    start = time.monotonic()
    rounds, retries = 0, 0
    while time.monotonic() - start < a.max_seconds:
        n = rounds + 1
        if a.go_dir:
            if wait_for(os.path.join(a.go_dir, f"go-{n}"), a.stop) == a.stop:
                break
        elif os.path.exists(a.stop):
            break
        ops = a.ops.split(",")
        op = ops[(n - 1) % len(ops)]
        r = run_round(spark, a.table, op, a.max_retries)
        r["round"] = n
        rounds += 1
        retries += r["retries"]
        emit(r)
        if not a.go_dir:
            time.sleep(a.sleep)
    wait_for(a.stop)
    emit({"event": "done", "rounds": rounds, "retries": retries, "rows": rows(spark, a.table)})
    spark.stop()


if __name__ == "__main__":
    sys.exit(main())
