"""Mounted: a mount's saved queries and its log (every search text and file name) are its
user's alone, also in an install made before they were kept so."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kg_fuse import paths
from tests.server.test_private_files import FIXED, kg_fuse, mode

pytestmark = pytest.mark.mount


@pytest.mark.timeout(120)
def test_a_background_mount_keeps_its_state_and_log_private(
        kg_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**os.environ, **kg_server.env, "XDG_DATA_HOME": str(tmp_path / "data")}
    monkeypatch.setenv("XDG_DATA_HOME", env["XDG_DATA_HOME"])  # where paths.* look
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    state = paths.mount_state_dir(mountpoint)  # the saved queries, the default log
    folders = [tmp_path / "data" / "kg-fuse", tmp_path / "data" / "kg-fuse" / "mounts",
               state]
    log = state / "kg-fuse.log"

    def mount() -> None:
        result = kg_fuse(env, "mount", str(mountpoint))
        assert result.returncode == 0, result.stderr
        (mountpoint / "gzip").mkdir()  # a search: its text goes to the log
        os.rmdir(mountpoint / "gzip")

    def unmount() -> None:
        assert kg_fuse(env, "unmount", str(mountpoint)).returncode == 0

    try:
        mount()  # a first mount: private from the outset
        assert [mode(d) for d in folders] == [0o700] * 3
        assert mode(log) == 0o600 and "'gzip'" in log.read_text()
        assert mode(state / "servers") == 0o700  # each server's saved queries
        assert [mode(f) for f in state.glob("servers/*/queries.toml")] == [0o600]
        assert mode(state / "servers.json") == 0o600  # which server the address is
        assert FIXED not in log.read_text()
        unmount()

        for folder in folders:  # as an older version left them
            folder.chmod(0o755)
        log.chmod(0o644)
        mount()
        assert [mode(d) for d in folders] == [0o700] * 3
        assert mode(log) == 0o600
        fixed = [line for line in log.read_text().splitlines() if FIXED in line]
        assert len(fixed) == 1, fixed
        assert f"{log} (was 0644)" in fixed[0]
        assert all(f"{folder} (was 0755)" in fixed[0] for folder in folders)
        unmount()
        mount()
        assert sum(FIXED in line for line in log.read_text().splitlines()) == 1
        unmount()
    finally:
        if os.path.ismount(mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False)
