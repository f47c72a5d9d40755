#!/usr/bin/env bash
# servers.sh start [NAME...]|stop|kill NAME|restart NAME|env — the external
# servers integration tests need.
#
# start: runs, each on 127.0.0.1 on free ports with its data under $STATE:
#   - minio: MinIO (S3 for the tables)
#   - kafka: Kafka, one node in KRaft mode (broker + controller in one JVM)
#   - nats: nats-server with JetStream (the "external NATS" deltaflow
#     connects to)
#   (all three unless NAMEs are given), waits until each answers, and writes
#   the variables tests read to $STATE/env.sh (source it). Starting again
#   first stops the old servers.
# stop: kills the servers by their pid files and removes their data.
# kill NAME: stops one server (an outage) and keeps its data and ports.
# restart NAME: stops NAME if it runs, then starts it again on the same
#   ports with the same data (a server coming back), and waits until it
#   answers.
# Logs go to $STATE/<server>.log; each server's ports and settings are kept
# in $STATE/<server>.conf for restart.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

ENVFILE="$STATE/env.sh"
SERVERS=(minio kafka nats)

# kill_one NAME: kill the server whose pid is in $STATE/NAME.pid (TERM, then
# KILL after 10s: Kafka's controlled shutdown can take a few seconds).
kill_one() {
	local name="$1" pidfile="$STATE/$1.pid" pid
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
}

# stop_one NAME: kill_one, then remove the data dir recorded in
# $STATE/NAME.data and the settings in $STATE/NAME.conf.
stop_one() {
	local datafile="$STATE/$1.data"
	kill_one "$1"
	if [[ -f "$datafile" ]]; then
		rm -rf "$(cat "$datafile")"
		rm -f "$datafile"
	fi
	rm -f "$STATE/$1.conf"
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

# save_conf NAME VAR...: record the variables a server runs with in
# $STATE/NAME.conf, so restart runs it again the same way.
save_conf() {
	local name="$1" v
	shift
	: >"$STATE/$name.conf"
	for v in "$@"; do printf '%s=%q\n' "$v" "${!v}" >>"$STATE/$name.conf"; done
}

# load_conf NAME: the variables save_conf recorded.
load_conf() {
	[[ -f "$STATE/$1.conf" ]] || die "$1 was not started with this state dir ($STATE)"
	# shellcheck disable=SC1090 # written by save_conf
	source "$STATE/$1.conf"
}

# Each server has setup_NAME (fresh data dir and ports, recorded with
# save_conf), launch_NAME (runs it from the recorded settings; start and
# restart) and wait_NAME (until it answers).

setup_minio() {
	command -v minio >/dev/null || die "minio not installed; run scripts/install-deps.sh"
	MINIO_DATA="$(new_data minio)"
	MINIO_PORT="$(free_port)"
	MINIO_CONSOLE="$(free_port)"
	MINIO_USER="deltaflow"
	MINIO_PASSWORD="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
	save_conf minio MINIO_DATA MINIO_PORT MINIO_CONSOLE MINIO_USER MINIO_PASSWORD
}

launch_minio() {
	log "starting minio on 127.0.0.1:$MINIO_PORT (data $MINIO_DATA, log $STATE/minio.log)"
	MINIO_ROOT_USER="$MINIO_USER" MINIO_ROOT_PASSWORD="$MINIO_PASSWORD" MINIO_BROWSER=off \
		nohup minio server --quiet --address "127.0.0.1:$MINIO_PORT" \
		--console-address "127.0.0.1:$MINIO_CONSOLE" "$MINIO_DATA" >>"$STATE/minio.log" 2>&1 &
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

# kafka_jvm sets JVM to the java command line Kafka's tools run with. A small
# heap and the serial GC: the tests move a few MB; 2 cores are shared with
# MinIO, NATS, go test -race and the JVM's own compiler threads.
kafka_jvm() {
	JVM=(java -Xms128m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
		-Dlog4j2.configurationFile="$KAFKA_DATA/log4j2.properties" -Dkafka.logs.dir="$KAFKA_DATA" -cp "$KAFKA_HOME/libs/*")
}

# Kafka: broker and controller in one JVM (process.roles=broker,controller),
# the same shape as the apache/kafka image in docker-compose.yml. Setup
# writes its configuration and formats its storage once; a restart runs the
# broker on the same log dirs.
setup_kafka() {
	[[ -f "$KAFKA_HOME/libs/kafka_2.13-$KAFKA_VERSION.jar" ]] || die "kafka not installed; run scripts/install-deps.sh"
	command -v java >/dev/null || die "java not found"
	KAFKA_DATA="$(new_data kafka)"
	KAFKA_PORT="$(free_port)"
	KAFKA_CONTROLLER="$(free_port)"
	save_conf kafka KAFKA_DATA KAFKA_PORT KAFKA_CONTROLLER
	cat >"$KAFKA_DATA/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$KAFKA_CONTROLLER
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$KAFKA_DATA/logs
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
	cat >"$KAFKA_DATA/log4j2.properties" <<'LOG'
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
LOG
	kafka_jvm
	log "formatting kafka storage (KRaft, standalone controller)"
	"${JVM[@]}" kafka.tools.StorageTool format --standalone --ignore-formatted \
		-t "$(cluster_id)" -c "$KAFKA_DATA/server.properties" >"$STATE/kafka.log" 2>&1 ||
		{ cat "$STATE/kafka.log" >&2; die "kafka storage format failed"; }
}

launch_kafka() {
	kafka_jvm
	log "starting kafka $KAFKA_VERSION on 127.0.0.1:$KAFKA_PORT (controller :$KAFKA_CONTROLLER, log $STATE/kafka.log)"
	nohup "${JVM[@]}" kafka.Kafka "$KAFKA_DATA/server.properties" >>"$STATE/kafka.log" 2>&1 &
	echo $! >"$STATE/kafka.pid"
}

wait_kafka() {
	# kcat -L answers once the broker serves metadata and lists itself.
	wait_until kafka 90 sh -c "kcat -b 127.0.0.1:$KAFKA_PORT -L -m 2 -t __none 2>&1 | grep -q 'broker 1 at'"
	log "kafka ready on 127.0.0.1:$KAFKA_PORT"
}

setup_nats() {
	command -v nats-server >/dev/null || die "nats-server not installed; run scripts/install-deps.sh"
	NATS_DATA="$(new_data nats)"
	NATS_PORT="$(free_port)"
	NATS_MONITOR="$(free_port)"
	save_conf nats NATS_DATA NATS_PORT NATS_MONITOR
}

launch_nats() {
	log "starting nats-server with JetStream on 127.0.0.1:$NATS_PORT (store $NATS_DATA, log $STATE/nats.log)"
	nohup nats-server -a 127.0.0.1 -p "$NATS_PORT" -m "$NATS_MONITOR" -js -sd "$NATS_DATA" >>"$STATE/nats.log" 2>&1 &
	echo $! >"$STATE/nats.pid"
}

wait_nats() {
	# /healthz turns ok once JetStream is up, not just the listener.
	wait_until nats 30 curl -fsS -o /dev/null "http://127.0.0.1:$NATS_MONITOR/healthz"
	log "nats ready on 127.0.0.1:$NATS_PORT"
}

# known NAME: fail unless NAME is one of SERVERS.
known() {
	local s
	for s in "${SERVERS[@]}"; do [[ "$1" == "$s" ]] && return 0; done
	die "unknown server '$1' (known: ${SERVERS[*]})"
}

start() {
	local names=("$@") s
	[[ ${#names[@]} -gt 0 ]] || names=("${SERVERS[@]}")
	for s in "${names[@]}"; do known "$s"; done
	stop
	# Kafka first, then wait: the JVM's start overlaps MinIO's and NATS's.
	for s in kafka minio nats; do
		[[ " ${names[*]} " == *" $s "* ]] || continue
		"setup_$s"
		"launch_$s"
	done
	{
		for s in minio nats kafka; do
			[[ " ${names[*]} " == *" $s "* ]] || continue
			"wait_$s"
			case "$s" in
			minio)
				echo "export DELTAFLOW_TEST_MINIO_ENDPOINT=127.0.0.1:$MINIO_PORT"
				echo "export DELTAFLOW_TEST_MINIO_ACCESS_KEY=$MINIO_USER"
				echo "export DELTAFLOW_TEST_MINIO_SECRET_KEY=$MINIO_PASSWORD"
				;;
			kafka) echo "export DELTAFLOW_TEST_KAFKA_BROKERS=127.0.0.1:$KAFKA_PORT" ;;
			nats) echo "export DELTAFLOW_TEST_NATS_URL=nats://127.0.0.1:$NATS_PORT" ;;
			esac
		done
		echo "export DELTAFLOW_TEST_PYTHON=$VENV/bin/python"
		echo "export DELTAFLOW_TEST_SPARK4_PYTHON=$VENV_SPARK4/bin/python"
		echo "export DELTAFLOW_TEST_BIN=$BIN"
		echo "export DELTAFLOW_TEST_REQUIRE_SERVERS=1"
	} >"$ENVFILE.tmp"
	mv "$ENVFILE.tmp" "$ENVFILE"
	log "servers ready (${names[*]}); test environment in $ENVFILE"
}

# restart NAME: NAME again, on its ports with its data.
restart() {
	known "$1"
	load_conf "$1"
	kill_one "$1"
	"launch_$1"
	"wait_$1"
}

case "${1:-}" in
start)
	shift
	start "$@"
	;;
stop) stop ;;
kill)
	[[ $# == 2 ]] || die "usage: $0 kill NAME"
	known "$2"
	kill_one "$2"
	;;
restart)
	[[ $# == 2 ]] || die "usage: $0 restart NAME"
	restart "$2"
	;;
env) cat "$ENVFILE" ;;
*) die "usage: $0 start [NAME...]|stop|kill NAME|restart NAME|env (NAME: ${SERVERS[*]})" ;;
esac
