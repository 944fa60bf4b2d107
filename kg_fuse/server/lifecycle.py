"""The embedded server in the background: a pid file, start, stop and status.

``kg-fuse serve`` writes ``server.pid`` next to its store once it listens, and removes it
when it exits, whoever started it (``kg-fuse server start``, systemd, a shell). The file
records the process's start time as the kernel counts it, so ``stop`` signals exactly that
server and never a later process that reused its pid. Light imports only: the
filesystem-only install builds its parser from here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

from kg_fuse import owner_only, paths
from kg_fuse.exits import CommandError, Interrupted

log = logging.getLogger(__name__)

STOP_TIMEOUT = 30.0


@dataclass(frozen=True)
class ServerRecord:
    """What the pid file says about a running server."""

    pid: int
    started: int  # the process start time in clock ticks (/proc/PID/stat field 22)
    api_url: str
    log_file: str = ""
    argv: tuple[str, ...] = ()  # serve's options as it was started (not --log-file)

    def start_argv(self, data_dir: Path | None, **replaced: str) -> list[str]:
        """``server start``'s options that start this server again (its log included
        when it is not the usual one), with ``replaced`` options (``port="8800"``)."""
        argv = list(self.argv)
        if "--data-dir" not in argv:  # a pid file from before the options were kept
            argv = [*paths.data_dir_argv(data_dir), *argv]
        for name, value in replaced.items():
            flag = "--" + name.replace("_", "-")
            if flag in argv:
                argv[argv.index(flag) + 1] = value
            else:
                argv += [flag, value]
        if self.log_file and Path(self.log_file) != paths.server_log_path(data_dir):
            argv += ["--log-file", self.log_file]
        return argv

    def restart_command(self, data_dir: Path | None, **replaced: str) -> str:
        """The commands that stop this server and start it again, with ``replaced``."""
        return (f"{paths.command_line('server', 'stop', *paths.data_dir_argv(data_dir))} && "
                f"{paths.command_line('server', 'start', *self.start_argv(data_dir, **replaced))}")


def _start_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):  # gone, or a zombie not yet reaped
        return None
    return int(fields[19])


def read_record(pid_file: Path) -> ServerRecord | None:
    """The live server the pid file names, or None (no file, stale, or unreadable)."""
    try:
        fields = json.loads(pid_file.read_text(encoding="utf-8"))
        fields["argv"] = tuple(str(arg) for arg in fields.get("argv", ()))
        record = ServerRecord(**fields)
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    if _start_ticks(record.pid) != record.started:
        return None
    return record


@contextlib.contextmanager
def pid_file_held(pid_file: Path, api_url: str, log_file: str = "",
                  argv: tuple[str, ...] = ()) -> Iterator[None]:
    """Write the pid file for this process while the block runs; remove it after. It
    holds the options the server was started with, so a command can print the one that
    restarts it as it was."""
    pid = os.getpid()
    started = _start_ticks(pid)
    if started is None:
        raise CommandError("cannot read this process's start time from /proc")
    record = ServerRecord(pid, started, api_url, log_file, tuple(argv))
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    temporary = pid_file.with_name(pid_file.name + f".{pid}")
    with open(owner_only.open_private(temporary, append=False), "w", encoding="utf-8") as f:
        f.write(json.dumps(asdict(record)) + "\n")
    os.replace(temporary, pid_file)
    try:
        yield
    finally:
        if read_record(pid_file) == record:
            pid_file.unlink(missing_ok=True)


def refuse_second(data_dir: Path | None) -> None:
    """A second server on the same store would fight over it: say which one runs."""
    running = read_record(paths.server_pid_path(data_dir))
    if running is not None:
        raise CommandError(
            f"a server already runs on this store: pid {running.pid} at {running.api_url}",
            hint=f"kg-fuse server stop{paths.data_dir_args(data_dir)}")


def _health(api_url: str) -> dict | None:
    """The server's /health answer, or None while it does not answer."""
    import httpx

    try:
        response = httpx.get(f"{api_url}/health", timeout=2)
        return response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def _default_threshold(api_url: str, data_dir: Path | None) -> float | None:
    """The server's default search threshold, asked as its user client (the credentials
    file next to its store), or None when it cannot be asked."""
    import httpx

    try:
        held = json.loads(paths.server_credentials_path(data_dir).read_text(encoding="utf-8"))
        user = held["user"]
        with httpx.Client(base_url=api_url, timeout=5) as http:
            token = http.post("/auth/oauth/token", data={
                "grant_type": "client_credentials", "client_id": user["client_id"],
                "client_secret": user["client_secret"]}).json()["access_token"]
            epoch = http.get("/database/epoch",
                             headers={"Authorization": f"Bearer {token}"}).json()
        return float(epoch["default_threshold"])
    except (OSError, ValueError, KeyError, TypeError, httpx.HTTPError):
        return None


def _healthy(api_url: str) -> bool:
    return _health(api_url) is not None


def _tail(log_file: Path, start: int, lines: int = 3) -> str:
    try:
        with open(log_file, encoding="utf-8", errors="replace") as f:
            f.seek(start)
            tail = f.read().strip().splitlines()[-lines:]
    except OSError:
        return ""
    return " | ".join(line.strip().removeprefix("kg-fuse: ") for line in tail)


def start(serve_argv: list[str], data_dir: Path | None, wait: float,
          log_file: Path | None = None, port: int | None = None) -> int:
    """Run ``kg-fuse serve`` detached, logging to ``log_file`` (default: next to the
    store); return once it answers /health. ``port``: the one asked for by name, which
    a server already running elsewhere cannot honour (refused, naming the restart)."""
    pid_file = paths.server_pid_path(data_dir)
    running = read_record(pid_file)
    if running is not None:
        running_port = urlsplit(running.api_url).port
        if port and running_port != port:
            restart = running.restart_command(data_dir, port=str(port))
            raise CommandError(f"the server already runs at {running.api_url} (pid "
                               f"{running.pid}), not on port {port}",
                               hint=f"restart it on port {port}: {restart}")
        print(f"kg-fuse: the server is already running at {running.api_url} "
              f"(pid {running.pid})")
        return 0
    for folder in paths.server_private_dirs(data_dir):
        owner_only.create_dir(folder)  # an existing one the server fixes, and says so
    log_file = log_file or paths.server_log_path(data_dir)
    log_file.parent.mkdir(parents=True, exist_ok=True)  # a --log-file elsewhere
    offset = log_file.stat().st_size if log_file.exists() else 0
    argv = [sys.executable, "-m", "kg_fuse.cli", "serve", *serve_argv,
            "--log-file", str(log_file)]
    # also what it says before it logs; private from the first line on
    with open(owner_only.open_private(log_file), "ab") as log_stream:
        # in /, so it holds no directory busy (its paths are absolute)
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_stream,
                                 stderr=log_stream, start_new_session=True, cwd="/")
    print(f"kg-fuse: starting the server (pid {child.pid}, log {log_file})", flush=True)
    try:
        return _wait_until_serving(child, pid_file, data_dir, wait, log_file, offset)
    except KeyboardInterrupt:
        # Ctrl-C or kill: the user no longer wants what this command was starting
        _end_child(child)
        raise Interrupted(f"interrupted: stopped the server it was starting (pid "
                          f"{child.pid})") from None


def _end_child(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server ``start`` launched, SIGKILL after :data:`STOP_TIMEOUT`."""
    child.terminate()
    try:
        child.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _wait_until_serving(child: subprocess.Popen[bytes], pid_file: Path,
                        data_dir: Path | None, wait: float, log_file: Path,
                        offset: int) -> int:
    """Until the server ``start`` launched answers (0), exits, or ``wait`` runs out."""
    from kg_fuse.retry import SERVER_RETRY  # light: the parser does not need it

    deadline, delays = time.monotonic() + wait, SERVER_RETRY.delays()
    while time.monotonic() < deadline:
        record = read_record(pid_file)
        if record is not None and record.pid == child.pid and _healthy(record.api_url):
            print(f"kg-fuse: the server is running at {record.api_url} (pid {child.pid}); "
                  f"stop it with: kg-fuse server stop{paths.data_dir_args(data_dir)}")
            for warning in (_health(record.api_url) or {}).get("warnings") or ():
                print(f"kg-fuse: warning: {warning}", file=sys.stderr)
            return 0
        if child.poll() is not None:
            raise CommandError(f"the server exited with status {child.returncode}: "
                               f"{_tail(log_file, offset)}", hint=f"see {log_file}")
        time.sleep(max(0.0, min(next(delays), deadline - time.monotonic())))
    _end_child(child)
    raise CommandError(f"the server did not answer within {wait:.0f} s",
                       hint=f"see {log_file}; a first start builds the corpus: raise --wait")


def _wait_for_exit(pid: int, timeout: float) -> None:
    """Until the process exits or ``timeout`` seconds pass: a wait on its pidfd, which
    becomes readable when it exits."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([pidfd], [], [], max(0.0, timeout))
    finally:
        os.close(pidfd)


def stop(data_dir: Path | None, timeout: float = STOP_TIMEOUT) -> int:
    """SIGTERM the server named by the pid file, wait for it; SIGKILL after ``timeout``."""
    pid_file = paths.server_pid_path(data_dir)
    record = read_record(pid_file)
    if record is None:
        pid_file.unlink(missing_ok=True)  # stale: its process is gone
        print("kg-fuse: no server is running")
        return 0
    os.kill(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while read_record(pid_file) == record or _start_ticks(record.pid) == record.started:
        if time.monotonic() > deadline:
            log.warning("server pid %d ignored SIGTERM for %.0f s; killing it", record.pid,
                        timeout)
            os.kill(record.pid, signal.SIGKILL)
            pid_file.unlink(missing_ok=True)
            break
        _wait_for_exit(record.pid, deadline - time.monotonic())
    print(f"kg-fuse: stopped the server at {record.api_url} (pid {record.pid})")
    return 0


def status(data_dir: Path | None) -> int:
    record = read_record(paths.server_pid_path(data_dir))
    if record is None:
        print("kg-fuse: no server is running (start one with: kg-fuse server start"
              f"{paths.data_dir_args(data_dir)})")
        return 1
    health = _health(record.api_url)
    print(f"kg-fuse: the server is running at {record.api_url} (pid {record.pid}, "
          f"{'answering' if health is not None else 'not answering yet'}; "
          f"log {record.log_file or 'stderr'})")
    if health is not None:
        default = _default_threshold(record.api_url, data_dir)
        shown = f"{default:.2f}" if default is not None else "unknown (no credentials)"
        print(f"kg-fuse: model {health.get('embedding_model')}, "
              f"{health.get('concepts')} concepts, default threshold {shown}")
        if health.get("model_grade"):
            print(f"kg-fuse: model {health['model_grade']}")
    for warning in (health or {}).get("warnings") or ():
        print(f"kg-fuse: warning: {warning}")
    return 0
