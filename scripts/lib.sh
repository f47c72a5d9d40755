# shellcheck shell=bash
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

# Pinned versions: bump them here only.
MINIO_MODULE="github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c"
DELTALAKE_VERSION="1.6.6"
PYARROW_VERSION="26.0.1"

log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }
die() { log "error: $*"; exit 1; }

mkdir -p "$BIN" "$STATE"
