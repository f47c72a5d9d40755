#!/usr/bin/env bash
# scripts/cdc/e2e.sh [TOPIC_PREFIX] [SAMPLES_OUT] — the CDC rig end to end,
# against a running rig (scripts/cdc.sh start) and the test Kafka:
#   1. a fresh table accounts (CDC_E2E_TABLE)(id int primary key, name text, balance bigint)
#      with REPLICA IDENTITY FULL and 3 rows (read by the snapshot, op 'r');
#   2. a Debezium connector for it (scripts/cdc.sh connector), topic
#      TOPIC_PREFIX.public.accounts (default: cdc<epoch seconds>, a new topic
#      each run, so offsets start at 0);
#   3. an insert, three updates of one row, a delete, the deleted id
#      inserted again, a primary-key change (UPDATE .. SET id = 99 WHERE
#      id = 2) and one transaction of 1,000 inserts;
#   4. reads the topic back (scripts/cdc/read_topic.py, the venv's
#      confluent-kafka) into $STATE/cdc/e2e-TOPIC_PREFIX.jsonl and checks the
#      sequence of ops, keys and tombstones; with SAMPLES_OUT, writes the 8
#      representative records there (mapping/testdata/debezium was made so).
# CDC_SCHEMAS_ENABLE=true runs it with JsonConverter schemas on (the
# connector's own override); the checks read the envelope from "payload".
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/../lib.sh"
CDC="$(dirname "$0")/../cdc.sh"
PREFIX="${1:-cdc$(date +%s)}"
SAMPLES="${2:-}"
[[ -f "$STATE/cdc/env.sh" ]] || die "the CDC rig is not running ($STATE/cdc/env.sh missing): run scripts/cdc.sh start"
# shellcheck disable=SC1091 # written by cdc.sh start
source "$STATE/cdc/env.sh"
[[ -x "$VENV/bin/python" ]] || die "no venv at $VENV: run scripts/install-deps.sh"
# The table is dropped and made anew: a connector of an earlier run keeps
# its publication of the old table and sends nothing more.
TABLE="${CDC_E2E_TABLE:-accounts}"
TOPIC="$PREFIX.public.$TABLE"
OUT="$STATE/cdc/e2e-$PREFIX.jsonl"

log "table $TABLE, topic $TOPIC"
"$CDC" psql -q <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS $TABLE;
CREATE TABLE $TABLE(id int PRIMARY KEY, name text, balance bigint);
ALTER TABLE $TABLE REPLICA IDENTITY FULL;
INSERT INTO $TABLE VALUES (1, 'alice', 100), (2, 'bob', 200), (3, 'carol', 300);
SQL
"$CDC" connector "e2e-$PREFIX" "$TABLE" "$PREFIX" >/dev/null
"$CDC" psql -q <<SQL
INSERT INTO $TABLE VALUES (4, 'dave', 400);
UPDATE $TABLE SET balance = balance + 10 WHERE id = 1;
UPDATE $TABLE SET balance = balance + 20 WHERE id = 1;
UPDATE $TABLE SET name = 'alice2', balance = balance + 30 WHERE id = 1;
DELETE FROM $TABLE WHERE id = 3;
INSERT INTO $TABLE VALUES (3, 'carol-again', 333);
UPDATE $TABLE SET id = 99 WHERE id = 2;
BEGIN;
INSERT INTO $TABLE SELECT g, 'bulk' || g, g * 10 FROM generate_series(1000, 1999) g;
COMMIT;
SQL
start=$SECONDS
"$VENV/bin/python" "$(dirname "$0")/read_topic.py" "$DELTAFLOW_TEST_CDC_KAFKA_BROKERS" "$TOPIC" --min 1013 --timeout 120 >"$OUT" ||
	die "could not read 1013 records from $TOPIC (log $STATE/cdc/connect.log)"
log "read $(wc -l <"$OUT") records from $TOPIC in $((SECONDS - start))s into $OUT"

"$VENV/bin/python" - "$OUT" "$SAMPLES" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]

def env(v):
    # schemas.enable=true wraps the envelope: {"schema": .., "payload": ..}
    return v["payload"] if v is not None and set(v) == {"schema", "payload"} else v

def key(r):
    return env(r["key"])["id"]

got = [(key(r), env(r["value"])["op"] if r["value"] is not None else "tombstone") for r in recs]
want = ([(1, "r"), (2, "r"), (3, "r"), (4, "c"), (1, "u"), (1, "u"), (1, "u"), (3, "d"), (3, "tombstone"),
         (3, "c"), (2, "d"), (2, "tombstone"), (99, "c")] + [(i, "c") for i in range(1000, 2000)])
if got != want:
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            sys.exit(f"e2e: record {i}: got {g}, want {w}")
    sys.exit(f"e2e: {len(got)} records, want {len(want)}")
v = env(recs[6]["value"])
assert v["before"] == {"id": 1, "name": "alice", "balance": 130}, v["before"]
assert v["after"] == {"id": 1, "name": "alice2", "balance": 160}, v["after"]
assert recs[10]["headers"].get("__debezium.newkey") is not None and recs[12]["headers"].get("__debezium.oldkey") is not None
bulk = {env(r["value"])["source"]["txId"] for r in recs[13:]}
assert len(bulk) == 1, bulk
lsns = [env(r["value"])["source"]["lsn"] for r in recs if r["value"] is not None]
assert lsns[3:] == sorted(lsns[3:]), "streamed lsns not ascending"
print(f"e2e: ok: {len(recs)} records, ops and keys as expected", file=sys.stderr)
if sys.argv[2]:
    # snapshot read, create, update, delete, its tombstone, the key change's
    # delete, tombstone and create: lines kept verbatim.
    lines = open(sys.argv[1]).read().splitlines()
    with open(sys.argv[2], "w") as f:
        for i in (0, 3, 4, 7, 8, 10, 11, 12):
            f.write(lines[i] + "\n")
    print(f"e2e: samples in {sys.argv[2]}", file=sys.stderr)
PY
