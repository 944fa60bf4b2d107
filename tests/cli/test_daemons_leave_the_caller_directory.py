"""The background server and mount leave their caller's working directory: started from
inside a mount (a shell did ``cd ~/kg``) with relative paths, each runs in ``/`` with
every path it was given made absolute, so it holds no mount busy and the README's stop
(``kg-fuse unmount ~/kg && kg-fuse server stop``) works."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES
from tests.cli.test_cli_errors import run
from tests.helpers.mount import fuse_available
from tests.helpers.server import free_port
from tests.helpers.store import OFFLINE_ENV, copy_store

pytestmark = [pytest.mark.mount,
              pytest.mark.skipif(not fuse_available(), reason="needs /dev/fuse")]


def pid_of(result: subprocess.CompletedProcess[str]) -> int:
    assert result.returncode == 0, result
    found = re.search(r"\(pid (\d+)", result.stdout)
    assert found, result.stdout
    return int(found.group(1))


@pytest.fixture
def user(home: tuple[dict[str, str], Path], small_store: Path
         ) -> Iterator[tuple[dict[str, str], Path]]:
    """A home with a built store; whatever a test leaves mounted or running is ended."""
    env, where = home
    env = {**env, **OFFLINE_ENV}
    copy_store(small_store, Path(env["XDG_DATA_HOME"]) / "kg-fuse/server/kg.sqlite3")
    yield env, where
    for mountpoint in where.iterdir():
        if os.path.ismount(mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False)
    run(["server", "stop"], env, where)


@pytest.mark.timeout(300)
def test_started_inside_a_mount_they_hold_nothing_busy(
        user: tuple[dict[str, str], Path]) -> None:
    env, home = user
    serve = ["--port", str(free_port()), "--modules", ",".join(SMALL_TEST_MODULES)]
    (home / "kg").mkdir()
    (home / "kg2").mkdir()
    assert run(["server", "start", *serve], env, home).returncode == 0
    first = pid_of(run(["mount", "kg"], env, home))
    inside = home / "kg"  # cd ~/kg
    assert run(["server", "stop"], env, inside).returncode == 0
    server = pid_of(run(["server", "start", *serve, "--log-file", "../server.log"], env,
                        inside))
    second = pid_of(run(["mount", "../kg2", "--log-file", "../kg2.log"], env, inside))
    assert "serving" in (home / "server.log").read_text()
    assert "mounted" in (home / "kg2.log").read_text()
    assert os.listdir(home / "kg2")  # it serves
    for pid in (server, first, second):
        assert os.readlink(f"/proc/{pid}/cwd") == "/"
    # the README's stop, then the second mount's
    for command in (["unmount", str(home / "kg")], ["server", "stop"],
                    ["unmount", str(home / "kg2")]):
        done = run(command, env, home)
        assert done.returncode == 0, (command, done)
    assert not os.path.ismount(home / "kg") and not os.path.ismount(home / "kg2")
