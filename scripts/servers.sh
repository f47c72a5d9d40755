#!/usr/bin/env bash
# servers.sh start|stop|env — the external servers integration tests need.
#
# start: runs MinIO on 127.0.0.1 on a free port with its data in a fresh temp
#   dir, waits until it is ready, and writes the variables tests read to
#   $STATE/env.sh (source it). Starting again first stops the old server.
# stop: kills the server by its pid file and removes its data.
# Logs go to $STATE/minio.log.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

PIDFILE="$STATE/minio.pid"
DATAFILE="$STATE/minio.data" # holds the temp data dir, for stop to remove
ENVFILE="$STATE/env.sh"
LOGFILE="$STATE/minio.log"

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

stop() {
	if [[ -f "$PIDFILE" ]]; then
		local pid
		pid="$(cat "$PIDFILE")"
		if kill -0 "$pid" 2>/dev/null; then
			log "stopping minio (pid $pid)"
			kill "$pid"
			for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			kill -9 "$pid" 2>/dev/null || true
		fi
		rm -f "$PIDFILE"
	fi
	if [[ -f "$DATAFILE" ]]; then
		rm -rf "$(cat "$DATAFILE")"
		rm -f "$DATAFILE"
	fi
	rm -f "$ENVFILE"
}

start() {
	stop
	command -v minio >/dev/null || die "minio not installed; run scripts/install-deps.sh"
	local data port console user password
	data="$(mktemp -d "${TMPDIR:-/tmp}/deltaflow-minio.XXXXXX")"
	echo "$data" >"$DATAFILE"
	port="$(free_port)"
	console="$(free_port)"
	user="deltaflow"
	password="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
	log "starting minio on 127.0.0.1:$port (data $data, log $LOGFILE)"
	MINIO_ROOT_USER="$user" MINIO_ROOT_PASSWORD="$password" MINIO_BROWSER=off \
		nohup minio server --quiet --address "127.0.0.1:$port" \
		--console-address "127.0.0.1:$console" "$data" >"$LOGFILE" 2>&1 &
	echo $! >"$PIDFILE"
	for _ in $(seq 300); do
		if curl -fsS -o /dev/null "http://127.0.0.1:$port/minio/health/ready" 2>/dev/null; then
			break
		fi
		kill -0 "$(cat "$PIDFILE")" 2>/dev/null || { cat "$LOGFILE" >&2; die "minio exited"; }
		sleep 0.1
	done
	curl -fsS -o /dev/null "http://127.0.0.1:$port/minio/health/ready" ||
		{ cat "$LOGFILE" >&2; die "minio not ready after 30s"; }
	cat >"$ENVFILE" <<ENV
export DELTAFLOW_TEST_MINIO_ENDPOINT=127.0.0.1:$port
export DELTAFLOW_TEST_MINIO_ACCESS_KEY=$user
export DELTAFLOW_TEST_MINIO_SECRET_KEY=$password
export DELTAFLOW_TEST_PYTHON=$VENV/bin/python
export DELTAFLOW_TEST_REQUIRE_SERVERS=1
ENV
	log "minio ready; test environment in $ENVFILE"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
env) cat "$ENVFILE" ;;
*) die "usage: $0 start|stop|env" ;;
esac
