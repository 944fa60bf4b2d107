#!/usr/bin/env bash
# The demo: set everything up, build the standard-library corpus, start the embedded
# server in the background, mount kg-fuse at MOUNTPOINT (default: ~/kg), put kg-fuse on
# PATH (a link in ~/.local/bin) and print what to try and how to stop everything.
# A second run only checks: seconds.
#
# Environment: KG_DEMO_MODULES=gzip,tarfile,...  build only these stdlib modules (tests);
#              KG_DEMO_PORT=8765                  the server's port.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
./scripts/setup.sh

KG="$PWD/.venv/bin/kg-fuse"
MNT="$(realpath -m "${1:-$HOME/kg}")"
PORT="${KG_DEMO_PORT:-8765}"
CORPUS=()
if [ -n "${KG_DEMO_MODULES:-}" ]; then CORPUS=(--modules "$KG_DEMO_MODULES"); fi

# kg-fuse on PATH for the README's commands: a link in ~/.local/bin (never replacing a
# kg-fuse that is not ours)
BIN="$HOME/.local/bin"
mkdir -p "$BIN"
if [ ! -e "$BIN/kg-fuse" ] || [ -L "$BIN/kg-fuse" ]; then ln -sfn "$KG" "$BIN/kg-fuse"; fi

if "$KG" server status >/dev/null 2>&1; then
    echo "==> the embedded server is already running"
else
    if "$KG" calibrate --show >/dev/null 2>&1; then
        echo "==> the corpus is already built"
    else
        echo "==> building the Python standard library corpus (first time: a few minutes)"
        "$KG" index "${CORPUS[@]}"
    fi
    echo "==> starting the embedded server on 127.0.0.1:$PORT"
    "$KG" server start --port "$PORT" "${CORPUS[@]}"
fi
echo "==> calibration of the default threshold (stored when the corpus was built)"
"$KG" calibrate --show | sed 's/^/    /'

mkdir -p "$MNT"
case "$("$KG" status "$MNT" 2>/dev/null || true)" in
    *": mounted") echo "==> $MNT is already mounted" ;;
    *"dead mount"*) "$KG" unmount "$MNT"; "$KG" mount "$MNT" ;;
    *) "$KG" mount "$MNT" ;;
esac

path_hint=""
case ":$PATH:" in
    *":$BIN:"*) ;;
    *) path_hint="
First, in each new shell until your next login, put kg-fuse on PATH:

  export PATH=\"\$HOME/.local/bin:\$PATH\"
" ;;
esac

cat <<TRY

kg-fuse is mounted at $MNT (ready in $(( $(date +%s) - started )) s).
$path_hint
Try:

  cd $MNT
  mkdir "compress data with gzip"      # a saved semantic search
  ls -U "compress data with gzip"      # matching concepts, best first
  cat "compress data with gzip"/gzip.compress.concept.md
  cat "compress data with gzip"/.meta/threshold     # inherited server default
  mkdir "asdfgh qwerty zxcvb" && ls "asdfgh qwerty zxcvb"   # gibberish: nothing passes

More in README.md ("Using it").

Stop everything (cd out of the mount first):

  cd && kg-fuse unmount $MNT && kg-fuse server stop
TRY
