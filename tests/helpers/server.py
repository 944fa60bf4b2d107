"""A real embedded server in a subprocess, for tests.

``KGServer(root, modules=...)`` runs ``python -m kg_fuse.cli serve`` on a
free loopback port with ``XDG_DATA_HOME``/``XDG_CONFIG_HOME`` under ``root``, its stderr
in ``root/server.log``, and waits until ``GET /health`` answers. Credentials come from
the 0600 file the server writes, exactly as a user's client would find them.

    server = KGServer(tmp / "srv", modules=SMALL_TEST_MODULES).start()
    server.api_url, server.admin, server.user      # {"client_id", "client_secret"}
    server.env                                     # XDG_* for clients of this server
    server.client("user").post("/query/search", json={"query": "gzip"})
    server.restart(); server.stop()
    server.reset_peak_memory(); ...; server.peak_memory(), server.cpu_seconds()
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from tests.helpers.zygote import ForkedProcess, Zygote

START_TIMEOUT = 300.0
STOP_TIMEOUT = 20.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class KGServer:
    """One embedded-server process and the directories it owns."""

    def __init__(self, root: Path, modules: Iterable[str] | None = None,
                 extra_args: Iterable[str] = (), env: dict[str, str] | None = None,
                 corpus: str = "stdlib", seed: Path | None = None) -> None:
        """``seed``: a built store (``tests.helpers.store.built_store``) to start from, so
        the server only checks it instead of building the corpus again."""
        self.root = Path(root)
        self.data_home = self.root / "data"
        self.config_home = self.root / "config"
        self.log_path = self.root / "server.log"
        self.modules = list(modules) if modules is not None else None
        self.extra_args = list(extra_args)
        self.corpus = corpus
        self.extra_env = dict(env or {})
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | ForkedProcess | None = None
        self._tokens: dict[str, str] = {}
        if seed is not None and not self.db_path.exists():
            self._backup(seed, self.db_path)

    # -- where things are ---------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """The environment a client of this server needs (XDG dirs, offline model)."""
        return {"XDG_DATA_HOME": str(self.data_home), "XDG_CONFIG_HOME": str(self.config_home),
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def credentials_path(self) -> Path:
        return self.config_home / "kg-fuse" / "server-credentials.json"

    @property
    def db_path(self) -> Path:
        return self.data_home / "kg-fuse" / "server" / "kg.sqlite3"

    @property
    def credentials(self) -> dict[str, Any]:
        return json.loads(self.credentials_path.read_text())

    @property
    def admin(self) -> dict[str, str]:
        return self.credentials["admin"]

    @property
    def user(self) -> dict[str, str]:
        return self.credentials["user"]

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    # -- lifecycle ----------------------------------------------------------------------

    def argv(self, *extra: str) -> list[str]:
        args = [sys.executable, "-m", "kg_fuse.cli", "serve",
                "--port", str(self.port), "--corpus", self.corpus]
        if self.modules is not None:
            args += ["--modules", ",".join(self.modules)]
        return args + self.extra_args + list(extra)

    def start(self, timeout: float = START_TIMEOUT) -> KGServer:
        self.root.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env, **self.extra_env}
        zygote = Zygote.shared()  # the same server, without importing its libraries again
        self.process = None
        if zygote is not None:
            try:
                self.process = zygote.spawn(self.argv(), env, str(self.log_path))
            except (OSError, RuntimeError) as exc:
                print(f"server zygote: {exc}; starting a fresh interpreter", file=sys.stderr)
        if self.process is None:
            with open(self.log_path, "ab") as log:
                self.process = subprocess.Popen(self.argv(), env=env,
                                                stdin=subprocess.DEVNULL, stdout=log,
                                                stderr=log)
        self._tokens.clear()
        self.wait_healthy(timeout)
        if not self.pristine_path.exists():
            self._backup(self.db_path, self.pristine_path)
        return self

    def wait_healthy(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n"
                                   f"{self.log_text()[-4000:]}")
            try:
                if httpx.get(f"{self.api_url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"server not healthy in time:\n{self.log_text()[-4000:]}")
            time.sleep(0.2)

    def stop(self) -> int | None:
        """SIGTERM (uvicorn shuts down gracefully) and wait; returns the exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        status = self.process.returncode
        self.process = None
        return status

    def restart(self, extra_args: Iterable[str] | None = None,
                env: dict[str, str] | None = None) -> KGServer:
        """Stop and start again on the same port and data; optionally new args/env."""
        self.stop()
        if extra_args is not None:
            self.extra_args = list(extra_args)
        if env is not None:
            self.extra_env = dict(env)
        return self.start()

    @property
    def pristine_path(self) -> Path:
        """The store as it was when this server first became healthy."""
        return self.root / "pristine.sqlite3"

    @staticmethod
    def _backup(source: Path, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        src = sqlite3.connect(source)
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)  # consistent even while the server is writing (WAL)
        finally:
            src.close()
            dst.close()

    def clone(self, root: Path, **kwargs: Any) -> KGServer:
        """A new, not yet started server over a copy of this one's store and clients.

        The copy is of the store as first started, so what earlier tests changed on the
        shared server (a PUT default, ingested documents) never leaks into a clone.
        """
        other = KGServer(root, modules=self.modules, corpus=self.corpus, **kwargs)
        source = self.pristine_path if self.pristine_path.exists() else self.db_path
        self._backup(source, other.db_path)
        other.credentials_path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.credentials_path, other.credentials_path)
        return other

    # -- what it costs -------------------------------------------------------------------

    def _proc(self, name: str) -> Path:
        assert self.process is not None, "the server is not running"
        return Path(f"/proc/{self.process.pid}/{name}")

    def cpu_seconds(self) -> float:
        """User and system CPU time the server process has used so far (all threads)."""
        fields = self._proc("stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _status_bytes(self, key: str) -> int:
        for line in self._proc("status").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1]) * 1024
        raise KeyError(key)

    def reset_peak_memory(self) -> int:
        """Start measuring the peak resident memory afresh; returns the resident memory
        now (bytes)."""
        self._proc("clear_refs").write_text("5")  # the kernel resets VmHWM to VmRSS
        return self._status_bytes("VmRSS")

    def peak_memory(self) -> int:
        """The most resident memory (bytes) since the last :meth:`reset_peak_memory`."""
        return self._status_bytes("VmHWM")

    # -- talking to it ------------------------------------------------------------------

    def fetch_token(self, who: str = "user") -> str:
        creds = self.credentials[who]
        response = httpx.post(f"{self.api_url}/auth/oauth/token", timeout=30,
                              data={"grant_type": "client_credentials", **creds})
        response.raise_for_status()
        return str(response.json()["access_token"])

    def token(self, who: str = "user") -> str:
        """A cached token for ``who`` ("user" or "admin")."""
        if who not in self._tokens:
            self._tokens[who] = self.fetch_token(who)
        return self._tokens[who]

    def headers(self, who: str = "user") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(who)}"}

    def client(self, who: str | None = "user") -> httpx.Client:
        """An httpx client on the API; ``who=None`` sends no token."""
        headers = self.headers(who) if who else {}
        return httpx.Client(base_url=self.api_url, headers=headers, timeout=60)
