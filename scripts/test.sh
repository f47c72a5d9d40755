#!/usr/bin/env bash
# test.sh — the full test run (README's test command, `make test`, CI):
# installs the pinned test servers if missing, starts them, then runs
# go vet and every test with -race. Tests that need a server fail rather
# than skip here (DELTAFLOW_TEST_REQUIRE_SERVERS=1). Extra arguments go to
# go test, e.g. scripts/test.sh -run S3 -v.
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

log "go test -race -shuffle=on -count=1 -timeout 25m ./... $*"
status=0
go test -race -shuffle=on -count=1 -timeout 25m "$@" ./... || status=$?
exit "$status"
