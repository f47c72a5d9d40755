#!/usr/bin/env bash
# servers.sh start|stop|env — the external servers integration tests need.
#
# start: runs, each on 127.0.0.1 on free ports with its data under $STATE:
#   - MinIO (S3 for the tables)
#   - Kafka, one node in KRaft mode (broker + controller in one JVM)
#   - nats-server with JetStream (the "external NATS" deltaflow connects to)
#   waits until each answers, and writes the variables tests read to
#   $STATE/env.sh (source it). Starting again first stops the old servers.
# stop: kills the servers by their pid files and removes their data.
# Logs go to $STATE/<server>.log.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

ENVFILE="$STATE/env.sh"
SERVERS=(minio kafka nats)

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# stop_one NAME: kill the server whose pid is in $STATE/NAME.pid (TERM, then
# KILL after 10s: Kafka's controlled shutdown can take a few seconds) and
# remove the data dir recorded in $STATE/NAME.data.
stop_one() {
	local name="$1" pidfile="$STATE/$1.pid" datafile="$STATE/$1.data" pid
	if [[ -f "$pidfile" ]]; then
		pid="$(cat "$pidfile")"
		if kill -0 "$pid" 2>/dev/null; then
			log "stopping $name (pid $pid)"
			kill "$pid"
			for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			kill -9 "$pid" 2>/dev/null || true
		fi
		rm -f "$pidfile"
	fi
	if [[ -f "$datafile" ]]; then
		rm -rf "$(cat "$datafile")"
		rm -f "$datafile"
	fi
}

stop() {
	local s
	for s in "${SERVERS[@]}"; do stop_one "$s"; done
	rm -f "$ENVFILE"
}

# new_data NAME: a fresh data dir for NAME, recorded for stop_one.
new_data() {
	local dir
	dir="$(mktemp -d "${TMPDIR:-/tmp}/deltaflow-$1.XXXXXX")"
	echo "$dir" >"$STATE/$1.data"
	echo "$dir"
}

# wait_until NAME SECONDS CMD...: poll CMD every 0.2s until it succeeds; fail
# with the server's log if the server died or time ran out.
wait_until() {
	local name="$1" secs="$2" pid
	shift 2
	pid="$(cat "$STATE/$name.pid")"
	for _ in $(seq $((secs * 5))); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		kill -0 "$pid" 2>/dev/null || { tail -50 "$STATE/$name.log" >&2; die "$name exited"; }
		sleep 0.2
	done
	tail -50 "$STATE/$name.log" >&2
	die "$name not ready after ${secs}s"
}

start_minio() {
	command -v minio >/dev/null || die "minio not installed; run scripts/install-deps.sh"
	local data console
	data="$(new_data minio)"
	MINIO_PORT="$(free_port)"
	console="$(free_port)"
	MINIO_USER="deltaflow"
	MINIO_PASSWORD="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
	log "starting minio on 127.0.0.1:$MINIO_PORT (data $data, log $STATE/minio.log)"
	MINIO_ROOT_USER="$MINIO_USER" MINIO_ROOT_PASSWORD="$MINIO_PASSWORD" MINIO_BROWSER=off \
		nohup minio server --quiet --address "127.0.0.1:$MINIO_PORT" \
		--console-address "127.0.0.1:$console" "$data" >"$STATE/minio.log" 2>&1 &
	echo $! >"$STATE/minio.pid"
}

wait_minio() {
	wait_until minio 30 curl -fsS -o /dev/null "http://127.0.0.1:$MINIO_PORT/minio/health/ready"
	log "minio ready on 127.0.0.1:$MINIO_PORT"
}

# cluster_id prints a random Kafka cluster id (base64url of 16 bytes, as
# `kafka-storage.sh random-uuid` would, without a second JVM start); never one
# starting with '-', which the tool's argument parser would take for a flag.
cluster_id() {
	python3 -c 'import base64, uuid
while (s := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"): pass
print(s)'
}

# Kafka: broker and controller in one JVM (process.roles=broker,controller),
# the same shape as the apache/kafka image in docker-compose.yml.
start_kafka() {
	[[ -f "$KAFKA_HOME/libs/kafka_2.13-$KAFKA_VERSION.jar" ]] || die "kafka not installed; run scripts/install-deps.sh"
	command -v java >/dev/null || die "java not found"
	local data controller cp conf
	data="$(new_data kafka)"
	KAFKA_PORT="$(free_port)"
	controller="$(free_port)"
	cp="$KAFKA_HOME/libs/*"
	conf="$data/server.properties"
	cat >"$conf" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$controller
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$controller
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$data/logs
# One node: every internal topic has one replica.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
# Tests create their topics; a typo should fail, not make a topic.
auto.create.topics.enable=false
num.partitions=3
# Consumer groups form at once instead of after 3s.
group.initial.rebalance.delay.ms=0
PROPS
	# log4j2: warnings only, to the log file (the INFO chatter is megabytes).
	cat >"$data/log4j2.properties" <<'LOG'
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
LOG
	# A small heap and the serial GC: the tests move a few MB; 2 cores are shared
	# with MinIO, NATS, go test -race and the JVM's own compiler threads.
	local jvm=(java -Xms128m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
		-Dlog4j2.configurationFile="$data/log4j2.properties" -Dkafka.logs.dir="$data" -cp "$cp")
	log "formatting kafka storage (KRaft, standalone controller)"
	"${jvm[@]}" kafka.tools.StorageTool format --standalone --ignore-formatted \
		-t "$(cluster_id)" -c "$conf" >"$STATE/kafka.log" 2>&1 ||
		{ cat "$STATE/kafka.log" >&2; die "kafka storage format failed"; }
	log "starting kafka $KAFKA_VERSION on 127.0.0.1:$KAFKA_PORT (controller :$controller, log $STATE/kafka.log)"
	nohup "${jvm[@]}" kafka.Kafka "$conf" >>"$STATE/kafka.log" 2>&1 &
	echo $! >"$STATE/kafka.pid"
}

wait_kafka() {
	# kcat -L answers once the broker serves metadata and lists itself.
	wait_until kafka 90 sh -c "kcat -b 127.0.0.1:$KAFKA_PORT -L -m 2 -t __none 2>&1 | grep -q 'broker 1 at'"
	log "kafka ready on 127.0.0.1:$KAFKA_PORT"
}

start_nats() {
	command -v nats-server >/dev/null || die "nats-server not installed; run scripts/install-deps.sh"
	local data monitor
	data="$(new_data nats)"
	NATS_PORT="$(free_port)"
	monitor="$(free_port)"
	log "starting nats-server with JetStream on 127.0.0.1:$NATS_PORT (store $data, log $STATE/nats.log)"
	nohup nats-server -a 127.0.0.1 -p "$NATS_PORT" -m "$monitor" -js -sd "$data" >"$STATE/nats.log" 2>&1 &
	echo $! >"$STATE/nats.pid"
	NATS_MONITOR="$monitor"
}

wait_nats() {
	# /healthz turns ok once JetStream is up, not just the listener.
	wait_until nats 30 curl -fsS -o /dev/null "http://127.0.0.1:$NATS_MONITOR/healthz"
	log "nats ready on 127.0.0.1:$NATS_PORT"
}

start() {
	stop
	# Start all three, then wait: the JVM's start overlaps MinIO's and NATS's.
	start_kafka
	start_minio
	start_nats
	wait_minio
	wait_nats
	wait_kafka
	cat >"$ENVFILE" <<ENV
export DELTAFLOW_TEST_MINIO_ENDPOINT=127.0.0.1:$MINIO_PORT
export DELTAFLOW_TEST_MINIO_ACCESS_KEY=$MINIO_USER
export DELTAFLOW_TEST_MINIO_SECRET_KEY=$MINIO_PASSWORD
export DELTAFLOW_TEST_KAFKA_BROKERS=127.0.0.1:$KAFKA_PORT
export DELTAFLOW_TEST_NATS_URL=nats://127.0.0.1:$NATS_PORT
export DELTAFLOW_TEST_PYTHON=$VENV/bin/python
export DELTAFLOW_TEST_BIN=$BIN
export DELTAFLOW_TEST_REQUIRE_SERVERS=1
ENV
	log "servers ready; test environment in $ENVFILE"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
env) cat "$ENVFILE" ;;
*) die "usage: $0 start|stop|env" ;;
esac
