"""A real kg-fuse mount in a subprocess, for tests.

The filesystem runs as ``kg-fuse mount --foreground`` with its log in a file (forked
from the mount zygote, ``tests.helpers.zygote``, which has imported its libraries); the
test process touches the mountpoint from outside, as a user would. Unmounting checks the
exit status, and the log and standard error are checked for tracebacks and unexpected
errors.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from tests.helpers.zygote import ForkedProcess, Zygote

MOUNT_TIMEOUT = 30.0
EXIT_TIMEOUT = 10.0

# Log lines a healthy run may produce at WARNING or above only in tests that expect them.
BAD_LOG_LINE = re.compile(r"Traceback|\b(ERROR|CRITICAL|WARNING)\b")
# libfuse reports it when the kernel no longer waits for a reply (the caller of an
# asynchronous RELEASE is gone); nothing is lost, the file is closed either way.
ALWAYS_ALLOWED = [r"fuse_release\(\): fuse_reply_\* failed with No such file or directory"]


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def fuse_available() -> bool:
    return os.path.exists("/dev/fuse") and shutil.which("fusermount3") is not None


class Mount:
    def __init__(self, mountpoint: Path, env: dict[str, str], log_path: Path,
                 extra_args: Iterable[str] = ()) -> None:
        self.mountpoint = mountpoint
        self.env = env
        self.log_path = log_path
        self.extra_args = list(extra_args)
        self.stderr_path = log_path.with_name(log_path.name + ".stderr")
        self.process: subprocess.Popen[bytes] | ForkedProcess | None = None
        self.returncode: int | None = None

    def start(self) -> Mount:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "kg_fuse.cli", "mount", str(self.mountpoint),
                "--foreground", "--log-file", str(self.log_path), *self.extra_args]
        zygote = Zygote.shared("mount")
        self.process = None
        if zygote is not None:
            try:
                self.process = zygote.spawn(argv, self.env, os.devnull, str(self.stderr_path))
            except (OSError, RuntimeError) as exc:
                print(f"mount zygote: {exc}; starting a fresh interpreter", file=sys.stderr)
        if self.process is None:
            with open(self.stderr_path, "ab") as stderr:
                self.process = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL,
                                                stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not os.path.ismount(self.mountpoint):
            if self.process.poll() is not None:
                raise RuntimeError(f"kg-fuse exited with {self.process.returncode}: "
                                   f"{self.stderr_text()}\n{self.log_text()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"kg-fuse did not mount in time\n{self.log_text()}")
            time.sleep(0.05)
        return self

    def path(self, *parts: str) -> Path:
        return self.mountpoint.joinpath(*parts)

    def log_text(self) -> str:
        return _read(self.log_path)

    def stderr_text(self) -> str:
        """What the daemon wrote to its standard error (nothing, when all is well)."""
        return _read(self.stderr_path)

    def unmount(self) -> int:
        """``fusermount3 -u`` and wait for the daemon; returns its exit status."""
        assert self.process is not None
        if os.path.ismount(self.mountpoint):
            subprocess.run(["fusermount3", "-u", str(self.mountpoint)], check=True)
        return self.wait()

    def signal(self, signum: signal.Signals) -> int:
        assert self.process is not None
        self.process.send_signal(signum)
        return self.wait()

    def wait(self) -> int:
        assert self.process is not None
        try:
            self.returncode = self.process.wait(timeout=EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        return self.returncode

    def kill(self) -> None:
        subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], check=False,
                       stderr=subprocess.DEVNULL)
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def unexpected_log_lines(self, allowed: Iterable[str] = ()) -> list[str]:
        patterns = [re.compile(a) for a in [*ALWAYS_ALLOWED, *allowed]]
        return [
            line for line in "\n".join((self.log_text(), self.stderr_text())).splitlines()
            if BAD_LOG_LINE.search(line) and not any(p.search(line) for p in patterns)
        ]


def wait_for(predicate: Callable[[], object], timeout: float = 60.0,
             what: str = "condition") -> object:
    """Poll ``predicate`` until it returns something true (returned), or fail naming
    ``what`` after ``timeout`` seconds: what a user sees settle, such as an ingest."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def finish(mount: Mount, allowed: Iterable[str] = ()) -> list[str]:
    """Unmount (if still mounted) and say what went wrong: a failed unmount, an exit
    status other than 0, log lines a healthy run does not write."""
    failures = []
    if mount.returncode is None:
        try:
            status = mount.unmount()
        except Exception as exc:  # noqa: BLE001 - report, then clean up the rest
            mount.kill()
            return [f"{mount.mountpoint}: unmount failed: {exc!r}"]
        if status != 0:
            failures.append(f"{mount.mountpoint}: exit status {status}")
    bad = mount.unexpected_log_lines(allowed)
    if bad:
        failures.append(f"{mount.log_path} has unexpected lines:\n" + "\n".join(bad))
    return failures
