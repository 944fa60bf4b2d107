"""Every command kg-fuse prints for its user to run runs when pasted, as printed: paths
quoted (a data directory and a mountpoint with a space in their names), and every option
that matters named (``--data-dir``, ``--port``, ``--model``, the corpus options). Each
test pastes the printed commands into a shell and checks they did what they said.

Before, ``index --model`` printed a restart without quotes and without ``--port`` (the
server came back on 8765, where no mount looks), ``server start --port P`` beside a
running server exited 0 and ignored P, and a dead mount's ``run: kg-fuse unmount DIR``
broke at the space."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES
from tests.cli.test_cli_errors import run
from tests.helpers.mount import fuse_available, wait_for
from tests.helpers.server import free_port
from tests.helpers.store import OFFLINE_ENV, copy_store

pytestmark = [pytest.mark.mount,
              pytest.mark.skipif(not fuse_available(), reason="needs /dev/fuse")]

MODULES = ["--modules", ",".join(SMALL_TEST_MODULES)]
OTHER = "all-MiniLM-L6-v2-int8"


@pytest.fixture
def spaced(home: tuple[dict[str, str], Path], small_store: Path
           ) -> Iterator[tuple[dict[str, str], Path, Path]]:
    """A home with a built store in ``my data`` (a data directory with a space); what a
    test leaves mounted or running is ended."""
    env, where = home
    env = {**env, **OFFLINE_ENV}
    data = where / "my data"
    copy_store(small_store, data / "server/kg.sqlite3")
    yield env, where, data
    for mountpoint in where.iterdir():
        if os.path.ismount(mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False)
    run(["server", "stop", "--data-dir", str(data)], env, where)


def paste(command: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` as a user pastes it into a shell (``kg-fuse`` is this checkout's)."""
    bin_dir = cwd / "bin"
    if not (bin_dir / "kg-fuse").exists():
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "kg-fuse").write_text(
            f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m kg_fuse.cli \"$@\"\n")
        (bin_dir / "kg-fuse").chmod(0o755)
    env = {**env, "PATH": f"{bin_dir}:{env['PATH']}"}
    return subprocess.run(["bash", "-c", command], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=900)


def printed(text: str, after: str) -> str:
    """The command printed after ``after`` (to the end of its line or hint)."""
    found = re.search(re.escape(after) + r"\s*(.+?)\)?$", text, re.MULTILINE)
    assert found, text
    return found.group(1)


def port_of(env: dict[str, str], cwd: Path, data: Path) -> int:
    status = run(["server", "status", "--data-dir", str(data)], env, cwd)
    assert status.returncode == 0, status
    return int(re.search(r"running at http://127\.0\.0\.1:(\d+)", status.stdout).group(1))


@pytest.mark.timeout(900)
def test_printed_server_commands_run_as_printed_with_a_data_dir_with_a_space(
        spaced: tuple[dict[str, str], Path, Path]) -> None:
    env, home, data = spaced
    first, second = free_port(), free_port()
    start = run(["server", "start", "--data-dir", "my data", "--port", str(first), *MODULES],
                env, home)
    assert start.returncode == 0, start.stderr
    stop = printed(start.stdout, "stop it with:")
    assert shlex.split(stop)[-1] == str(data)

    # another port asked for: refused, naming the restart on it, which works pasted
    moved = run(["server", "start", "--data-dir", "my data", "--port", str(second),
                 *MODULES], env, home)
    assert moved.returncode == 1, moved
    assert f"the server already runs at http://127.0.0.1:{first}" in moved.stderr
    restart = printed(moved.stderr, f"restart it on port {second}:")
    assert paste(restart, env, home).returncode == 0
    assert port_of(env, home, data) == second
    same = run(["server", "start", "--data-dir", "my data"], env, home)  # no port asked
    assert same.returncode == 0 and "already running" in same.stdout, same

    # the restart after a re-embed keeps the port, names the data dir and the model
    index = run(["index", "--data-dir", "my data", "--model", OTHER, *MODULES], env, home)
    assert index.returncode == 0, index.stderr
    restart = printed(index.stdout, "restart it to serve the new one:")
    done = paste(restart, env, home)
    assert done.returncode == 0, done.stderr
    health = httpx.get(f"http://127.0.0.1:{second}/health", timeout=10).json()
    assert health["embedding_model"] == OTHER

    # the stop command printed at the first start still stops it
    stopped = paste(stop, env, home)
    assert stopped.returncode == 0 and "stopped the server" in stopped.stdout, stopped
    assert run(["server", "status", "--data-dir", str(data)], env, home).returncode == 1


@pytest.mark.timeout(300)
def test_printed_mount_commands_run_as_printed_with_a_mountpoint_with_a_space(
        spaced: tuple[dict[str, str], Path, Path]) -> None:
    env, home, data = spaced
    assert run(["server", "start", "--data-dir", "my data", "--port", str(free_port()),
                *MODULES], env, home).returncode == 0
    mountpoint = home / "my kg"
    mountpoint.mkdir()
    mounted = run(["mount", "--data-dir", "my data", "my kg"], env, home)
    assert mounted.returncode == 0, mounted.stderr

    # busy: the hint names who, for the path as it is
    inside = subprocess.Popen(["sleep", "300"], cwd=mountpoint)
    try:
        busy = run(["unmount", "my kg"], env, home)
        assert busy.returncode == 1 and "busy" in busy.stderr, busy
        who = paste(printed(busy.stderr, "see who with:"), env, home)
        assert who.returncode == 0 and str(inside.pid) in who.stdout + who.stderr, who
    finally:
        inside.kill()
        inside.wait()

    # dead: the command status prints cleans it up
    pid = int(re.search(r"\(pid (\d+),", mounted.stdout).group(1))
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: run(["status", "my kg"], env, home).stdout.find("dead") >= 0,
             timeout=10, what="the mount to be dead")
    status = run(["status", "my kg"], env, home)
    cleaned = paste(printed(status.stdout, "run:"), env, home)
    assert cleaned.returncode == 0, cleaned
    assert not os.path.ismount(mountpoint)


def test_printed_hints_name_the_data_dir_with_a_space(
        spaced: tuple[dict[str, str], Path, Path]) -> None:
    """Hints whose command would build the whole corpus or start a server on the
    default port are read back as a shell would, not run: they name the data dir whole."""
    env, home, _ = spaced
    nowhere = home / "no data"
    (home / "kg").mkdir()
    mount = run(["mount", "--data-dir", str(nowhere), "kg"], env, home)
    calibrate = run(["calibrate", "--data-dir", str(nowhere)], env, home)
    for result, command in ((mount, "server start"), (calibrate, "index")):
        assert result.returncode == 1, result
        hint = result.stderr.split("(hint: ", 1)[1].rstrip().removesuffix(")")
        argv = shlex.split(hint.split(": ")[-1].split(", or")[0])
        assert argv[:1 + len(command.split())] == ["kg-fuse", *command.split()], argv
        assert argv[argv.index("--data-dir") + 1] == str(nowhere), argv


@pytest.mark.timeout(900)
def test_the_store_s_model_is_what_status_calibrate_and_model_list_name(
        spaced: tuple[dict[str, str], Path, Path]) -> None:
    """A store of another model than the default: ``calibrate`` labels its table with
    that model (it said all-MiniLM-L6-v2 whatever the store's), ``model list --data-dir``
    marks it (there was no --data-dir), and ``server status`` shows it with the default
    threshold (it showed neither)."""
    env, home, data = spaced
    index = run(["index", "--data-dir", "my data", "--model", OTHER, *MODULES], env, home)
    assert index.returncode == 0, index.stderr
    shown = run(["calibrate", "--show", "--data-dir", "my data"], env, home)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("Calibration over ") and f"({OTHER}, " in \
        shown.stdout.splitlines()[0], shown.stdout
    models = run(["model", "list", "--data-dir", "my data"], env, home)
    assert models.returncode == 0, models.stderr
    marked = [line[2:].split()[0] for line in models.stdout.splitlines() if line[:1] == "*"]
    assert marked == [OTHER], models.stdout
    default = run(["model", "list"], env, home)  # the default data dir: no store, default
    assert [line[2:].split()[0] for line in default.stdout.splitlines()
            if line[:1] == "*"] == ["all-MiniLM-L6-v2"]

    assert run(["server", "start", "--data-dir", "my data", "--port", str(free_port()),
                *MODULES], env, home).returncode == 0
    status = run(["server", "status", "--data-dir", "my data"], env, home)
    assert status.returncode == 0, status
    found = re.search(rf"model {re.escape(OTHER)}, \d+ concepts, default threshold "
                      r"(0\.\d\d)", status.stdout)
    assert found, status.stdout
    stored = float(re.search(r"default: (0\.\d+)", shown.stdout).group(1))
    assert float(found.group(1)) == pytest.approx(stored, abs=0.006)


def hint_of(result: subprocess.CompletedProcess[str]) -> str:
    """The hint of a one-line error: what follows '(hint: ' to the closing parenthesis."""
    return result.stderr.split("(hint: ", 1)[1].rstrip().removesuffix(")")


@pytest.mark.timeout(600)
def test_the_other_printed_commands_run_as_printed_with_spaces(
        spaced: tuple[dict[str, str], Path, Path]) -> None:
    """The rest of what kg-fuse prints to run: ``server status``'s start command, a
    second server's stop hint, a mountpoint that is a file (mount beside it), one that is
    mounted already (status; unmount), each pasted with a data dir and a mountpoint whose
    names hold spaces; the re-embed hint of a store of another model, and the one of
    ``credentials`` with no store, read back as a shell would (they build or start)."""
    env, home, data = spaced
    status = run(["server", "status", "--data-dir", "my data"], env, home)
    assert status.returncode == 1, status
    start = printed(status.stdout, "start one with:")
    started = paste(f"{start} --port {free_port()} {shlex.join(MODULES)}", env, home)
    assert started.returncode == 0, started.stderr
    port = port_of(env, home, data)

    second = run(["serve", "--data-dir", "my data", "--port", str(free_port())], env, home)
    assert second.returncode == 1 and "already runs on this store" in second.stderr, second
    other = run(["serve", "--data-dir", "my data", "--model", OTHER, "--port",
                 str(free_port())], env, home)
    assert other.returncode == 1, other  # the running server is refused first
    stopped = paste(hint_of(second), env, home)
    assert stopped.returncode == 0 and f":{port} " in stopped.stdout, stopped
    assert run(["server", "status", "--data-dir", "my data"], env, home).returncode == 1

    # a store of the default model served with another: the hint re-embeds it, by name
    refused = run(["serve", "--data-dir", "my data", "--model", OTHER, "--port",
                   str(free_port())], env, home)
    assert refused.returncode == 1, refused
    argv = shlex.split(hint_of(refused).split(": ", 1)[1].split(" (")[0])
    assert argv[:2] == ["kg-fuse", "index"], argv
    assert argv[argv.index("--model") + 1] == OTHER, argv
    assert argv[argv.index("--data-dir") + 1] == str(data), argv
    nowhere = run(["server", "credentials", "--data-dir", "no data"], env, home)
    assert nowhere.returncode == 1, nowhere
    argv = shlex.split(hint_of(nowhere))
    assert argv[:3] == ["kg-fuse", "server", "start"], argv
    assert argv[argv.index("--data-dir") + 1] == str(home / "no data"), argv

    # mountpoints: a file, then one mounted already
    assert paste(f"{start} --port {free_port()} {shlex.join(MODULES)}", env,
                 home).returncode == 0
    (home / "my file").write_text("x")
    onto_file = run(["mount", "--data-dir", "my data", "my file"], env, home)
    assert onto_file.returncode == 2, onto_file
    beside = hint_of(onto_file).removeprefix("mount on a directory instead, e.g. ")
    done = paste(beside, env, home)  # it mounts what was asked: the same --data-dir
    assert done.returncode == 0, done.stderr
    assert os.path.ismount(home / "my file-mount")
    again = run(["mount", "--data-dir", "my data", str(home / "my file-mount")], env, home)
    assert again.returncode == 2 and "already a mountpoint" in again.stderr, again
    checked = paste(hint_of(again), env, home)
    assert checked.returncode == 0, checked.stderr
    assert "mounted" in checked.stdout and not os.path.ismount(home / "my file-mount")
