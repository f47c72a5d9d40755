#!/usr/bin/env python3
"""The seed's Spark job at a steady load, measured the way
`deltaflow bench --steady` measures deltaflow.

  steady.py --deltaflow BIN --brokers HOST:PORT [--rate 17] [--seconds 600]

Starts sensor_stream.py (60 s trigger, table and checkpoint in a temporary
directory) on a fresh 3-partition topic, waits until its query runs, then
produces RATE records/s for SECONDS with `deltaflow produce` while sampling,
every second, the CPU time (utime + stime) and RSS of the job's process tree
(python and its JVM) from /proc. Prints one JSON line: CPU in % of one core
over the producing window, RSS average and peak, and the JVM's start time.
Run it with the test venv's python (scripts/install-deps.sh).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def tree(root):
    """root and every process descending from it."""
    children = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(pid))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def sample(root):
    """(CPU seconds, RSS bytes) of the tree."""
    cpu = rss = 0
    for pid in tree(root):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu += (int(fields[11]) + int(fields[12])) / TICK
        rss += int(fields[21]) * PAGE
    return cpu, rss


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--deltaflow", required=True, help="the deltaflow binary (for produce)")
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--rate", type=float, default=17)
    ap.add_argument("--seconds", type=int, default=600)
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="spark-steady-")
    topic = f"spark-steady-{int(time.time())}"
    subprocess.run([a.deltaflow, "produce", "--brokers", a.brokers, "--topic", topic, "--partitions", "3", "--count", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    t0 = time.time()
    job = subprocess.Popen([sys.executable, os.path.join(HERE, "sensor_stream.py"), "--brokers", a.brokers, "--topic", topic,
                            "--table", os.path.join(work, "table"), "--checkpoint", os.path.join(work, "checkpoint")],
                           stdout=subprocess.PIPE, stderr=open(os.path.join(work, "spark.log"), "w"), text=True)
    for line in job.stdout:
        if '"started"' in line:
            break
    else:
        sys.exit(f"sensor_stream.py exited before its query started (log: {work}/spark.log)")
    started = time.time() - t0
    count = int(a.rate * a.seconds)
    producer = subprocess.Popen([a.deltaflow, "produce", "--brokers", a.brokers, "--topic", topic, "--rate", str(a.rate),
                                 "--count", str(count)], stdout=subprocess.DEVNULL)
    cpu0, _ = sample(job.pid)
    w0 = time.time()
    rss = []
    while producer.poll() is None:
        time.sleep(1)
        rss.append(sample(job.pid)[1])
    cpu1, _ = sample(job.pid)
    wall = time.time() - w0
    job.terminate()
    job.wait(timeout=60)
    print(json.dumps({
        "rate": a.rate, "seconds": round(wall, 1), "records": count, "trigger_seconds": 60,
        "cpu_percent": round(100 * (cpu1 - cpu0) / wall, 2),
        "avg_rss_mib": round(sum(rss) / len(rss) / 2**20, 1), "peak_rss_mib": round(max(rss) / 2**20, 1),
        "start_to_query_seconds": round(started, 1),
    }))


if __name__ == "__main__":
    main()
