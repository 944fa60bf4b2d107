#!/usr/bin/env bash
# The demo: set everything up, build the standard-library corpus, start the embedded
# server in the background, mount kg-fuse at MOUNTPOINT (default: ~/kg), put kg-fuse on
# PATH (a link in ~/.local/bin) and print a first look and how to stop everything (the
# calibration table goes to a log).
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
# The calibration table (some 50 lines) goes to the demo's log; the terminal gets its result.
DEMO_LOG="${XDG_DATA_HOME:-$HOME/.local/share}/kg-fuse/demo.log"
mkdir -p "$(dirname "$DEMO_LOG")"
{ echo "== $(date -Is) kg-fuse calibrate --show"; "$KG" calibrate --show; } >> "$DEMO_LOG"
default="$(sed -n 's/^default: //p' "$DEMO_LOG" | tail -1)"
echo "==> default threshold ${default:-unknown}, calibrated above the noise of gibberish queries"
echo "    (the table: kg-fuse calibrate --show; also in $DEMO_LOG)"

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

# The first look below creates nothing the README's blocks create, so they still work after it.
# The mountpoint as a shell reads it back (quoted: a path with spaces), for pasting.
PASTE_MNT="$(printf '%q' "$MNT")"
cat <<TRY

kg-fuse is mounted at $MNT (ready in $(( $(date +%s) - started )) s).
$path_hint
A first look:

  cd $PASTE_MNT
  mkdir "read a zip archive"                # a saved semantic search: the name is the query
  ls -U "read a zip archive" | head -3      # its matching concepts, best first
  cat "read a zip archive/.meta/threshold"  # the threshold it inherits from the server

Then README.md, "Using it": paste its blocks in order.

Stop everything (cd out of the mount first):

  cd && kg-fuse unmount $PASTE_MNT && kg-fuse server stop
TRY
