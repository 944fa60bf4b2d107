"""Fixtures for the robustness tests: the mounted-test fixtures, a fault-injecting proxy
in front of the session server, and small helpers to time and classify operations."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fs.conftest import kg_admin, mount_factory, mounted  # noqa: F401
from tests.helpers.faults import FaultProxy, proxy_env
from tests.helpers.mount import Mount, fuse_available

# The warnings a mount logs, by design, when its server misbehaves.
FAULT_LOG = [
    r"WARNING kg_fuse\.fs\.kernel\.errnos: server request failed",
    r"WARNING kg_fuse\.fs\.kernel\.errnos: operation timed out",
    r"WARNING kg_fuse\.fs\.queries\.results: serving stale results",
    r"WARNING kg_fuse\.fs\.queries\.details: concept details timed out",
    r"WARNING kg_fuse\.fs\.queries\.watcher: server unavailable",
]

RELEVANT = "compress data with gzip"
ONTOLOGY_DIR = "ontology"  # the root's fixed directory of the server's ontologies


@pytest.fixture(autouse=True)
def _needs_fuse() -> None:
    if not fuse_available():
        pytest.skip("needs /dev/fuse and fusermount3")


@pytest.fixture
def proxy(kg_server: Any) -> Iterator[FaultProxy]:
    """A pass-through proxy in front of the session server; modes set by the test."""
    with FaultProxy(kg_server.api_url) as p:
        yield p


@pytest.fixture
def proxied(proxy: FaultProxy, mount_factory: Any, kg_server: Any  # noqa: F811
            ) -> Callable[..., Mount]:
    """Start a mount that reaches the session server through ``proxy``.

    Short deadlines by default (``--timeout 1 --probe-timeout 1``) and no background
    polling (``--poll-interval 3600``) so the proxy's request log is the test's alone.
    """

    def start(timeout: float = 1.0, probe_timeout: float = 1.0, poll_interval: float = 3600,
              max_age: float = 60.0, extra_args: list[str] | None = None,
              allowed_log: list[str] | None = None, **kwargs: Any) -> Mount:
        args = ["--api-url", proxy.url, "--timeout", str(timeout),
                "--probe-timeout", str(probe_timeout), "--poll-interval", str(poll_interval),
                "--max-age", str(max_age), *(extra_args or [])]
        return mount_factory(extra_args=args, env=proxy_env(kg_server),
                             allowed_log=[*FAULT_LOG, *(allowed_log or [])], **kwargs)

    return start


class Outcome:
    """What one operation did: its duration, its value or its errno."""

    def __init__(self, seconds: float, value: Any = None, error: OSError | None = None):
        self.seconds = seconds
        self.value = value
        self.error = error

    @property
    def errno(self) -> int | None:
        return None if self.error is None else self.error.errno

    @property
    def ok(self) -> bool:
        return self.error is None

    def __repr__(self) -> str:
        what = (f"errno {errno.errorcode.get(self.errno or 0, self.errno)}" if self.error
                else "ok")
        return f"<{what} in {self.seconds:.2f}s>"


def timed(fn: Callable[[], Any]) -> Outcome:
    started = time.monotonic()
    try:
        value = fn()
    except OSError as exc:
        return Outcome(time.monotonic() - started, error=exc)
    return Outcome(time.monotonic() - started, value=value)


def saved_queries(mountpoint: Path) -> list[str]:
    """The root's entries other than the fixed ``ontology/`` directory, sorted."""
    return sorted(n for n in os.listdir(mountpoint) if n != ONTOLOGY_DIR)


def store_queries(doc: dict[str, Any]) -> dict[str, Any]:
    """``{query path joined by '/': threshold}`` of a parsed queries.toml."""
    return {"/".join(q["path"]): q["threshold"] for q in doc.get("queries", [])}


def result_names(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".concept.md"))


def status_lines(mount: Mount, query: str) -> dict[str, str]:
    text = mount.path(query, ".meta", "status").read_text()
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(": ")
        out[key] = value
    return out


def wait_until(predicate: Callable[[], Any], timeout: float, interval: float = 0.1,
               message: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except OSError as exc:
            last_exc = exc
        else:
            if value:
                return value
        time.sleep(interval)
    raise AssertionError(f"{message} not reached in {timeout}s (last error: {last_exc!r})")


def kg_fuse_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60
                ) -> subprocess.CompletedProcess[str]:
    """Run ``kg-fuse ARGS`` as a user would, capturing its output."""
    return subprocess.run([sys.executable, "-m", "kg_fuse.cli", *args], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
