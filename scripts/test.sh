#!/usr/bin/env bash
# test.sh — the full test run (README's test command, `make test`, CI):
# installs the pinned test servers and tools if missing (install-deps.sh),
# starts MinIO, Kafka (KRaft) and nats-server (servers.sh), then runs go vet,
# govulncheck, and every test with -race (TestRelease in internal/tests/deploy
# cross-builds the static release binaries for the Pi, linux/arm64, and for
# linux/amd64). Tests that need a server fail rather than skip here
# (DELTAFLOW_TEST_REQUIRE_SERVERS=1). Extra arguments go to
# go test, e.g. scripts/test.sh -run S3 -v. Without them, every fuzz target
# then runs briefly (scripts/fuzz.sh, FUZZTIME=10s; `make fuzz` runs long).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

scripts/install-deps.sh
# Each run gets its own server state, so two runs (or a run beside
# `make servers-start`) never stop each other's servers.
DELTAFLOW_STATE="$(mktemp -d "${TMPDIR:-/tmp}/deltaflow-test.XXXXXX")"
export DELTAFLOW_STATE
STATE="$DELTAFLOW_STATE"
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	scripts/servers.sh stop || true
	if [[ "${status:-1}" == 0 ]]; then
		rm -rf "$STATE"
	else
		log "failed; server logs kept in $STATE"
	fi
}
trap cleanup EXIT
scripts/servers.sh start
# shellcheck disable=SC1091 # written by servers.sh
source "$STATE/env.sh"

log "go vet ./..."
go vet ./...

# govulncheck against the local copy of the Go vulnerability database
# (install-deps.sh): any known vulnerability reachable from deltaflow's code
# fails the run.
log "govulncheck (database golang.org/x/vulndb@$(cat "$VULNDB/version"), $(go env GOVERSION))"
govulncheck -db "file://$VULNDB" ./... || die "govulncheck found vulnerabilities reachable from deltaflow (or could not run)"

# DELTAFLOW_TEST_PKGS narrows the packages (make reliability).
pkgs="${DELTAFLOW_TEST_PKGS:-./...}"
log "go test -race -shuffle=on -count=1 -timeout ${DELTAFLOW_TEST_TIMEOUT:-25m} $* $pkgs"
status=0
# The tests' temporary files (the deltaflow binaries they build, 50 MB each,
# bench and server directories) go under the run's state, removed with it:
# in /tmp they piled up run after run.
export TMPDIR="$STATE/tmp"
mkdir -p "$TMPDIR"
# shellcheck disable=SC2086 # $pkgs may name several packages.
go test -race -shuffle=on -count=1 -timeout "${DELTAFLOW_TEST_TIMEOUT:-25m}" "$@" $pkgs || status=$?

if [[ $# -eq 0 ]]; then
	log "fuzz: every target for ${FUZZTIME:-10s}"
	scripts/fuzz.sh || status=1
else
	log "fuzz skipped: go test arguments given ($*)"
fi
exit "$status"
