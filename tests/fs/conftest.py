"""Fixtures for mounted tests: a real kg-fuse mount against the session's real server."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.mount import Mount, finish, fuse_available

SEARCH_LINE = re.compile(
    r"search min_similarity=(?P<min_similarity>\S+) threshold_used=(?P<threshold_used>\S+) "
    r"count=(?P<count>\d+) query=(?P<query>.*)$"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if fuse_available():
        return
    skip = pytest.mark.skip(reason="needs /dev/fuse and fusermount3")
    for item in items:
        if "mount" in item.keywords:
            item.add_marker(skip)


class ServerAdmin:
    """Talks to the test server as its admin, the way an operator would."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.http = httpx.Client(base_url=server.api_url, timeout=30)
        form = {"grant_type": "client_credentials", **server.admin}
        token = self.http.post("/auth/oauth/token", data=form).json()["access_token"]
        self.http.headers["Authorization"] = f"Bearer {token}"

    def get_default(self) -> float:
        body = self.http.get("/admin/config/search-threshold").json()
        return body["threshold"] if body["threshold"] is not None else body["fallback"]

    def put_default(self, value: float) -> None:
        response = self.http.put("/admin/config/search-threshold", json={"threshold": value})
        response.raise_for_status()

    @contextlib.contextmanager
    def default_set_to(self, value: float) -> Iterator[None]:
        previous = self.get_default()
        self.put_default(value)
        try:
            yield
        finally:
            self.put_default(previous)

    def search(self, query: str, limit: int = 50, **fields: Any) -> dict[str, Any]:
        response = self.http.post("/query/search", json={"query": query, "limit": limit,
                                                          **fields})
        response.raise_for_status()
        return response.json()

    def requests(self, method_path: str) -> int:
        """How many requests the server's access log shows, e.g. ``GET /database/epoch``."""
        needle = f'"{method_path} HTTP/'
        return Path(self.server.log_path).read_text(errors="replace").count(needle)

    def search_log(self, query: str) -> list[dict[str, str]]:
        """The server's request-log lines for searches of exactly this text."""
        found = []
        for line in Path(self.server.log_path).read_text(errors="replace").splitlines():
            match = SEARCH_LINE.search(line)
            if match and match.group("query") == repr(query):
                found.append(match.groupdict())
        return found


@pytest.fixture(scope="session")
def kg_admin(kg_server: Any) -> ServerAdmin:
    return ServerAdmin(kg_server)


@pytest.fixture
def mount_factory(kg_server: Any, tmp_path: Path):
    """Start mounts against the test server; each is unmounted at the end of the test,
    must exit 0, and must not have logged a traceback or an unexpected warning."""
    mounts: list[tuple[Mount, list[str]]] = []

    def start(mountpoint: Path | None = None, state_of: Mount | None = None,
              extra_args: list[str] | None = None, env: dict[str, str] | None = None,
              allowed_log: list[str] | None = None, server: Any = None) -> Mount:
        index = len(mounts)
        full_env = {**os.environ, **(server or kg_server).env}
        full_env["XDG_DATA_HOME"] = (state_of.env["XDG_DATA_HOME"] if state_of
                                     else str(tmp_path / f"mount-data-{index}"))
        full_env.update(env or {})
        mount = Mount(mountpoint or tmp_path / f"mnt-{index}", full_env,
                      tmp_path / f"kg-fuse-{index}.log", extra_args or [])
        mounts.append((mount, allowed_log or []))
        return mount.start()

    yield start
    failures = [failure for mount, allowed in mounts for failure in finish(mount, allowed)]
    if failures:
        pytest.fail("\n".join(failures))


@pytest.fixture
def mounted(mount_factory) -> Mount:
    return mount_factory()
