"""What the server keeps is its user's alone: the store holds the full text of every
ingested document and the log every search, so other local users may not read them."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.helpers.server import free_port

FIXED = "made private (owner only"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def kg_fuse(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kg_fuse.cli", *args], env=env,
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.timeout(600)
def test_server_start_keeps_the_store_and_log_private_and_fixes_an_old_install(
        tmp_path: Path) -> None:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    port = str(free_port())
    data, config = tmp_path / "data" / "kg-fuse", tmp_path / "config" / "kg-fuse"
    server = data / "server"
    db, log = server / "kg.sqlite3", server / "server.log"
    store_files = [db, server / "kg.sqlite3-wal", server / "kg.sqlite3-shm"]

    def start() -> None:
        started = kg_fuse(env, "server", "start", "--corpus", "none", "--port", port)
        assert started.returncode == 0, started.stderr + log.read_text()
        api = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{api}/health", timeout=10).status_code == 200

    def stop() -> None:
        assert kg_fuse(env, "server", "stop").returncode == 0

    try:
        start()  # a first start: everything is made private from the outset
        assert [mode(d) for d in (data, server, config)] == [0o700] * 3
        assert [mode(f) for f in (*store_files, log)] == [0o600] * 4
        assert FIXED not in log.read_text()
        stop()

        # an install made before: every local user could read the store and the log
        for folder in (data, server, config):
            folder.chmod(0o755)
        for path in (db, log):
            path.chmod(0o644)
        for leftover in store_files[1:]:  # what a killed server leaves beside its store
            leftover.touch(mode=0o644)
            leftover.chmod(0o644)
        start()
        assert [mode(d) for d in (data, server, config)] == [0o700] * 3
        assert [mode(f) for f in (*store_files, log)] == [0o600] * 4
        fixed = [line for line in log.read_text().splitlines() if FIXED in line]
        assert len(fixed) == 1, fixed  # said once, in one line
        assert f"{log} (was 0644)" in fixed[0] and f"{server} (was 0755)" in fixed[0]
        assert f"{db} (was 0644)" in fixed[0]
        stop()
        start()  # nothing left to fix: said once, not at every start
        assert sum(FIXED in line for line in log.read_text().splitlines()) == 1
    finally:
        stop()
