#!/usr/bin/env bash
# fuzz.sh — runs every fuzz target of the module for FUZZTIME each (default
# 10s, as the test command does; `make fuzz` runs them for 5m). go test -fuzz
# takes one target at a time, so the targets (every `func FuzzX` in a
# _test.go file) are found with grep and run one by one; a new target is
# fuzzed without being listed anywhere. A failing input is written to the
# package's testdata/fuzz/<target>/: fix the bug and commit the file as a
# regression seed. Extra arguments go to go test, e.g. -parallel 1.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME="${FUZZTIME:-10s}"
# Go minimizes every new interesting input for up to a minute by default,
# which on large inputs (checkpoint files) stalls a short run entirely.
FUZZMINIMIZETIME="${FUZZMINIMIZETIME:-5s}"

log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }

failed=()
n=0
while IFS= read -r file; do
	pkg="./$(dirname "$file")"
	for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | cut -d' ' -f2); do
		n=$((n + 1))
		log "$pkg $target for $FUZZTIME"
		if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" \
			-fuzzminimizetime "$FUZZMINIMIZETIME" "$@" "$pkg"; then
			failed+=("$pkg $target")
		fi
	done
done < <(grep -rl --include='*_test.go' '^func Fuzz' . | sed 's|^\./||' | sort)

[[ "$n" -gt 0 ]] || { log "error: no fuzz targets found"; exit 1; }
if [[ "${#failed[@]}" -gt 0 ]]; then
	log "error: ${#failed[@]} of $n fuzz targets failed: ${failed[*]}"
	exit 1
fi
log "$n fuzz targets ran for $FUZZTIME each without a failure"
