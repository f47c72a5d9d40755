#!/usr/bin/env bash
# Builds the release: for linux/arm64 (the Pi) and linux/amd64, a static
# binary with the version stamped in, packed with what a user needs to run it
# into dist/deltaflow-VERSION-linux-ARCH.tar.gz, its SPDX 2.3 SBOM beside it
# (deltaflow-VERSION-linux-ARCH.spdx.json), and SHA256SUMS over all of them.
# `make release` runs it.
#
#   VERSION  the version stamped in and named in the files
#            (default: git describe --tags --always --dirty)
#   DIST     the output directory (default: dist); SHA256SUMS there lists
#            this run's files only
#
# Reproducible: the same commit and toolchain give the same bytes (-trimpath,
# tar entries sorted, owned by 0:0 and dated at the commit, gzip -n).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

VERSION="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)}"
REVISION="${REVISION:-$(git rev-parse HEAD 2>/dev/null || true)}"
DIST="${DIST:-dist}"
ARCHES=(arm64 amd64)
# What goes into each tarball besides the binary (LICENSE when there is one).
FILES=(README.md docs configs docker-compose.yml docker-compose.seed.yml .env.example deploy)
[[ -f LICENSE ]] && FILES+=(LICENSE)

# Dates in the tarballs and SBOMs: the commit's, so a rebuild is identical.
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
export SOURCE_DATE_EPOCH

[[ "$VERSION" =~ ^[0-9A-Za-z._+-]+$ ]] || die "VERSION=$VERSION: use letters, digits and . _ + - only (it names files)"
for tool in tar gzip sha256sum; do
	command -v "$tool" >/dev/null || die "$tool is required"
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$DIST"
DIST="$(cd "$DIST" && pwd)"

# The SBOM tool runs on this machine, whatever the release's platform.
go build -o "$work/sbom" ./cmd/sbom

artifacts=()
for arch in "${ARCHES[@]}"; do
	name="deltaflow-$VERSION-linux-$arch"
	log "building $name"
	stage="$work/$name"
	mkdir -p "$stage"
	# Static (no libc), no build paths or symbol tables, the version stamped in
	# (the Makefile's GOFLAGS_RELEASE; the embedded NATS server included, as
	# `make cross` builds it, so `deltaflow demo` and a nats.url-less run work).
	CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -trimpath \
		-ldflags="-s -w -X github.com/deltaflow/deltaflow/runtime/daemon.version=$VERSION -X github.com/deltaflow/deltaflow/runtime/daemon.revision=$REVISION" \
		-o "$stage/deltaflow" ./cmd/deltaflow
	cp -R "${FILES[@]}" "$stage/"
	# Modes independent of the umask: the binary 0755, the rest 0644 / 0755.
	chmod -R u=rwX,go=rX "$stage"
	chmod 0755 "$stage/deltaflow"

	"$work/sbom" -name "$name" -version "$VERSION" -file-name deltaflow \
		-o "$DIST/$name.spdx.json" "$stage/deltaflow"
	tar --create --format=gnu --sort=name --mtime="@$SOURCE_DATE_EPOCH" \
		--owner=0 --group=0 --numeric-owner -C "$work" "$name" |
		gzip -n -9 >"$DIST/$name.tar.gz"
	artifacts+=("$name.tar.gz" "$name.spdx.json")
done

(cd "$DIST" && sha256sum "${artifacts[@]}" >SHA256SUMS)
log "wrote $DIST:"
(cd "$DIST" && ls -l "${artifacts[@]}" SHA256SUMS >&2)
