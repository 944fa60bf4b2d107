#!/usr/bin/env bash
# Set up everything kg-fuse needs on a Debian 12 machine: system packages, a virtual
# environment in .venv with the filesystem, the embedded server and the test tools.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need_pkgs=()
for pkg in fuse3 libfuse3-dev pkg-config gcc python3-dev python3-venv attr; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_pkgs+=("$pkg")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
    echo "==> installing system packages: ${need_pkgs[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "==> creating .venv with $($PY --version)"
    "$PY" -m venv .venv
fi
if ! .venv/bin/python -c 'import torch, kg_fuse, pyfuse3, sentence_transformers, pytest' 2>/dev/null; then
    echo "==> installing Python packages (first time: a few minutes)"
    .venv/bin/pip install -q --upgrade pip
    # The CPU build of torch first, so nothing later pulls a CUDA build.
    .venv/bin/pip install -q "torch==2.13.0"
    .venv/bin/pip install -q -e ".[server,test]"
fi
echo "==> environment ready (.venv)"
