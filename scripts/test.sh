#!/usr/bin/env bash
# The tests: set everything up, then lint and run the whole suite (FUSE mounts need
# root or a setuid fusermount3, and /dev/fuse; without them the mounted tiers skip).
# Arguments go to pytest: ./scripts/test.sh -m core (the kernel-free tier), tests/unit ...
# The tiers are described in docs/architecture.md.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
echo "==> ruff"
.venv/bin/ruff check .
echo "==> pytest"
exec .venv/bin/pytest "$@"
