"""Rows as JSON, as deltaflow's Go tests compare them: shared by the delta-rs
oracle (deltars.py), the Spark 4 checks (spark4/) and the fixture generators
(delta/testdata/*/generate.py). Pure Python, for any of their venvs."""
import base64
import datetime
import decimal
import glob
import json
import math
import os
import sys


def render(v):
    """Render a value the way deltaflow's Go tests render theirs."""
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "+Inf" if v > 0 else "-Inf"
        return v
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        # Not strftime: glibc's %Y does not pad years before 1000 ("1-01-01").
        return "%04d-%02d-%02dT%02d:%02d:%02d.%06d" % (
            v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond)
    if isinstance(v, datetime.date):
        return "%04d-%02d-%02d" % (v.year, v.month, v.day)
    if isinstance(v, decimal.Decimal):
        # Plain notation with the value's own scale, as delta.Row holds a
        # decimal ("0.0000000000" for a zero of scale 10, where str()
        # writes "0E-10").
        return format(v, "f")
    if isinstance(v, (bytes, bytearray)):
        return "b64:" + base64.b64encode(bytes(v)).decode()
    if isinstance(v, dict):
        return {k: render(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [render(x) for x in v]
    return str(v)


def write_expected(name, path, exp):
    """Write a fixture's expected.json, dropping Hadoop's .crc side files
    (Delta's own _delta_log/*.crc version checksums stay)."""
    for f in glob.glob(os.path.join(path, "**", ".*.crc"), recursive=True):
        os.remove(f)
    with open(os.path.join(path, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{name}: version {exp['version']}, {len(exp['rows'])} rows", file=sys.stderr)


def sql(spark, *stmts):
    """Run SQL statements in order."""
    for s in stmts:
        spark.sql(s)
