#!/usr/bin/env bash
# Installs what the integration tests need, once: a pinned MinIO server built
# from source into $CACHE/bin, and a Python venv with deltalake + pyarrow (the
# reference reader for tables deltaflow writes). Does nothing when present.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

# The stamp records the pinned module so a version bump reinstalls.
if [[ -x "$BIN/minio" && "$(cat "$BIN/minio.version" 2>/dev/null)" == "$MINIO_MODULE" ]]; then
	log "minio: cached ($BIN/minio)"
else
	log "minio: building $MINIO_MODULE into $BIN (takes minutes the first time)"
	GOBIN="$BIN" GOFLAGS=-buildvcs=false go install "$MINIO_MODULE"
	echo "$MINIO_MODULE" >"$BIN/minio.version"
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
