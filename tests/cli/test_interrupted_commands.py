"""A command stopped midway leaves nothing behind, and tells the truth about what it did.

Real signals to real ``kg-fuse`` processes. Before: Ctrl-C during ``server start`` exited
130 while the server it launched kept starting; Ctrl-C or ``kill`` during ``index --model``
left its ``kg.sqlite3.partial`` copy, and a ``kill -9`` one was removed only by a later
``index --model``; a killed ``model add`` left its hidden copy of the model's folder."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES
from tests.cli.test_cli_errors import run
from tests.helpers.mount import wait_for
from tests.helpers.server import free_port
from tests.helpers.store import OFFLINE_ENV

MODULES = ["--modules", ",".join(SMALL_TEST_MODULES)]
OTHER = "all-MiniLM-L6-v2-int8"


def _as_in_a_terminal() -> None:
    """Ctrl-C's default disposition, as a command typed in a terminal has it: a suite run
    as a background job inherits SIGINT ignored, and Python then keeps it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def launch(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "kg_fuse.cli", *args], env=env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_as_in_a_terminal)


def signal_when(process: subprocess.Popen[str], ready: Callable[[], bool],
                signum: int, what: str) -> tuple[str, str]:
    """Send ``signum`` once ``ready()``; the process's output once it exited."""
    wait_for(lambda: ready() or process.poll() is not None, timeout=120, what=what)
    assert process.poll() is None, process.communicate()
    process.send_signal(signum)
    out, err = process.communicate(timeout=120)
    return out, err


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ")[-1][:1] not in "ZX"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "kill"])
def test_server_start_interrupted_stops_the_server_it_was_starting(
        home_with_store: tuple[dict[str, str], Path, Path], signum: int) -> None:
    env, home, folder = home_with_store
    port = free_port()
    start = launch(["server", "start", "--data-dir", str(folder), "--port", str(port),
                    *MODULES], env, home)
    log = folder / "server/server.log"
    out, err = signal_when(start, lambda: log.exists() and log.stat().st_size > 0,
                           signum, "the server to be launched")
    assert start.returncode == 130, (out, err)
    pid = int(re.search(r"starting the server \(pid (\d+)", out).group(1))
    assert f"stopped the server it was starting (pid {pid})" in err, err
    assert not alive(pid), f"the server {pid} still runs after the interrupted start"
    time.sleep(1)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
    assert run(["server", "status", "--data-dir", str(folder)], env, home).returncode == 1


def partial_of(folder: Path) -> Path:
    return folder / "server/kg.sqlite3.partial"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "kill"])
def test_an_interrupted_reembed_removes_its_copy(
        home_with_store: tuple[dict[str, str], Path, Path], signum: int) -> None:
    env, home, folder = home_with_store
    index = launch(["index", "--data-dir", str(folder), "--model", OTHER], env, home)
    out, err = signal_when(index, partial_of(folder).exists, signum, "the re-embed to begin")
    assert index.returncode == 130, (out, err)
    left = sorted(p.name for p in (folder / "server").iterdir() if "partial" in p.name
                  and not p.name.endswith(".lock"))
    assert left == [], left
    assert "half-made copy was removed" in err, err


@pytest.mark.timeout(600)
def test_a_killed_reembed_s_copy_is_removed_by_the_next_command_and_logged(
        home_with_store: tuple[dict[str, str], Path, Path]) -> None:
    env, home, folder = home_with_store
    index = launch(["index", "--data-dir", str(folder), "--model", OTHER], env, home)
    signal_when(index, partial_of(folder).exists, signal.SIGKILL, "the re-embed to begin")
    assert partial_of(folder).exists()
    listed = run(["model", "list", "--data-dir", str(folder)], env, home)
    assert listed.returncode == 0, listed.stderr
    assert f"removed {partial_of(folder)}, left by an interrupted re-embed" in listed.stderr
    assert not partial_of(folder).exists()
    # the store itself is untouched: still the default model's
    marked = [line[2:].split()[0] for line in listed.stdout.splitlines() if line[:1] == "*"]
    assert marked == ["all-MiniLM-L6-v2"], listed.stdout


def _hidden_copies(env: dict[str, str]) -> list[Path]:
    models = Path(env["XDG_DATA_HOME"]) / "kg-fuse/models"
    graphs = Path(env["XDG_CACHE_HOME"]) / "kg-fuse/models"
    return [p for root in (models, graphs) if root.is_dir() for p in root.iterdir()
            if p.name.startswith(".") and not p.name.endswith(".lock")
            and not p.name.startswith(".digests")]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_an_interrupted_model_add_leaves_nothing_once_the_next_command_ran(
        home: tuple[dict[str, str], Path], tmp_path: Path, signum: int) -> None:
    """``model add`` of a copy of the built-in model, stopped while it makes the graph:
    Ctrl-C leaves nothing; after ``kill -9``, ``model list`` removes what was left and
    says so."""
    from kg_fuse.server.embedding.models import builtin_folder

    env, where = home
    env = {**env, **OFFLINE_ENV, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    add = launch(["model", "add", str(builtin_folder()), "--name", "copy"], env, where)
    graphs = tmp_path / "cache/kg-fuse/models"
    out, err = signal_when(
        add, lambda: graphs.is_dir() and any(p.name.endswith(".partial")
                                             for p in graphs.iterdir()),
        signum, "the graph to be written")
    if signum == signal.SIGINT:
        assert add.returncode == 130, (out, err)
        assert _hidden_copies(env) == []
        return
    assert _hidden_copies(env), "nothing was left to clean up: the kill came too late"
    listed = run(["model", "list"], env, where)
    assert listed.returncode == 0, listed.stderr
    assert "left by an interrupted model install" in listed.stderr, listed.stderr
    assert _hidden_copies(env) == []
    assert "copy " not in listed.stdout  # never half a model
