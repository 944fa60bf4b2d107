"""Lifecycle under stress: the daemon exits 0 within 5 s of fusermount3 -u, SIGTERM or
SIGINT even while its server stalls and requests are in flight; `kg-fuse mount` without
--foreground returns only once the mount is usable (also with the server down) or fails
with the reason; `kg-fuse unmount` and `status` agree with what users see."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kg_fuse.retry import SERVER_RETRY
from tests.helpers.faults import FaultProxy, proxy_env
from tests.helpers.mount import Mount
from tests.robustness.conftest import (
    RELEVANT,
    kg_fuse_cli,
    result_names,
    saved_queries,
    timed,
    wait_until,
)
from tests.robustness.test_kill import wait_gone

pytestmark = pytest.mark.mount

EXIT_BOUND = 5.0


def request_exit(mount: Mount, how: str) -> None:
    if how == "fusermount3 -u":
        subprocess.run(["fusermount3", "-u", str(mount.mountpoint)], check=True)
    else:
        assert mount.process is not None
        mount.process.send_signal(getattr(signal, how))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["fusermount3 -u", "SIGTERM", "SIGINT"])
def test_exits_zero_within_5s_while_the_server_stalls(
        proxy: FaultProxy, proxied: Callable[..., Mount], how: str) -> None:
    # long deadlines, so the poller's stalled call is still pending at the exit
    mount = proxied(timeout=30, probe_timeout=30, poll_interval=0.2)
    mount.path(RELEVANT).mkdir()
    assert result_names(mount.path(RELEVANT))
    proxy.set_mode("stall")
    time.sleep(0.5)  # the poller is now stuck in a stalled request
    started = time.monotonic()
    request_exit(mount, how)
    status = mount.wait()
    elapsed = time.monotonic() - started
    proxy.set_mode("pass")
    assert status == 0, mount.log_text()
    assert elapsed < EXIT_BOUND, f"exit took {elapsed:.1f}s"
    assert not os.path.ismount(mount.mountpoint)


# Regression test (a bug this suite found; fixed in c2157b9):
# exit waited for in-flight handlers' HTTP deadlines.
@pytest.mark.timeout(60)
def test_exits_zero_within_5s_with_a_request_waiting_on_the_server(
        proxy: FaultProxy, proxied: Callable[..., Mount]) -> None:
    mount = proxied(timeout=10, probe_timeout=10)
    mount.path("csv files").mkdir()
    proxy.set_mode("stall")
    pending: list[Any] = []
    reader = threading.Thread(
        target=lambda: pending.append(timed(lambda: os.listdir(mount.path("csv files")))),
        daemon=True)
    reader.start()
    time.sleep(0.5)
    assert not pending, "the listing should still be waiting for the server"
    started = time.monotonic()
    request_exit(mount, "SIGTERM")
    assert mount.process is not None
    try:
        status: int | None = mount.process.wait(timeout=EXIT_BOUND)
    except subprocess.TimeoutExpired:
        status = None
    elapsed = time.monotonic() - started
    proxy.set_mode("pass")  # let it finish either way, so teardown is clean
    mount.wait()
    reader.join(timeout=10)
    assert status == 0 and elapsed < EXIT_BOUND, f"exit status {status} after {elapsed:.1f}s"
    assert pending and not pending[0].ok, pending  # the caller got an error, not a hang


@pytest.fixture
def background(kg_server: Any, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Run `kg-fuse mount` without --foreground; cleans up whatever it left mounted."""
    started: list[tuple[Path, int | None]] = []

    def run(mountpoint: Path, *args: str, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, **kg_server.env, "XDG_DATA_HOME": str(tmp_path / "data"),
                    **(env or {})}
        result = kg_fuse_cli("mount", str(mountpoint), *args, env=full_env)
        found = re.search(r"\(pid (\d+)", result.stdout)
        started.append((mountpoint, int(found.group(1)) if found else None))
        return result

    yield run
    for mountpoint, pid in started:
        if os.path.ismount(mountpoint) or not os.path.exists(mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False,
                           stderr=subprocess.DEVNULL)
        if pid is not None and not wait_gone(pid, 5):
            os.kill(pid, signal.SIGKILL)


def daemon_log_lines(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines()
            if re.search(r"Traceback|\b(ERROR|CRITICAL|WARNING)\b", line)]


@pytest.mark.timeout(60)
def test_background_mount_is_usable_on_return_and_unmount_ends_it(
        background: Callable[..., Any], kg_server: Any, tmp_path: Path) -> None:
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    log = tmp_path / "bg.log"
    result = background(mountpoint, "--log-file", str(log))
    assert result.returncode == 0, result.stderr
    pid = int(re.search(r"\(pid (\d+)", result.stdout).group(1))  # type: ignore[union-attr]
    # usable the moment the command returned: no sleep, no retry
    assert os.path.ismount(mountpoint)
    (mountpoint / RELEVANT).mkdir()
    assert result_names(mountpoint / RELEVANT)
    env = {**os.environ, **kg_server.env, "XDG_DATA_HOME": str(tmp_path / "data")}
    status = kg_fuse_cli("status", str(mountpoint), env=env)
    assert status.returncode == 0 and "mounted" in status.stdout, status

    started = time.monotonic()
    done = kg_fuse_cli("unmount", str(mountpoint), env=env)
    assert done.returncode == 0, done
    assert wait_gone(pid, EXIT_BOUND), "the daemon did not exit after unmount"
    assert time.monotonic() - started < EXIT_BOUND
    assert not os.path.ismount(mountpoint)
    status = kg_fuse_cli("status", str(mountpoint), env=env)
    assert status.returncode == 1 and "not mounted" in status.stdout, status
    assert daemon_log_lines(log) == []


@pytest.mark.timeout(60)
def test_background_mount_needs_no_server(background: Callable[..., Any], kg_server: Any,
                                          proxy: FaultProxy, tmp_path: Path) -> None:
    """A server that resets every connection does not keep the mount from coming up;
    local operations work at once and the query lists when the server is back (within
    the retry policy's cap: the failed listing is asked for again when its backoff
    ends)."""
    proxy.set_mode("reset")
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    outcome = timed(lambda: background(
        mountpoint, "--log-file", str(tmp_path / "bg.log"), "--api-url", proxy.url,
        "--timeout", "1", "--probe-timeout", "1", env=proxy_env(kg_server)))
    assert outcome.ok and outcome.value.returncode == 0, outcome.value
    assert outcome.seconds < 10, outcome
    (mountpoint / RELEVANT).mkdir()
    assert saved_queries(mountpoint) == [RELEVANT]
    with pytest.raises(ConnectionRefusedError):
        os.listdir(mountpoint / RELEVANT)
    proxy.set_mode("pass")
    wait_until(lambda: result_names(mountpoint / RELEVANT),
               timeout=SERVER_RETRY.maximum + 2, message="the query listed")


@pytest.mark.timeout(60)
def test_background_mount_failure_says_why(background: Callable[..., Any],
                                           tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    result = background(not_a_dir)
    assert result.returncode != 0
    assert "not a directory" in result.stderr
    missing = background(tmp_path / "missing")
    assert missing.returncode != 0 and str(tmp_path / "missing") in missing.stderr
