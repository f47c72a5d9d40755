#!/usr/bin/env bash
# cdc.sh install|start [postgres|mariadb]|connector NAME TABLE TOPIC_PREFIX|stop|env|psql [ARGS]|mariadb [ARGS]
# — a real change-data-capture source for the tests, as plain processes on
# 127.0.0.1 (no Docker engine here): PostgreSQL from Debian's packages with
# wal_level=logical, and Debezium's Postgres connector in Kafka Connect
# (standalone mode) writing into the Kafka broker servers.sh started; or
# MariaDB from Debian's packages with a row-based binlog, and Debezium's
# MariaDB connector.
#
# install: once, cached: Debian's postgresql (when no /usr/lib/postgresql/*/
#   bin/initdb exists) and mariadb-server (when no /usr/sbin/mariadbd), and
#   from Maven Central (scripts/cdc/pom.xml) the Kafka Connect worker's jars
#   into $CACHE/cdc/connect and the Debezium Postgres (3.6.1) and MariaDB
#   (3.5.0: Maven Central has no 3.6.1, scripts/cdc/pom.xml) connectors
#   with their dependencies into $CACHE/cdc/plugins (Connect's plugin.path:
#   each connector runs in its own class loader).
# start [postgres] (the default): a fresh cluster in $STATE/cdc/pg (initdb and pg_ctl run as the
#   `postgres` user: PostgreSQL refuses to run as root), on a free port, with
#   wal_level=logical; a database and a login role with REPLICATION that owns
#   it (tables it creates can be published); then Connect standalone on a
#   free REST port, bootstrap.servers from $STATE/env.sh (servers.sh start
#   kafka first), offsets in $STATE/cdc/connect.offsets. Waits until both
#   answer and writes $STATE/cdc/env.sh (source it). Starting again first
#   stops the old ones.
# start mariadb: instead of PostgreSQL, a fresh MariaDB server (mariadbd as
#   the `mysql` user, its data in a new /tmp/deltaflow-cdc-mariadb.* folder:
#   short enough for its socket) on a free 127.0.0.1 port with log_bin,
#   binlog_format=ROW, binlog_row_image=FULL and server_id=1; a database and
#   a user with the grants Debezium's MariaDB connector needs.
# connector NAME TABLE TOPIC_PREFIX, with MariaDB: registers Debezium's
#   MariaDB connector for TABLE ("accounts" = "deltaflow.accounts"), its schema
#   history in $STATE/cdc/NAME.history, snapshot.mode=initial, topic
#   TOPIC_PREFIX.<database>.<table>, and waits until it is RUNNING and a new
#   binlog dump thread serves it (snapshot done, streaming).
# connector NAME TABLE TOPIC_PREFIX, with PostgreSQL: registers (PUT, so again = update) a
#   Debezium Postgres connector for TABLE ("accounts" = "public.accounts")
#   with plugin.name=pgoutput, slot and publication named after NAME,
#   snapshot.mode=initial, topic TOPIC_PREFIX.<schema>.<table> (created with
#   CDC_TOPIC_PARTITIONS partitions, default 1), and waits until the
#   connector and its task are RUNNING and its replication slot is active
#   (snapshot done, streaming). Prints the topic. CDC_CONNECTOR_EXTRA (a JSON
#   object) is merged into the connector's config last.
# stop: stops Connect, then PostgreSQL (fast shutdown) or MariaDB, and
#   removes their data (the cluster, the offsets); the logs stay.
# env: prints $STATE/cdc/env.sh. psql [ARGS]: psql as the rig's role.
#   mariadb [ARGS]: the mariadb client as the rig's user, in its database.
#
# Converters: key and value are org.apache.kafka.connect.json.JsonConverter.
# CDC_SCHEMAS_ENABLE (true|false, default false) sets schemas.enable for both:
# the worker's default at start, and a connector's own override when set at
# `connector` time. false: the message is Debezium's envelope itself
# ({"before":..,"after":..,"source":..,"op":..,"ts_ms":..}); true: it is
# {"schema":{..},"payload":<envelope>}. See scripts/cdc/README.md.
#
# Logs: $STATE/cdc/postgres.log, mariadb.log, connect.log, and the Maven log of install
# in $CACHE/cdc/mvn.log.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

HERE="$(cd "$(dirname "$0")" && pwd)"
# Pinned versions. The Connect worker defaults to the broker's version
# (KAFKA_VERSION, lib.sh); Debezium 3.6.1.Final is built against Kafka 4.3.0
# and runs on the 4.1 worker (CDC_CONNECT_VERSION=4.3.0 tries the newer one).
CONNECT_VERSION="${CDC_CONNECT_VERSION:-$KAFKA_VERSION}"
DEBEZIUM_VERSION="3.6.1.Final"
# Maven Central's newest debezium-connector-mariadb (there is no 3.6.1;
# scripts/cdc/pom.xml says why the MySQL connector does not do).
DEBEZIUM_MARIADB_VERSION="3.5.0.Final"
CDC_HOME="$CACHE/cdc"
CONNECT_LIBS="$CDC_HOME/connect"
PLUGINS="$CDC_HOME/plugins"
CDC_STATE="$STATE/cdc"
CDC_ENV="$CDC_STATE/env.sh"
SCHEMAS_ENABLE="${CDC_SCHEMAS_ENABLE:-false}"
[[ "$SCHEMAS_ENABLE" == true || "$SCHEMAS_ENABLE" == false ]] || die "CDC_SCHEMAS_ENABLE is '$SCHEMAS_ENABLE', not true or false"
# The rig's database and role (the password is made anew at each start).
PG_DB="deltaflow"
PG_USER="deltaflow"
# MariaDB's server (Debian's mariadb-server), database and user.
MARIADBD="/usr/sbin/mariadbd"
MY_DB="deltaflow"
MY_USER="deltaflow"

# pg_bindir prints the newest /usr/lib/postgresql/<ver>/bin with an initdb
# (CDC_PG_VERSION picks one), or nothing.
pg_bindir() {
	local d
	if [[ -n "${CDC_PG_VERSION:-}" ]]; then
		d="/usr/lib/postgresql/$CDC_PG_VERSION/bin"
		[[ -x "$d/initdb" ]] && echo "$d"
		return 0
	fi
	for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V -r); do
		[[ -x "$d/initdb" ]] && { echo "$d"; return 0; }
	done
	return 0
}

# jars_stamp: what the jar folders were fetched for (versions and the pom).
jars_stamp() {
	echo "connect-runtime:$CONNECT_VERSION debezium:$DEBEZIUM_VERSION mariadb:$DEBEZIUM_MARIADB_VERSION pom:$(sha256sum "$HERE/cdc/pom.xml" | cut -c1-16)"
}

# apt_install PACKAGE SERVICE: installs Debian's PACKAGE (root only). The
# package's own server (PostgreSQL's cluster on port 5432, MariaDB's on
# 3306) is not the rig's: on a machine with systemd the package starts
# SERVICE; stop it again.
apt_install() {
	apt_get "$1"
	if [[ -d /run/systemd/system ]]; then
		systemctl disable --now "$2" >/dev/null 2>&1 || true
	fi
}

install() {
	local bindir
	bindir="$(pg_bindir)"
	if [[ -n "$bindir" ]]; then
		log "postgresql: installed ($bindir)"
	else
		apt_install postgresql postgresql
		bindir="$(pg_bindir)"
		[[ -n "$bindir" ]] || die "apt-get installed postgresql but no /usr/lib/postgresql/*/bin/initdb exists"
	fi
	getent passwd postgres >/dev/null || die "no 'postgres' user (Debian's postgresql-common makes it)"
	if [[ -x "$MARIADBD" ]]; then
		log "mariadb-server: installed ($MARIADBD)"
	else
		apt_install mariadb-server mariadb
		[[ -x "$MARIADBD" ]] || die "apt-get installed mariadb-server but there is no $MARIADBD"
	fi
	getent passwd mysql >/dev/null || die "no 'mysql' user (Debian's mariadb-server makes it)"
	command -v curl >/dev/null || die "curl not found (apt-get install curl)"

	if [[ -f "$CDC_HOME/version" && "$(cat "$CDC_HOME/version")" == "$(jars_stamp)" ]]; then
		log "kafka connect + debezium: cached ($CDC_HOME)"
		return
	fi
	need_maven "Kafka Connect $CONNECT_VERSION"
	log "kafka connect $CONNECT_VERSION + debezium-connector-postgres $DEBEZIUM_VERSION + debezium-connector-mariadb $DEBEZIUM_MARIADB_VERSION: fetching jars from Maven Central into $CDC_HOME"
	rm -rf "$CDC_HOME.new"
	mkdir -p "$CDC_HOME.new"
	local profile out
	for profile in connect debezium debezium-mariadb; do
		case "$profile" in
		connect) out="$CDC_HOME.new/connect" ;;
		debezium) out="$CDC_HOME.new/plugins/debezium-connector-postgres" ;;
		debezium-mariadb) out="$CDC_HOME.new/plugins/debezium-connector-mariadb" ;;
		esac
		mvn -B -q -f "$HERE/cdc/pom.xml" -P "$profile" -Dmaven.repo.local="$M2_REPO" \
			-Dkafka.version="$CONNECT_VERSION" -Ddebezium.version="$DEBEZIUM_VERSION" -Ddebezium.mariadb.version="$DEBEZIUM_MARIADB_VERSION" \
			-Dslf4j.version="$SLF4J_VERSION" -Dlog4j.version="$LOG4J_VERSION" \
			dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$out" \
			>>"$CDC_HOME.new/mvn.log" 2>&1 ||
			{ cat "$CDC_HOME.new/mvn.log" >&2; die "maven could not fetch the $profile jars (scripts/cdc/pom.xml, profile $profile)"; }
	done
	[[ -f "$CDC_HOME.new/connect/connect-runtime-$CONNECT_VERSION.jar" ]] || die "no connect-runtime-$CONNECT_VERSION.jar after maven"
	[[ -f "$CDC_HOME.new/plugins/debezium-connector-postgres/debezium-connector-postgres-$DEBEZIUM_VERSION.jar" ]] ||
		die "no debezium-connector-postgres-$DEBEZIUM_VERSION.jar after maven"
	[[ -f "$CDC_HOME.new/plugins/debezium-connector-mariadb/debezium-connector-mariadb-$DEBEZIUM_MARIADB_VERSION.jar" ]] ||
		die "no debezium-connector-mariadb-$DEBEZIUM_MARIADB_VERSION.jar after maven"
	jars_stamp >"$CDC_HOME.new/version"
	rm -rf "$CDC_HOME"
	mv "$CDC_HOME.new" "$CDC_HOME"
	log "kafka connect + debezium: $(find "$CONNECT_LIBS" -name '*.jar' | wc -l) worker jars, $(find "$PLUGINS" -name '*.jar' | wc -l) connector jars"
}

# as_user USER CMD...: CMD as USER, postgres or mysql (initdb, postgres
# and mariadbd refuse root), or as is when not root.
as_user() {
	local user="$1"
	shift
	if [[ "$(id -u)" == 0 ]]; then
		# From /, with /tmp for temporary files: the caller's directory and
		# TMPDIR (the test runner's is private to root) may be closed to
		# the user.
		(cd / && runuser -u "$user" -- env TMPDIR=/tmp "$@")
	else
		"$@"
	fi
}

# admin_psql ARGS...: psql as the cluster's superuser, over TCP.
admin_psql() {
	PGPASSWORD="$PG_ADMIN_PASSWORD" "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres "$@"
}

# load_rig: the settings start recorded in $CDC_STATE/rig.conf.
load_rig() {
	[[ -f "$CDC_STATE/rig.conf" ]] || die "the CDC rig is not running with this state dir ($STATE); run $0 start"
	# shellcheck disable=SC1091 # written by start
	source "$CDC_STATE/rig.conf"
}

# alive NAME: whether the process in $CDC_STATE/NAME.pid runs.
alive() {
	local pid
	pid="$(cat "$CDC_STATE/$1.pid" 2>/dev/null)" || return 1
	kill -0 "$pid" 2>/dev/null
}

# wait_until NAME LOG SECONDS CMD...: poll CMD every 0.2s until it succeeds;
# fail with the end of LOG if NAME's process died or time ran out.
wait_until() {
	local name="$1" logf="$2" secs="$3"
	shift 3
	for _ in $(seq $((secs * 5))); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		alive "$name" || { tail -50 "$logf" >&2; die "$name exited (log $logf)"; }
		sleep 0.2
	done
	tail -50 "$logf" >&2
	die "$name not ready after ${secs}s (log $logf)"
}

stop() {
	local pid
	if [[ -f "$CDC_STATE/connect.pid" ]]; then
		pid="$(cat "$CDC_STATE/connect.pid")"
		if kill -0 "$pid" 2>/dev/null; then
			log "stopping kafka connect (pid $pid)"
			kill "$pid"
			for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			if kill -9 "$pid" 2>/dev/null; then
				log "kafka connect did not exit 20s after SIGTERM; killed it (log $CDC_STATE/connect.log)"
			fi
		fi
		rm -f "$CDC_STATE/connect.pid"
	fi
	if [[ -f "$CDC_STATE/rig.conf" ]]; then
		# shellcheck disable=SC1091 # written by start
		source "$CDC_STATE/rig.conf"
		if [[ -n "${MY_DATA:-}" ]]; then
			stop_mariadb
		elif [[ -f "$PG_DATA/postmaster.pid" ]]; then
			log "stopping postgresql (data $PG_DATA)"
			as_user postgres "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 stop >>"$CDC_STATE/postgres.log" 2>&1 ||
				{
					log "pg_ctl stop failed (log $CDC_STATE/postgres.log); killing the postmaster"
					kill -9 "$(head -1 "$PG_DATA/postmaster.pid")" 2>/dev/null || true
				}
		fi
		[[ -z "${PG_DATA:-}" ]] || rm -rf "$PG_DATA"
		[[ -z "${PG_DATA_TMP:-}" ]] || rm -rf "$PG_DATA_TMP"
		# A start after this one may start PostgreSQL: MY_PORT says MariaDB.
		unset MY_DATA MY_PORT MY_ADMIN_PASSWORD MY_PASSWORD
	fi
	rm -f "$CDC_STATE/rig.conf" "$CDC_STATE/pg.pid" "$CDC_ENV" "$CDC_STATE/connect.offsets" "$CDC_STATE"/*.history
}

# stop_mariadb: SIGTERM to the MariaDB server (a clean shutdown), SIGKILL
# after 30s; then its data goes.
stop_mariadb() {
	local pid
	if pid="$(cat "$MY_DATA/mariadbd.pid" 2>/dev/null)" && kill -0 "$pid" 2>/dev/null; then
		log "stopping mariadb (pid $pid, data $MY_DATA)"
		kill "$pid"
		for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		if kill -9 "$pid" 2>/dev/null; then
			log "mariadb did not exit 30s after SIGTERM; killed it (log $CDC_STATE/mariadb.log)"
		fi
	fi
	rm -rf "$(dirname "$MY_DATA")" "$CDC_STATE/mariadb.pid"
}

# admin_mariadb ARGS...: the mariadb client as the server's root, over TCP.
admin_mariadb() {
	MYSQL_PWD="$MY_ADMIN_PASSWORD" mariadb --no-defaults -h 127.0.0.1 -P "$MY_PORT" -u root "$@"
}

# start_mariadb: a fresh MariaDB server with a row-based binlog, its
# database and Debezium's user; its settings in rig.conf.
start_mariadb() {
	[[ -x "$MARIADBD" ]] || die "mariadb-server not installed; run $0 install"
	: >"$CDC_STATE/mariadb.log"
	# In /tmp: the mysql user reaches it, and the socket's path is short.
	MY_DATA="$(mktemp -d /tmp/deltaflow-cdc-mariadb.XXXXXX)/data"
	chmod 755 "$(dirname "$MY_DATA")"
	mkdir -p "$MY_DATA"
	[[ "$(id -u)" != 0 ]] || chown mysql: "$MY_DATA"
	MY_PORT="$(free_port)"
	MY_ADMIN_PASSWORD="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
	MY_PASSWORD="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
	{
		for v in MY_DATA MY_PORT MY_ADMIN_PASSWORD MY_PASSWORD; do printf '%s=%q\n' "$v" "${!v}"; done
	} >"$CDC_STATE/rig.conf"
	chmod 600 "$CDC_STATE/rig.conf"
	log "mariadb-install-db $MY_DATA ($("$MARIADBD" --version))"
	as_user mysql mariadb-install-db --no-defaults --datadir="$MY_DATA" --auth-root-authentication-method=normal \
		--skip-test-db >>"$CDC_STATE/mariadb.log" 2>&1 ||
		{ tail -30 "$CDC_STATE/mariadb.log" >&2; die "mariadb-install-db failed (log $CDC_STATE/mariadb.log)"; }
	# No fsync (throwaway test data). The binlog Debezium reads: row-based,
	# full row images; server_id 1 (each connector is a replica with its own).
	log "starting mariadb on 127.0.0.1:$MY_PORT (log $CDC_STATE/mariadb.log)"
	as_user mysql "$MARIADBD" --no-defaults --datadir="$MY_DATA" --bind-address=127.0.0.1 --port="$MY_PORT" \
		--socket="$MY_DATA/mariadbd.sock" --pid-file="$MY_DATA/mariadbd.pid" --skip-name-resolve \
		--log-bin=mariadb-bin --binlog-format=ROW --binlog-row-image=FULL --server-id=1 \
		--innodb-flush-log-at-trx-commit=0 --sync-binlog=0 --innodb-buffer-pool-size=64M \
		>>"$CDC_STATE/mariadb.log" 2>&1 </dev/null &
	echo $! >"$CDC_STATE/mariadb.pid"
	# root@127.0.0.1 has no password yet: only this script is on the port.
	wait_until mariadb "$CDC_STATE/mariadb.log" 60 mariadb --no-defaults -h 127.0.0.1 -P "$MY_PORT" -u root -e 'select 1'
	mariadb --no-defaults -h 127.0.0.1 -P "$MY_PORT" -u root >>"$CDC_STATE/mariadb.log" 2>&1 <<SQL ||
CREATE DATABASE $MY_DB;
CREATE USER '$MY_USER'@'127.0.0.1' IDENTIFIED BY '$MY_PASSWORD';
GRANT ALL ON $MY_DB.* TO '$MY_USER'@'127.0.0.1';
GRANT SELECT, RELOAD, SHOW DATABASES, LOCK TABLES, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '$MY_USER'@'127.0.0.1';
ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY '$MY_ADMIN_PASSWORD';
SQL
		die "could not create user $MY_USER and database $MY_DB (log $CDC_STATE/mariadb.log)"
	[[ "$(admin_mariadb -N -e 'select @@log_bin, @@binlog_format')" == $'1\tROW' ]] || die "mariadb's binlog is not on and row-based"
	log "mariadb ready on 127.0.0.1:$MY_PORT (database $MY_DB, user $MY_USER)"
}

start() {
	local db="${1:-postgres}" plugin=io.debezium.connector.postgresql.PostgresConnector
	case "$db" in
	postgres) ;;
	mariadb) plugin=io.debezium.connector.mariadb.MariaDbConnector ;;
	*) die "start: unknown database '$db' (want postgres or mariadb)" ;;
	esac
	[[ -f "$CDC_HOME/version" && "$(cat "$CDC_HOME/version")" == "$(jars_stamp)" ]] ||
		die "kafka connect + debezium not installed (or for other versions); run $0 install"
	command -v java >/dev/null || die "java not found"
	local brokers="${CDC_KAFKA_BROKERS:-}"
	if [[ -z "$brokers" ]]; then
		[[ -f "$STATE/env.sh" ]] || die "no $STATE/env.sh: start Kafka first (scripts/servers.sh start kafka) or set CDC_KAFKA_BROKERS"
		brokers="$(
			# shellcheck disable=SC1091 # written by servers.sh
			source "$STATE/env.sh"
			echo "${DELTAFLOW_TEST_KAFKA_BROKERS:-}"
		)"
		[[ -n "$brokers" ]] || die "$STATE/env.sh has no DELTAFLOW_TEST_KAFKA_BROKERS: start Kafka (scripts/servers.sh start kafka)"
	fi
	python3 -c 'import socket, sys
h, p = sys.argv[1].split(",")[0].rsplit(":", 1)
socket.create_connection((h, int(p)), 3).close()' "$brokers" 2>/dev/null ||
		die "kafka at $brokers does not answer (scripts/servers.sh start kafka)"

	mkdir -p "$CDC_STATE"
	stop
	: >"$CDC_STATE/connect.log"
	if [[ "$db" == mariadb ]]; then
		start_mariadb
	else
		start_postgres
	fi
	start_connect "$brokers" "$plugin"
}

# start_postgres: a fresh PostgreSQL cluster with wal_level=logical, its
# database and role; its settings in rig.conf.
start_postgres() {
	PG_BIN="$(pg_bindir)"
	[[ -n "$PG_BIN" ]] || die "postgresql not installed; run $0 install"
	: >"$CDC_STATE/postgres.log"
	# PostgreSQL. Its data dir must be reachable by the postgres user; a
	# state dir under /root, or under a private $TMPDIR (test.sh's), is
	# not, so then the cluster goes to /tmp itself.
	PG_DATA="$CDC_STATE/pg"
	PG_DATA_TMP=""
	if [[ "$(id -u)" == 0 ]] && ! runuser -u postgres -- test -x "$CDC_STATE"; then
		PG_DATA_TMP="$(mktemp -d /tmp/deltaflow-cdc-pg.XXXXXX)"
		chmod 755 "$PG_DATA_TMP"
		PG_DATA="$PG_DATA_TMP/pg"
		log "the postgres user cannot reach $CDC_STATE: the cluster goes to $PG_DATA"
	fi
	# A cluster left without its rig.conf (stop could not find it).
	if [[ -f "$PG_DATA/postmaster.pid" ]]; then
		as_user postgres "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 stop >>"$CDC_STATE/postgres.log" 2>&1 || true
	fi
	rm -rf "$PG_DATA"
	mkdir -p "$PG_DATA"
	chmod 700 "$PG_DATA"
	[[ "$(id -u)" != 0 ]] || chown postgres: "$PG_DATA"
	PG_PORT="$(free_port)"
	PG_ADMIN_PASSWORD="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
	PG_PASSWORD="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
	local pwfile
	pwfile="$(mktemp "$(dirname "$PG_DATA")/initdb-pw.XXXXXX")" # where postgres reaches it
	echo "$PG_ADMIN_PASSWORD" >"$pwfile"
	[[ "$(id -u)" != 0 ]] || chown postgres: "$pwfile"
	log "initdb $PG_DATA ($("$PG_BIN/postgres" --version))"
	as_user postgres "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
		--auth-host=scram-sha-256 --auth-local=peer >>"$CDC_STATE/postgres.log" 2>&1 ||
		{ rm -f "$pwfile"; tail -30 "$CDC_STATE/postgres.log" >&2; die "initdb failed (log $CDC_STATE/postgres.log)"; }
	rm -f "$pwfile"
	# Loopback TCP only (no Unix socket: a long state path would not fit
	# one). fsync=off: throwaway test data, faster commits. initdb's
	# pg_hba.conf already has host and replication lines for 127.0.0.1.
	cat >>"$PG_DATA/postgresql.conf" <<CONF

# scripts/cdc.sh
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = ''
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
max_connections = 100
fsync = off
full_page_writes = off
CONF
	{
		for v in PG_BIN PG_DATA PG_DATA_TMP PG_PORT PG_ADMIN_PASSWORD PG_PASSWORD; do printf '%s=%q\n' "$v" "${!v}"; done
	} >"$CDC_STATE/rig.conf"
	chmod 600 "$CDC_STATE/rig.conf"
	log "starting postgresql on 127.0.0.1:$PG_PORT (log $CDC_STATE/postgres.log)"
	# No -l: the server logs to pg_ctl's stdout, this script's log file,
	# opened here, so the postgres user need not reach $CDC_STATE.
	as_user postgres "$PG_BIN/pg_ctl" -D "$PG_DATA" -w -t 60 start >>"$CDC_STATE/postgres.log" 2>&1 </dev/null ||
		{ tail -30 "$CDC_STATE/postgres.log" >&2; die "postgresql did not start (log $CDC_STATE/postgres.log)"; }
	head -1 "$PG_DATA/postmaster.pid" >"$CDC_STATE/pg.pid"
	wait_until pg "$CDC_STATE/postgres.log" 30 admin_psql -d postgres -c 'select 1'
	admin_psql -d postgres >>"$CDC_STATE/postgres.log" 2>&1 <<SQL || die "could not create role $PG_USER and database $PG_DB (log $CDC_STATE/postgres.log)"
CREATE ROLE $PG_USER LOGIN REPLICATION PASSWORD '$PG_PASSWORD';
CREATE DATABASE $PG_DB OWNER $PG_USER;
SQL
	[[ "$(admin_psql -d postgres -At -c 'show wal_level')" == logical ]] || die "postgresql's wal_level is not logical"
	log "postgresql ready on 127.0.0.1:$PG_PORT (database $PG_DB, role $PG_USER)"
}

# start_connect BROKERS PLUGIN: Kafka Connect, standalone, until it lists
# the connector class PLUGIN; then env.sh for the database start_* ran.
start_connect() {
	local brokers="$1" plugin="$2"
	# Kafka Connect, standalone: offsets in a file, the connector's topics
	# created by the worker (the broker does not auto-create topics).
	local rest_port
	rest_port="$(free_port)"
	cat >"$CDC_STATE/worker.properties" <<PROPS
bootstrap.servers=$brokers
listeners=http://127.0.0.1:$rest_port
rest.advertised.host.name=127.0.0.1
rest.advertised.port=$rest_port
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=$SCHEMAS_ENABLE
value.converter.schemas.enable=$SCHEMAS_ENABLE
offset.storage.file.filename=$CDC_STATE/connect.offsets
offset.flush.interval.ms=1000
plugin.path=$PLUGINS
# Every plugin here (the worker's own and Debezium's) has a ServiceLoader
# manifest: no class scan at start.
plugin.discovery=service_load
topic.creation.enable=true
PROPS
	cat >"$CDC_STATE/connect-log4j2.properties" <<'LOG'
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
# The clients' config dumps and the REST access log are most of the INFO.
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
logger.config.name = org.apache.kafka.common.config
logger.config.level = WARN
logger.rest.name = org.apache.kafka.connect.runtime.rest
logger.rest.level = WARN
logger.jetty.name = org.eclipse.jetty
logger.jetty.level = WARN
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
LOG
	log "starting kafka connect $CONNECT_VERSION standalone on http://127.0.0.1:$rest_port (kafka $brokers, log $CDC_STATE/connect.log)"
	nohup java -Xms128m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
		-Dlog4j2.configurationFile="$CDC_STATE/connect-log4j2.properties" \
		-cp "$CONNECT_LIBS/*" org.apache.kafka.connect.cli.ConnectStandalone "$CDC_STATE/worker.properties" \
		>>"$CDC_STATE/connect.log" 2>&1 &
	echo $! >"$CDC_STATE/connect.pid"
	local url="http://127.0.0.1:$rest_port"
	wait_until connect "$CDC_STATE/connect.log" 120 sh -c \
		"curl -fsS '$url/connector-plugins' | grep -q $plugin"
	log "kafka connect ready on $url"

	{
		if [[ -n "${MY_PORT:-}" ]]; then
			echo "export DELTAFLOW_TEST_MARIADB_PORT=$MY_PORT"
			echo "export DELTAFLOW_TEST_MARIADB_DB=$MY_DB"
			echo "export DELTAFLOW_TEST_MARIADB_USER=$MY_USER"
			echo "export DELTAFLOW_TEST_MARIADB_PASSWORD=$MY_PASSWORD"
		else
			echo "export DELTAFLOW_TEST_PG_HOST=127.0.0.1"
			echo "export DELTAFLOW_TEST_PG_PORT=$PG_PORT"
			echo "export DELTAFLOW_TEST_PG_DB=$PG_DB"
			echo "export DELTAFLOW_TEST_PG_USER=$PG_USER"
			echo "export DELTAFLOW_TEST_PG_PASSWORD=$PG_PASSWORD"
			echo "export DELTAFLOW_TEST_PG_DSN='postgresql://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/$PG_DB'"
			echo "export DELTAFLOW_TEST_PSQL=$PG_BIN/psql"
		fi
		echo "export DELTAFLOW_TEST_CONNECT_URL=$url"
		echo "export DELTAFLOW_TEST_CDC_KAFKA_BROKERS=$brokers"
		echo "export DELTAFLOW_TEST_CDC_SCHEMAS_ENABLE=$SCHEMAS_ENABLE"
	} >"$CDC_ENV.tmp"
	mv "$CDC_ENV.tmp" "$CDC_ENV"
	log "cdc rig ready; environment in $CDC_ENV"
}

# connector_config NAME TABLE TOPIC_PREFIX: the connector's JSON config:
# Debezium's Postgres connector, or its MariaDB one when the rig runs
# MariaDB (MY_PORT).
connector_config() {
	NAME="$1" TABLE="$2" PREFIX="$3" PG_PORT="${PG_PORT:-}" PG_DB="$PG_DB" PG_USER="$PG_USER" PG_PASSWORD="${PG_PASSWORD:-}" \
		MY_PORT="${MY_PORT:-}" MY_DB="$MY_DB" MY_USER="$MY_USER" MY_PASSWORD="${MY_PASSWORD:-}" HISTORY="$CDC_STATE/$1.history" \
		PARTITIONS="${CDC_TOPIC_PARTITIONS:-1}" SCHEMAS="${CDC_SCHEMAS_ENABLE:-}" EXTRA="${CDC_CONNECTOR_EXTRA:-}" \
		python3 -c 'import json, os, re, sys, zlib
e = os.environ
name = e["NAME"]
c = {
    "tasks.max": "1",
    "database.hostname": "127.0.0.1",
    "topic.prefix": e["PREFIX"],
    "snapshot.mode": "initial",
    "tombstones.on.delete": "true",
    "topic.creation.default.replication.factor": "1",
    "topic.creation.default.partitions": e["PARTITIONS"],
}
if e["MY_PORT"]:
    table = e["TABLE"] if "." in e["TABLE"] else e["MY_DB"] + "." + e["TABLE"]
    c.update({
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "database.port": e["MY_PORT"],
        "database.user": e["MY_USER"],
        "database.password": e["MY_PASSWORD"],
        # A replica of its own: not the server_id 1 of the server itself.
        "database.server.id": str(1000 + zlib.crc32(name.encode()) % 1000000),
        "database.include.list": table.split(".")[0],
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": e["HISTORY"],
        "include.schema.changes": "false",
    })
else:
    # Slot and publication names: lower-case letters, digits and _ only.
    ident = re.sub(r"[^a-z0-9_]", "_", name.lower())
    table = e["TABLE"] if "." in e["TABLE"] else "public." + e["TABLE"]
    c.update({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.port": e["PG_PORT"],
        "database.user": e["PG_USER"],
        "database.password": e["PG_PASSWORD"],
        "database.dbname": e["PG_DB"],
        "plugin.name": "pgoutput",
        "slot.name": "dbz_" + ident,
        "publication.name": "dbz_" + ident,
        "publication.autocreate.mode": "filtered",
    })
c["table.include.list"] = table
if e["SCHEMAS"]:
    for side in ("key", "value"):
        c[side + ".converter"] = "org.apache.kafka.connect.json.JsonConverter"
        c[side + ".converter.schemas.enable"] = e["SCHEMAS"]
if e["EXTRA"]:
    c.update({k: str(v) for k, v in json.loads(e["EXTRA"]).items()})
print(json.dumps(c))
print(e["PREFIX"] + "." + table, file=sys.stderr)'
}

# streaming: whether the new connector streams: PostgreSQL's replication
# slot NAME is active; MariaDB serves more binlog dump threads than the
# DUMPS before it (each connector reads the binlog as a replica).
streaming() {
	if [[ -n "${MY_PORT:-}" ]]; then
		(($(binlog_dumps) > $2))
	else
		[[ "$(admin_psql -d "$PG_DB" -At -c "select active from pg_replication_slots where slot_name = '$1'" 2>/dev/null)" == t ]]
	fi
}

# binlog_dumps: how many binlog dump threads MariaDB serves.
binlog_dumps() {
	admin_mariadb -N -e "select count(*) from information_schema.processlist where command like 'Binlog Dump%'"
}

connector() {
	[[ $# == 3 ]] || die "usage: $0 connector NAME TABLE TOPIC_PREFIX"
	local name="$1" table="$2" prefix="$3" config topic url status state slot
	load_rig
	# shellcheck disable=SC1090 # written by start
	source "$CDC_ENV"
	url="$DELTAFLOW_TEST_CONNECT_URL"
	alive connect || die "kafka connect is not running (log $CDC_STATE/connect.log); run $0 start"
	config="$(connector_config "$name" "$table" "$prefix" 2>"$CDC_STATE/topic.tmp")" || die "bad connector settings (CDC_CONNECTOR_EXTRA?)"
	topic="$(cat "$CDC_STATE/topic.tmp")"
	rm -f "$CDC_STATE/topic.tmp"
	log "registering connector $name (table $table, topic $topic)"
	local out before dumps=""
	before="$(wc -l <"$CDC_STATE/connect.log")"
	[[ -z "${MY_PORT:-}" ]] || dumps="$(binlog_dumps)"
	out="$(curl -sS -o /dev/stderr -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
		--data "$config" "$url/connectors/$name/config" 2>"$CDC_STATE/put.tmp")" || true
	if [[ "$out" != 200 && "$out" != 201 ]]; then
		cat "$CDC_STATE/put.tmp" >&2
		echo >&2
		# The cause is in the worker's log: Connect 4.x answers a failed
		# validation (e.g. Debezium's test connection: a wrong password, no
		# such database) with an HTTP 500 NullPointerException in
		# AbstractHerder.maybeAddConfigErrors, not with the error itself.
		tail -n +"$((before + 1))" "$CDC_STATE/connect.log" | grep -E -A1 '^\[.*\] ERROR' | grep -v '^--' | cut -c1-300 | head -8 >&2
		die "kafka connect refused connector $name (HTTP $out; log $CDC_STATE/connect.log)"
	fi
	rm -f "$CDC_STATE/put.tmp"
	slot="$(python3 -c 'import json, sys; print(json.loads(sys.argv[1]).get("slot.name", "binlog dump"))' "$config")"
	for _ in $(seq 600); do
		status="$(curl -fsS "$url/connectors/$name/status" 2>/dev/null || true)"
		state="$(python3 -c 'import json, sys
try:
    s = json.loads(sys.argv[1])
except ValueError:
    print("UNKNOWN"); raise SystemExit
states = [s["connector"]["state"]] + [t["state"] for t in s.get("tasks", [])]
if "FAILED" in states: print("FAILED")
elif s.get("tasks") and all(x == "RUNNING" for x in states): print("RUNNING")
else: print("/".join(states) or "UNKNOWN")' "$status")"
		if [[ "$state" == FAILED ]]; then
			python3 -c 'import json, sys
s = json.loads(sys.argv[1])
for t in [s["connector"]] + s.get("tasks", []):
    if t.get("trace"): print(t["trace"][:3000], file=sys.stderr)' "$status" || true
			die "connector $name FAILED (log $CDC_STATE/connect.log)"
		fi
		if [[ "$state" == RUNNING ]] && streaming "$slot" "$dumps"; then
			log "connector $name RUNNING, streaming (slot $slot); topic $topic"
			echo "$topic"
			return
		fi
		alive connect || { tail -50 "$CDC_STATE/connect.log" >&2; die "kafka connect exited (log $CDC_STATE/connect.log)"; }
		sleep 0.2
	done
	die "connector $name not RUNNING and streaming (slot $slot) after 120s (state $state; log $CDC_STATE/connect.log)"
}

case "${1:-}" in
install) install ;;
start)
	shift
	start "$@"
	;;
connector)
	shift
	connector "$@"
	;;
stop) stop ;;
env) cat "$CDC_ENV" ;;
psql)
	shift
	load_rig
	PGPASSWORD="$PG_PASSWORD" exec "$PG_BIN/psql" -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" -d "$PG_DB" "$@"
	;;
mariadb)
	shift
	load_rig
	[[ -n "${MY_PORT:-}" ]] || die "the CDC rig runs PostgreSQL, not MariaDB ($0 start mariadb)"
	MYSQL_PWD="$MY_PASSWORD" exec mariadb --no-defaults -h 127.0.0.1 -P "$MY_PORT" -u "$MY_USER" "$MY_DB" "$@"
	;;
*) die "usage: $0 install|start [postgres|mariadb]|connector NAME TABLE TOPIC_PREFIX|stop|env|psql [ARGS]|mariadb [ARGS]" ;;
esac
