"""Servers and mounts forked from processes that have already imported their libraries.

Importing numpy, ONNX Runtime, FastAPI and uvicorn costs every server start about a
second of CPU, and the suite starts some thirty servers; importing pyfuse3, trio and
httpx costs every mount about half a second, and the suite mounts some two hundred times.
A zygote process, one per kind and test process, imports that kind's libraries once
(none of kg-fuse's own modules: kg-fuse is imported, and reads its environment, in each
child). A start asks it to fork a child that runs exactly what ``python -m MODULE ...``
runs (``kg_fuse.cli.main`` with the same arguments, environment, working directory and
output files); the real server or mount, only without the import.

The child is made the test process's own child (it is forked by a short-lived
intermediate while the test process is a child subreaper), so the test waits for it,
signals it and reads its exit status exactly as for a ``subprocess.Popen``.

``KG_TEST_ZYGOTE=0`` starts every server and mount in a fresh interpreter instead.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

# kind -> (the module its children run as ``python -m``, the libraries it imports first)
KINDS = {
    "server": ("kg_fuse.cli",
               ("numpy", "onnxruntime", "tokenizers", "fastapi", "uvicorn", "anyio",
                "httpx", "pydantic")),
    "mount": ("kg_fuse.cli", ("pyfuse3", "trio", "httpx", "cachetools",
                              "platformdirs", "tomli_w")),
}
PR_SET_CHILD_SUBREAPER = 36


class ForkedProcess:
    """The ``subprocess.Popen`` surface the test helpers use, for an adopted child."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The test process's side: start a kind's zygote once, then ask it for children."""

    _instances: dict[str, Zygote] = {}
    _instances_lock = threading.Lock()
    _adopt_lock = threading.Lock()  # the subreaper flag belongs to the whole process

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.module = KINDS[kind][0]
        self._lock = threading.Lock()
        libc = ctypes.CDLL(None, use_errno=True)
        self._prctl = libc.prctl
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.zygote", kind], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
            env=dict(os.environ))
        self._ready = False  # it imports while the test process goes on

    def _wait_ready(self) -> None:
        if not self._ready:
            line = self._process.stdout.readline() if self._process.stdout else b""
            if line.strip() != b"ready":
                raise RuntimeError(f"the {self.kind} zygote did not start")
            self._ready = True

    @classmethod
    def shared(cls, kind: str = "server") -> Zygote | None:
        """This process's zygote of ``kind``; None when disabled or it cannot run here."""
        if os.environ.get("KG_TEST_ZYGOTE", "1") == "0" or not sys.platform.startswith("linux"):
            return None
        with cls._instances_lock:
            zygote = cls._instances.get(kind)
            if zygote is None or zygote._process.poll() is not None:
                try:
                    zygote = cls._instances[kind] = cls(kind)
                except OSError:
                    return None
            return zygote

    def spawn(self, argv: list[str], env: dict[str, str], stdout: str,
              stderr: str | None = None) -> ForkedProcess:
        """A child running ``argv`` (``python -m MODULE ...``), its output appended to
        the files ``stdout`` and ``stderr`` (the same file when ``stderr`` is None)."""
        if argv[1:3] != ["-m", self.module]:
            raise ValueError(f"the {self.kind} zygote runs {self.module} only")
        request = json.dumps({"args": argv[3:], "env": env, "stdout": stdout,
                              "stderr": stderr or stdout, "cwd": os.getcwd()})
        with self._lock:
            assert self._process.stdin and self._process.stdout
            self._wait_ready()
            # orphans are adopted by the nearest subreaper: while this flag is set, the
            # child the intermediate leaves behind becomes this process's child
            with Zygote._adopt_lock:
                self._prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
                try:
                    self._process.stdin.write(request.encode() + b"\n")
                    self._process.stdin.flush()
                    reply = self._process.stdout.readline()
                finally:
                    self._prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        if not reply.strip().isdigit():
            raise RuntimeError(f"the {self.kind} zygote failed: {reply!r}")
        return ForkedProcess(int(reply))


# -- the zygote process ---------------------------------------------------------------


def _run_child(module: str, request: dict[str, Any]) -> None:
    """In the forked child: become ``python -m MODULE ARGS``."""
    code: Any = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, key in ((1, "stdout"), (2, "stderr")):
            out = os.open(request[key], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.dup2(out, fd)
            os.close(out)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sys.argv = [module, *request["args"]]
        from kg_fuse.cli import main

        code = main(request["args"])
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # noqa: BLE001 - the child must end here, whatever happened
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))


def _serve(kind: str) -> None:
    import importlib

    module, preload = KINDS[kind]
    # as kg_fuse.server.embedding.embedder does before importing onnxruntime (it reads it then)
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    for name in preload:
        importlib.import_module(name)
    out = sys.stdout.buffer
    out.write(b"ready\n")
    out.flush()
    for line in sys.stdin.buffer:
        request = json.loads(line)
        read, write = os.pipe()
        intermediate = os.fork()
        if intermediate == 0:
            os.close(read)
            child = os.fork()
            if child == 0:
                os.close(write)
                _run_child(module, request)
            os.write(write, str(child).encode())
            os._exit(0)
        os.close(write)
        pid = os.read(read, 32)
        os.close(read)
        os.waitpid(intermediate, 0)  # once it is gone, the child has been adopted
        out.write(pid + b"\n")
        out.flush()


if __name__ == "__main__":
    _serve(sys.argv[1])
