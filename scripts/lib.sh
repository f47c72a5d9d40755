# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables here are for the scripts that source it
# Common settings for the deltaflow scripts; source it, do not run it.
#
# Everything downloaded or built for tests lives in one cache directory so a
# second run is fast and `rm -rf "$DELTAFLOW_CACHE"` starts from scratch.

DELTAFLOW_CACHE="${DELTAFLOW_CACHE:-$HOME/.cache/deltaflow}"
CACHE="$DELTAFLOW_CACHE"
BIN="$CACHE/bin"
VENV="$CACHE/venv"
# STATE holds the running servers' pid files, logs, data and env.sh.
STATE="${DELTAFLOW_STATE:-$CACHE/state}"
export DELTAFLOW_CACHE PATH="$BIN:$PATH"

# deltaflow builds and tests with Go 1.27.3, which the Go module proxy serves
# as a toolchain: the machine's go1.26.8 lacks the crypto/tls, crypto/x509
# and net/http fixes of GO-2026-6607, -6608, -6617 and -6809 (govulncheck
# finds them reachable), and 1.27.3 is the newer toolchain available here.
# go.mod names it too (toolchain go1.27.3), so a plain `go` with Go's default
# GOTOOLCHAIN=auto switches to it; its go line stays 1.26.8, the least Go a
# GOTOOLCHAIN=local build needs.
GO_TOOLCHAIN="go1.27.3"
export GOTOOLCHAIN="$GO_TOOLCHAIN"

# Pinned versions: bump them here only.
MINIO_MODULE="github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c"
DELTALAKE_VERSION="1.6.6"
PYARROW_VERSION="26.0.1"
# DuckDB and its delta and httpfs extensions (delta_scan, S3), a second
# reader the tests check next to delta-rs (scripts/deltars.py --duckdb): from
# PyPI into the same venv, each extension loaded from its package's
# extensions/ folder.
DUCKDB_VERSION="1.5.5"
# The producers deltaflow did not write (scripts/avroproduce.py,
# jsonschemaproduce.py, protoproduce.py), and protoc for the last.
CONFLUENT_KAFKA_VERSION="2.16.1"
FASTAVRO_VERSION="1.13.1"
GRPCIO_TOOLS_VERSION="1.85.1"
PYTHON_PROTOBUF_VERSION="7.36.2"
# The seed's Spark job (scripts/spark), run by the takeover tests: pyspark and
# delta-spark from PyPI into the same venv; their jars (scripts/spark/session.py
# names them) from Maven Central through spark.jars.packages into SPARK_IVY.
PYSPARK_VERSION="3.5.1"
DELTA_SPARK_VERSION="3.2.0"
SPARK_IVY="$CACHE/ivy"
# Spark 4 for the checks of tables delta-spark 4 makes (delta/spark4_test.go,
# scripts/spark4): pyspark from PyPI into its own venv (delta-spark 4.4 pins
# pyspark <= 4.2.0, and the seed's job stays on 3.5), the Delta jar
# (scripts/spark4/session.py names it) from Maven Central into SPARK4_IVY.
PYSPARK4_VERSION="4.2.0"
DELTA_SPARK4_VERSION="4.4.0"
VENV_SPARK4="$CACHE/venv-spark4"
SPARK4_IVY="$CACHE/ivy-spark4"
# Kafka broker jars from Maven Central (no Docker engine here, and the Apache
# download site is not reachable): 4.1 runs KRaft-only on the machine's Java 17.
KAFKA_VERSION="4.1.1"
# Kafka logs through slf4j 1.7 by default; the broker distribution ships
# slf4j 2 + log4j2's binding, and so do we (without a binding it logs nothing).
SLF4J_VERSION="2.0.17"
LOG4J_VERSION="2.24.3"
NATSCLI_MODULE="github.com/nats-io/natscli/nats@v0.5.0"
NATS_SERVER_MODULE="github.com/nats-io/nats-server/v2@v2.15.2"
# govulncheck and the vulnerability database it reads, pinned like every
# other tool: @latest once broke a fresh machine's run (govulncheck v1.10.0
# cannot load go1.27.3's standard library) while machines with last week's
# build stayed green; v1.9.0 is the newest that reads it. Bump them here,
# together, after a `make test` with an empty DELTAFLOW_CACHE.
GOVULNCHECK_MODULE="golang.org/x/vuln/cmd/govulncheck@v1.9.0"
VULNDB_VERSION="v0.0.0-20261105234957-e22db6528018"
KAFKA_HOME="$CACHE/kafka"
# The Go vulnerability database, built locally (see install-deps.sh).
VULNDB="$CACHE/vulndb"
# Maven's repository lives in the cache too, so `rm -rf $DELTAFLOW_CACHE`
# really starts from scratch and ~/.m2 is left alone.
M2_REPO="$CACHE/m2"

log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# apt_get PACKAGE: installs Debian's PACKAGE (root only; apt-get update
# only if the first try fails).
apt_get() {
	[[ "$(id -u)" == 0 ]] || die "$1 missing; install it (sudo apt-get install $1)"
	log "apt-get install $1"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq "$1" >/dev/null 2>&1 || {
		apt-get update -qq
		apt-get install -y -qq "$1" >/dev/null
	}
}

mkdir -p "$BIN" "$STATE"

# free_port prints a free port below the kernel's ephemeral range: a server
# that restarts on its port (restart) must not find it taken meanwhile by
# some client's outgoing connection, which only ever get ephemeral ports.
free_port() {
	python3 -c 'import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(1000):
    port = random.randrange(10000, max(low, 10001))
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("no free port")'
}

# need_maven WHAT: fail unless java and mvn are here to fetch and run WHAT
# (Java 17+ jars from Maven Central).
need_maven() {
	command -v java >/dev/null || die "java not found ($1 needs Java 17+)"
	command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
}
