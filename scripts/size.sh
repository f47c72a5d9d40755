#!/usr/bin/env bash
# size.sh: what the linux/arm64 binary weighs, per build and per package.
#
# Builds the three variants stripped as releases are (the full binary, the
# one without the embedded nats-server, and the image's daemon build without
# the developer tools) and prints their sizes, then the packages that weigh
# most in the image's build by symbol size (code and data; the remainder of
# the file is mostly the pclntab and type metadata, which scale with them).
#
#   scripts/size.sh [TOP]     # TOP packages, default 25 (make size)
set -euo pipefail
cd "$(dirname "$0")/.."
top="${1:-25}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

build() { # tags out [ldflags]
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -tags "$1" -trimpath -ldflags="${3--s -w}" -o "$2" ./cmd/deltaflow
}
mib() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%10d bytes  %5.2f MiB", b, b / 1048576 }'; }

printf '%-40s %s\n' "build (linux/arm64, stripped)" "size"
for v in "full:" "no embedded NATS:nonatsserver" "image (daemon):nonatsserver,nodevtools"; do
	name=${v%%:*} tags=${v#*:}
	build "$tags" "$work/bin"
	printf '%-40s %s\n' "$name${tags:+ (-tags $tags)}" "$(mib "$work/bin")"
done

echo
echo "heaviest packages of the image build, by symbol size:"
build nonatsserver,nodevtools "$work/syms" "-w"
go tool nm -size "$work/syms" | awk -v top="$top" '
	$3 ~ /^[TtDdBbRr]$/ && $2 < 20000000 {
		name = $4
		sub(/^(type:|go:)/, "", name); gsub(/[*()]/, "", name); gsub(/%2e/, ".", name)
		# the package path: up to the first dot after the last slash
		n = split(name, part, "/"); last = part[n]; sub(/\..*/, "", last)
		pkg = ""; for (i = 1; i < n; i++) pkg = pkg part[i] "/"; pkg = pkg last
		if (pkg ~ /^(github\.com|golang\.org|google\.golang\.org|go\.opentelemetry\.io|go\.yaml\.in)\//) {
			split(pkg, m, "/"); pkg = m[1] "/" m[2] "/" m[3]
		}
		if ($4 ~ /^go:func\./) pkg = "(go:func.* closure metadata)"
		size[pkg] += $2
	}
	END { for (p in size) printf "%10d  %s\n", size[p], p }' | sort -rn | head -n "$top"
