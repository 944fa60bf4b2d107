#!/usr/bin/env bash
# The demo: set everything up, build the standard-library corpus, start the embedded
# server, mount kg-fuse at MOUNTPOINT (default: ~/kg) and print a few commands to try.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

KG=.venv/bin/kg-fuse
PY=.venv/bin/python
MNT="$(realpath -m "${1:-$HOME/kg}")"
DATA="$($PY -c 'from kg_fuse import paths; print(paths.data_dir())')"
SERVER_LOG="$DATA/server.log"
API_URL="$($PY -c 'from kg_fuse import paths; print(paths.DEFAULT_API_URL)')"
mkdir -p "$DATA"

healthy() { $PY -c "import httpx,sys; sys.exit(httpx.get('$API_URL/health', timeout=1).status_code != 200)" 2>/dev/null; }

echo "==> building the Python standard library corpus (first time: a few minutes)"
$KG index

if healthy; then
    echo "==> the embedded server is already running at $API_URL"
else
    echo "==> starting the embedded server at $API_URL (log: $SERVER_LOG)"
    nohup $KG serve >>"$SERVER_LOG" 2>&1 &
    for _ in $(seq 1 120); do healthy && break; sleep 0.5; done
    healthy || { echo "the server did not start; see $SERVER_LOG" >&2; tail -5 "$SERVER_LOG" >&2; exit 1; }
fi
$KG calibrate

mkdir -p "$MNT"
if mountpoint -q "$MNT" 2>/dev/null || ! stat "$MNT" >/dev/null 2>&1; then
    $KG unmount "$MNT" || true
fi
$KG mount "$MNT"

cat <<TRY

kg-fuse is mounted at $MNT. Try:

  cd $MNT
  mkdir "compress data with gzip"      # a saved semantic search
  ls "compress data with gzip"         # matching concepts, one file each
  cat "compress data with gzip"/gzip.compress.concept.md
  cat "compress data with gzip"/.meta/threshold     # inherited server default
  echo 0.6 > "compress data with gzip"/.meta/threshold && ls "compress data with gzip"
  mkdir "asdfgh qwerty zxcvb" && ls "asdfgh qwerty zxcvb"   # gibberish: nothing passes
  cat "compress data with gzip"/.meta/query.toml

Stop:  $KG unmount $MNT   (the server keeps running: kill it with  pkill -f 'kg-fuse serve')
TRY
