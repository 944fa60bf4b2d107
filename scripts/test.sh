#!/usr/bin/env bash
# The tests: set everything up, then lint and run the whole suite (FUSE mounts need
# root or a setuid fusermount3, and /dev/fuse; without them the mounted tiers skip).
# Arguments go to pytest: ./scripts/test.sh -m core (the kernel-free tier), tests/unit ...
# The tiers are described in docs/architecture.md.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --test
# set-up installed all-mpnet-base-v2: its tests (tests/server/test_model_install.py) fail
# rather than skip if it is missing
export KG_TEST_REQUIRE_MPNET=1
# Python writes its bytecode caches (ignored by git) even where the environment says not
# to: otherwise every worker, mount and server of the suite compiles kg-fuse and the test
# plugins anew (collection alone took 10 s instead of 5 per worker).
unset PYTHONDONTWRITEBYTECODE
# The small test corpus's store (tests/helpers/store.py), built in the background while
# the platform client installs: the suite would otherwise wait for it (half a minute on a
# clean clone). Already built, this only checks; pytest waits for a build under way.
.venv/bin/python -m tests.helpers.store >/dev/null 2>&1 &
# The platform's own FUSE client, to check that it works against our server
# (tests/fs/test_upstream_client.py). It has our distribution name, so it gets its own
# environment; without a package index the install fails and that one test is skipped.
if [ -z "${KG_FUSE_UPSTREAM:-}" ]; then
    if [ -x .venv-upstream/bin/kg-fuse ] || { python3 -m venv .venv-upstream \
            && .venv-upstream/bin/pip install -q --disable-pip-version-check "kg-fuse==0.14.0"; }; then
        export KG_FUSE_UPSTREAM="$PWD/.venv-upstream/bin/kg-fuse"
    else
        echo "warning: the platform client kg-fuse==0.14.0 could not be installed: its test is skipped" >&2
    fi
fi
echo "==> ruff"
.venv/bin/ruff check .
echo "==> import contracts"
.venv/bin/lint-imports
echo "==> pytest"
# two workers (pytest-xdist): a module stays in one worker with its module-scoped servers
exec .venv/bin/pytest -n "${KG_TEST_WORKERS:-2}" --dist loadfile "$@"
