#!/usr/bin/env bash
# Installs what the integration tests need, once, into $DELTAFLOW_CACHE:
#   - a pinned MinIO server built from source ($BIN/minio)
#   - the Apache Kafka broker as jars from Maven Central ($KAFKA_HOME/libs),
#     run in KRaft mode by servers.sh (no Docker engine on this machine)
#   - nats-server (external JetStream server) and the nats CLI ($BIN)
#   - govulncheck ($BIN) and its vulnerability database ($VULNDB), run by
#     test.sh
#   - kcat, a Kafka client deltaflow did not write (Debian package)
#   - promtool, which checks and unit-tests deploy/prometheus/alerts.yml
#     (Debian package prometheus; its server is not left running)
#   - a Python venv with deltalake + pyarrow (the reference table reader)
#   - duckdb with its delta and httpfs extensions in that venv (DuckDB's
#     delta_scan, on disk and on S3)
#   - pyspark + delta-spark in that venv, and the Spark jars the seed's job
#     loads (Delta, the Kafka source) in an Ivy cache ($SPARK_IVY)
#   - pyspark 4 in its own venv ($VENV_SPARK4) and the delta-spark 4 jar in
#     $SPARK4_IVY, for the checks against what delta-spark 4 writes and reads
#   - PostgreSQL and MariaDB (Debian packages), Kafka Connect and Debezium's
#     Postgres and MariaDB connectors (Maven Central): the real change data
#     sources (cdc.sh)
# Each step checks a version stamp first, so a warm run does nothing.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

# go_tool NAME MODULE [TOOLCHAIN]: go install MODULE into $BIN unless the
# stamp says it is already there at that version. The servers are built with
# the machine's own Go (GOTOOLCHAIN=local), the versions they were verified
# with; govulncheck needs deltaflow's toolchain to read its standard library.
go_tool() {
	local name="$1" module="$2" toolchain="${3:-local}"
	local stamp="$module"
	[[ "$toolchain" == local ]] || stamp="$module $toolchain"
	if [[ -x "$BIN/$name" && "$(cat "$BIN/$name.version" 2>/dev/null)" == "$stamp" ]]; then
		log "$name: cached ($BIN/$name)"
		return
	fi
	log "$name: building $module into $BIN"
	GOTOOLCHAIN="$toolchain" GOBIN="$BIN" GOFLAGS=-buildvcs=false go install "$module"
	echo "$stamp" >"$BIN/$name.version"
}

# The stamp records the pinned module so a version bump reinstalls.
if [[ -x "$BIN/minio" && "$(cat "$BIN/minio.version" 2>/dev/null)" == "$MINIO_MODULE" ]]; then
	log "minio: cached ($BIN/minio)"
else
	log "minio: building $MINIO_MODULE into $BIN (takes minutes the first time)"
	GOTOOLCHAIN=local GOBIN="$BIN" GOFLAGS=-buildvcs=false go install "$MINIO_MODULE"
	echo "$MINIO_MODULE" >"$BIN/minio.version"
fi

go_tool nats "$NATSCLI_MODULE"
go_tool nats-server "$NATS_SERVER_MODULE"
go_tool govulncheck "$GOVULNCHECK_MODULE" "$GO_TOOLCHAIN"

# The vulnerability database: vuln.go.dev is not reachable from here, but
# the same OSV records ship in the golang.org/x/vulndb module on the Go
# proxy, and its indexdb command writes the layout `govulncheck -db file://`
# reads. The stamp is the pinned version: bumping VULNDB_VERSION rebuilds it.
if [[ -f "$VULNDB/index/db.json" && "$(cat "$VULNDB/version" 2>/dev/null)" == "$VULNDB_VERSION" ]]; then
	log "vulndb: cached ($VULNDB, golang.org/x/vulndb@$VULNDB_VERSION)"
else
	dir="$(cd "${TMPDIR:-/tmp}" && GOTOOLCHAIN=local go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
	log "vulndb: building the database from golang.org/x/vulndb@$VULNDB_VERSION into $VULNDB"
	GOTOOLCHAIN=local GOBIN="$BIN" GOFLAGS=-buildvcs=false go install "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION"
	rm -rf "$VULNDB.new"
	"$BIN/indexdb" -vulns "$dir/data/osv" -out "$VULNDB.new"
	echo "$VULNDB_VERSION" >"$VULNDB.new/version"
	rm -rf "$VULNDB"
	mv "$VULNDB.new" "$VULNDB"
fi

# Kafka: a throwaway pom naming the broker (kafka_2.13 pulls kafka-server,
# -metadata, -raft, -storage, the coordinators, scala-library...) plus a
# logging binding; Maven copies the runtime closure into $KAFKA_HOME/libs.
kafka_want="kafka_2.13:$KAFKA_VERSION slf4j-api:$SLF4J_VERSION log4j:$LOG4J_VERSION"
if [[ -f "$KAFKA_HOME/libs/kafka_2.13-$KAFKA_VERSION.jar" && "$(cat "$KAFKA_HOME/version" 2>/dev/null)" == "$kafka_want" ]]; then
	log "kafka: cached ($KAFKA_HOME/libs)"
else
	need_maven "Kafka $KAFKA_VERSION"
	log "kafka: fetching Apache Kafka $KAFKA_VERSION jars from Maven Central into $KAFKA_HOME/libs"
	rm -rf "$KAFKA_HOME"
	mkdir -p "$KAFKA_HOME"
	cat >"$KAFKA_HOME/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.deltaflow.test</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>$SLF4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
POM
	# Maven's output (escape codes even with -B) goes to a log, shown on failure.
	mvn -B -q -f "$KAFKA_HOME/pom.xml" -Dmaven.repo.local="$M2_REPO" \
		dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$KAFKA_HOME/libs" \
		>"$KAFKA_HOME/mvn.log" 2>&1 || { cat "$KAFKA_HOME/mvn.log" >&2; die "maven could not fetch the Kafka jars"; }
	echo "$kafka_want" >"$KAFKA_HOME/version"
fi

# apt_tool COMMAND PACKAGE: the Debian package providing COMMAND, installed
# when COMMAND is missing (apt-get update only if the first try fails).
apt_tool() {
	local cmd="$1" pkg="$2"
	if command -v "$cmd" >/dev/null; then
		log "$cmd: installed ($(command -v "$cmd"))"
		return 1
	fi
	apt_get "$pkg"
}

# kcat: a Kafka client deltaflow did not write.
apt_tool kcat kcat || true
# promtool: from Debian's prometheus package, whose server the tests do not
# want: on a machine with systemd the package starts it; stop it again.
if apt_tool promtool prometheus && [[ -d /run/systemd/system ]]; then
	systemctl disable --now prometheus >/dev/null 2>&1 || true
fi

want="deltalake==$DELTALAKE_VERSION pyarrow==$PYARROW_VERSION"
if [[ -x "$VENV/bin/python" && "$(cat "$VENV/deps.version" 2>/dev/null)" == "$want" ]] &&
	"$VENV/bin/python" -c 'import deltalake, pyarrow' 2>/dev/null; then
	log "python: cached ($VENV)"
else
	py="$(command -v python3 || true)"
	[[ -n "$py" ]] || die "python3 not found; install it (apt-get install python3-venv)"
	log "python: creating $VENV with $want"
	rm -rf "$VENV"
	"$py" -m venv "$VENV"
	# shellcheck disable=SC2086 # $want is two arguments on purpose.
	"$VENV/bin/pip" install --quiet --disable-pip-version-check $want
	echo "$want" >"$VENV/deps.version"
fi

# venv_install NAME STAMP IMPORTS WANT: pip install WANT (pinned packages,
# space-separated) into $VENV unless its stamp file $VENV/STAMP says WANT
# and python imports IMPORTS; the stamps live in the venv, so a new venv
# reinstalls them.
venv_install() {
	local name="$1" stamp="$VENV/$2" imports="$3" want="$4"
	if [[ "$(cat "$stamp" 2>/dev/null)" == "$want" ]] && "$VENV/bin/python" -c "import $imports" 2>/dev/null; then
		log "$name: cached ($VENV)"
		return
	fi
	log "$name: installing $want into $VENV"
	# shellcheck disable=SC2086 # $want is several arguments on purpose.
	"$VENV/bin/pip" install --quiet --disable-pip-version-check $want
	echo "$want" >"$stamp"
}
# DuckDB with its delta and httpfs (S3) extensions: DuckDB cannot download
# extensions here.
venv_install duckdb duckdb.version "duckdb, duckdb_extension_delta, duckdb_extension_httpfs" \
	"duckdb==$DUCKDB_VERSION duckdb-extension-delta==$DUCKDB_VERSION duckdb-extension-httpfs==$DUCKDB_VERSION"
# confluent-kafka + fastavro: a producer of Avro, JSON Schema and Protobuf
# records that is not ours, with its Schema Registry client and serializers
# (the schemaregistry, json and protobuf extras); grpcio-tools gives the
# Protobuf tests protoc.
venv_install confluent-kafka avro.version "confluent_kafka, fastavro, confluent_kafka.schema_registry.avro, confluent_kafka.schema_registry.json_schema, confluent_kafka.schema_registry.protobuf, grpc_tools.protoc" \
	"confluent-kafka[schemaregistry,json,protobuf]==$CONFLUENT_KAFKA_VERSION fastavro==$FASTAVRO_VERSION grpcio-tools==$GRPCIO_TOOLS_VERSION protobuf==$PYTHON_PROTOBUF_VERSION"
# pyspark + delta-spark: the seed's Spark job for the takeover tests.
venv_install pyspark spark.version "pyspark, delta" "pyspark==$PYSPARK_VERSION delta-spark==$DELTA_SPARK_VERSION"

# spark_jars NAME PYTHON DIR IVY: resolve the jars DIR/session.py names
# (session.PACKAGES, through spark.jars.packages from Maven Central) into
# the Ivy cache IVY with one Spark start, unless IVY's stamp says they are
# there; later starts find them there.
spark_jars() {
	local name="$1" python="$2" dir="$3" ivy="$4" want start
	want="$(cd "$dir" && "$python" -c 'import session; print(",".join(session.PACKAGES))')"
	if [[ "$(cat "$ivy/packages.version" 2>/dev/null)" == "$want" ]]; then
		log "$name jars: cached ($ivy)"
		return
	fi
	command -v java >/dev/null || die "java not found ($name needs Java 17)"
	log "$name jars: resolving $want into $ivy"
	mkdir -p "$ivy"
	start=$SECONDS
	(cd "$dir" && DELTAFLOW_CACHE="$CACHE" "$python" session.py) >"$ivy/resolve.log" 2>&1 ||
		{ tail -50 "$ivy/resolve.log" >&2; die "$name could not resolve its jars"; }
	log "$name jars: resolved in $((SECONDS - start))s"
	echo "$want" >"$ivy/packages.version"
}
spark_jars spark "$VENV/bin/python" "$(cd "$(dirname "$0")/spark" && pwd)" "$SPARK_IVY"

# Spark 4: pyspark in its own venv, the Delta jar resolved by one start.
spark4_want="pyspark==$PYSPARK4_VERSION"
if [[ -x "$VENV_SPARK4/bin/python" && "$(cat "$VENV_SPARK4/deps.version" 2>/dev/null)" == "$spark4_want" ]] &&
	"$VENV_SPARK4/bin/python" -c 'import pyspark' 2>/dev/null; then
	log "pyspark 4: cached ($VENV_SPARK4)"
else
	log "pyspark 4: creating $VENV_SPARK4 with $spark4_want"
	rm -rf "$VENV_SPARK4"
	python3 -m venv "$VENV_SPARK4"
	"$VENV_SPARK4/bin/pip" install --quiet --disable-pip-version-check "$spark4_want"
	echo "$spark4_want" >"$VENV_SPARK4/deps.version"
fi
spark4_dir="$(cd "$(dirname "$0")/spark4" && pwd)"
grep -q "io.delta:delta-spark_4.2_2.13:$DELTA_SPARK4_VERSION" "$spark4_dir/session.py" ||
	die "scripts/spark4/session.py does not name delta-spark $DELTA_SPARK4_VERSION (scripts/lib.sh)"
spark_jars "spark 4" "$VENV_SPARK4/bin/python" "$spark4_dir" "$SPARK4_IVY"

# Change data: PostgreSQL, MariaDB, Kafka Connect and Debezium (cdc.sh install).
"$(dirname "$0")/cdc.sh" install
