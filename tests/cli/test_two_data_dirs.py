"""Two embedded servers on two data directories keep apart: each has its own
credentials file and pid file, `server start` prints the stop command of its own
(`--data-dir`, absolute), `kg-fuse mount --data-dir` mounts the server it names, and
restarting one server changes nothing for the other (it used to replace every client of
whichever started last: they shared one credentials file)."""

from __future__ import annotations

import json
import os
import re
import shlex
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

MODULES = ["--modules", ",".join(SMALL_TEST_MODULES)]


@pytest.fixture
def user(home: tuple[dict[str, str], Path], small_store: Path
         ) -> Iterator[tuple[dict[str, str], Path]]:
    """A home with a built store in the default data directory and in ``home/other``;
    whatever a test leaves mounted or running is ended."""
    env, where = home
    env = {**env, **OFFLINE_ENV}
    copy_store(small_store, Path(env["XDG_DATA_HOME"]) / "kg-fuse/server/kg.sqlite3")
    copy_store(small_store, where / "other/server/kg.sqlite3")
    yield env, where
    for mountpoint in where.iterdir():
        if os.path.ismount(mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False)
    run(["server", "stop"], env, where)
    run(["server", "stop", "--data-dir", "other"], env, where)


def started(result: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    """The address a `server start` printed, and its stop command."""
    assert result.returncode == 0, result
    found = re.search(r"running at (\S+) \(pid \d+\); stop it with: (.+)$", result.stdout,
                      re.MULTILINE)
    assert found, result.stdout
    return found.group(1), found.group(2)


def listed(mountpoint: Path, query: str) -> list[str]:
    (mountpoint / query).mkdir()
    return [n for n in os.listdir(mountpoint / query) if n.endswith(".concept.md")]


@pytest.mark.timeout(300)
def test_two_data_dirs_two_servers_that_keep_apart(
        user: tuple[dict[str, str], Path]) -> None:
    env, home = user
    other = home / "other"
    credentials = Path(env["XDG_CONFIG_HOME"]) / "kg-fuse/server-credentials.json"
    first_port, second_port = free_port(), free_port()
    first_url, first_stop = started(run(
        ["server", "start", "--port", str(first_port), *MODULES], env, home))
    second_url, second_stop = started(run(
        ["server", "start", "--data-dir", "other", "--port", str(second_port), *MODULES],
        env, home))
    assert first_stop == "kg-fuse server stop"  # the default data dir's: as it always was
    assert second_stop == f"kg-fuse server stop --data-dir {other}"
    # each data dir its own credentials file, naming its own server
    theirs = json.loads(credentials.read_text())
    ours = json.loads((other / "server/server-credentials.json").read_text())
    assert (theirs["api_url"], ours["api_url"]) == (first_url, second_url)
    assert theirs["user"]["client_id"] != ours["user"]["client_id"]
    assert (other / "server/server.pid").exists()

    for name in ("kg", "kg2"):
        (home / name).mkdir()
    assert run(["mount", "kg", "--log-file", "kg.log"], env, home).returncode == 0
    assert run(["mount", "kg2", "--data-dir", "other", "--log-file", "kg2.log"], env,
               home).returncode == 0
    assert f"(api {first_url}," in (home / "kg.log").read_text()
    assert f"(api {second_url}," in (home / "kg2.log").read_text()
    assert listed(home / "kg", "gzip") and listed(home / "kg2", "gzip")

    # restarting the first server leaves the second's clients alone
    assert run(["server", "stop"], env, home).returncode == 0
    started(run(["server", "start", "--port", str(first_port), *MODULES], env, home))
    assert json.loads((other / "server/server-credentials.json").read_text()) == ours
    assert json.loads(credentials.read_text()) == theirs
    assert listed(home / "kg", "compress data") and listed(home / "kg2", "compress data")
    logs = [(home / "kg.log"), (home / "kg2.log"),
            Path(env["XDG_DATA_HOME"]) / "kg-fuse/server/server.log",
            other / "server/server.log"]
    for log in logs:
        assert "do not match" not in log.read_text() and "refused" not in log.read_text()

    # the stop command the second printed stops the second, only
    stopped = run(shlex.split(second_stop)[1:], env, home)
    assert stopped.returncode == 0 and second_url in stopped.stdout, stopped
    assert run(["server", "status"], env, home).returncode == 0
    assert run(["server", "status", "--data-dir", str(other)], env, home).returncode == 1


@pytest.mark.timeout(300)
def test_unmount_stop_server_stops_the_server_that_mount_uses(
        user: tuple[dict[str, str], Path]) -> None:
    """`unmount --stop-server` of a mount made with `--data-dir D` stops D's server and
    leaves the default one (and its mount) alone; it used to stop the default server,
    breaking its mounts, and leave D's running. A mount of a server it cannot tell as a
    data directory's (an --api-url elsewhere) stops nothing, and says so."""
    env, home = user
    first_url, _ = started(run(["server", "start", "--port", str(free_port()), *MODULES],
                               env, home))
    second_url, _ = started(run(["server", "start", "--data-dir", "other", "--port",
                                 str(free_port()), *MODULES], env, home))
    for name in ("kg", "kg2", "kg3"):
        (home / name).mkdir()
    assert run(["mount", "kg"], env, home).returncode == 0
    assert run(["mount", "kg2", "--data-dir", "other"], env, home).returncode == 0

    done = run(["unmount", "--stop-server", "kg2"], env, home)
    assert done.returncode == 0, done.stderr
    assert second_url in done.stdout and first_url not in done.stdout, done.stdout
    assert not os.path.ismount(home / "kg2")
    assert run(["server", "status", "--data-dir", "other"], env, home).returncode == 1
    assert run(["server", "status"], env, home).returncode == 0
    assert listed(home / "kg", "gzip")  # the default server's mount works on

    # a mount of the second server by its address, without --data-dir: the default
    # data directory's server is not the one it uses, so nothing is stopped
    started(run(["server", "start", "--data-dir", "other", "--port",
                 second_url.rsplit(":", 1)[1], *MODULES], env, home))
    credentials = json.loads((home / "other/server/server-credentials.json").read_text())
    (home / "secret").write_text(credentials["user"]["client_secret"])
    assert run(["mount", "kg3", "--api-url", second_url, "--client-id",
                credentials["user"]["client_id"], "--client-secret-file", "secret"],
               env, home).returncode == 0
    refused = run(["unmount", "--stop-server", "kg3"], env, home)
    assert refused.returncode == 1 and "nothing was stopped" in refused.stderr, refused
    assert not os.path.ismount(home / "kg3")
    assert run(["server", "status", "--data-dir", "other"], env, home).returncode == 0
    assert run(["server", "status"], env, home).returncode == 0

    done = run(["unmount", "--stop-server", "kg"], env, home)
    assert done.returncode == 0 and first_url in done.stdout, done
    assert run(["server", "status"], env, home).returncode == 1
    assert run(["server", "status", "--data-dir", "other"], env, home).returncode == 0
