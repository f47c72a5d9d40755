#!/bin/sh
# nats-box's entrypoint in the compose stack (docker compose --profile tools
# run --rm nats-box): saves the nats CLI contexts of deploy/nats/nats.conf's
# users, viewer (selected: the read-only recipes) and operator (nats
# --context operator ...: control endpoints, the DLQ), each with the inbox
# prefix its permissions require, then runs the command (a shell).
set -eu
nats context save viewer --server "$NATS_URL" --user viewer --password "$NATS_VIEWER_PASSWORD" \
	--inbox-prefix _INBOX_viewer --description "deltaflow: read-only" --select >/dev/null
nats context save operator --server "$NATS_URL" --user operator --password "$NATS_OPERATOR_PASSWORD" \
	--inbox-prefix _INBOX_operator --description "deltaflow: control and DLQ" >/dev/null
exec "$@"
