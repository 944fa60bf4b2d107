"""The kernel-free tier's parts: the server app in-process and the filesystem as a mount
assembles it (the fixtures that make them are in ``tests/core/conftest.py``)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from kg_fuse.client.api import KgApiClient
from kg_fuse.client.credentials import Connection, Credentials
from kg_fuse.fs.handlers.operations import KgOperations
from kg_fuse.fs.mount import MountOptions
from kg_fuse.fs.queries.catalog import Catalog
from kg_fuse.fs.queries.facade import QueryService
from kg_fuse.fs.queries.ingest import IngestBox
from kg_fuse.fs.queries.servers import ServerStores
from kg_fuse.fs.tree.mount_tree import Tree
from kg_fuse.server.knowledge.graph import KnowledgeGraph
from tests.helpers.driver import FsDriver, KernelLog

API_URL = "http://kg.test"  # never resolved: the transport is the app itself
MOUNTPOINT = "/mnt/kg"  # what the operations believe their mountpoint is (link targets)


@dataclass
class ServerApp:
    """The real server, in-process: its app, its graph and its clients' credentials."""

    app: Any
    graph: KnowledgeGraph
    credentials: dict[str, dict[str, str]]

    def transport(self) -> httpx.ASGITransport:
        return httpx.ASGITransport(app=self.app)

    def credentials_of(self, who: str = "user") -> Credentials:
        entry = self.credentials[who]
        return Credentials(entry["client_id"], entry["client_secret"], "tests")

    @contextlib.asynccontextmanager
    async def http(self, who: str | None = "admin") -> AsyncIterator[httpx.AsyncClient]:
        """An httpx client on the app, with ``who``'s token (None: no token)."""
        async with httpx.AsyncClient(transport=self.transport(), base_url=API_URL,
                                     timeout=60) as http:
            if who is not None:
                form = {"grant_type": "client_credentials", **self.credentials[who]}
                response = await http.post("/auth/oauth/token", data=form)
                response.raise_for_status()
                http.headers["Authorization"] = f"Bearer {response.json()['access_token']}"
            yield http



class SearchAnswersRewritten(httpx.AsyncBaseTransport):
    """Fault injection over the real app: each successful search's body rewritten by
    ``rewrite`` (another server's behaviour); every other request passes untouched."""

    def __init__(self, inner: httpx.AsyncBaseTransport,
                 rewrite: Callable[[dict], dict]) -> None:
        self.inner = inner
        self.rewrite = rewrite

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.url.path != "/query/search" or response.status_code != 200:
            return response
        return httpx.Response(200, json=self.rewrite(json.loads(await response.aread())))


@dataclass
class Core:
    """One kernel-free filesystem: its parts, a shell-like driver, what the kernel was
    told, and the server app it talks to."""

    ops: KgOperations
    fs: FsDriver
    kernel: KernelLog
    client: KgApiClient
    server: ServerApp
    state_dir: Path

    @property
    def service(self) -> QueryService:
        return self.ops.service

    @property
    def store_path(self) -> Path:
        """The file the mount saves the queries of the server it shows to."""
        assert self.service.owner is not None, "no server answered this mount"
        return ServerStores(self.state_dir, API_URL).store(self.service.owner).path

    @property
    def tree(self) -> Tree:
        """The domain parts the behaviours work with (``service``, ``catalog``, ``ingest``...)."""
        return self.ops.tree

    @property
    def catalog(self) -> Catalog:
        return self.ops.catalog

    @property
    def ingest(self) -> IngestBox:
        return self.ops.ingest


def mount_options(**overrides: Any) -> MountOptions:
    fields: dict[str, Any] = {
        "mountpoint": Path(MOUNTPOINT),
        "connection": Connection(API_URL, Credentials("unused", "unused", "tests")),
        "poll_interval": 3600.0,  # nothing polls in the background here
        "request_timeout": 60.0,  # a loaded machine embeds slowly; deadlines have own tests
        "probe_timeout": 60.0,
        **overrides,
    }
    return MountOptions(**fields)


#: The fields of a search answer only our server sends (the platform sends none).
OUR_SEARCH_FIELDS = ("threshold_presets", "unknown_words", "expanded_words", "repeated_words",
                     "near_misses", "near_miss_threshold", "ontology_filter")
#: The fields of a search result only our server sends.
OUR_RESULT_FIELDS = ("why",)


class AsThePlatform(httpx.AsyncBaseTransport):
    """Fault injection over the real app: it answers as the platform does where the
    platform departs from the contract (docs/platform.md), the rest passing untouched.

    - a scoped search lists nothing (its filter checks a property its ingest never sets),
      with the hints of the unscoped search; no search answer or result carries our
      extra fields;
    - the epoch carries no default; the admin endpoint answers 403 (an ordinary user)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/admin/config/search-threshold" and request.method == "GET":
            return httpx.Response(403, json={
                "detail": "Permission denied: read on search_config"})
        scoped = False
        if path == "/query/search":
            body = json.loads(await request.aread())
            scoped = body.pop("ontology", None) is not None
            request = httpx.Request(request.method, request.url, json=body,
                                    headers={k: v for k, v in request.headers.items()
                                             if k.lower() != "content-length"})
        response = await self.inner.handle_async_request(request)
        if response.status_code != 200 or path not in ("/query/search", "/database/epoch"):
            return response
        answer = json.loads(await response.aread())
        if path == "/database/epoch":
            return httpx.Response(200, json={"epoch": answer["epoch"]})
        for name in OUR_SEARCH_FIELDS:
            answer.pop(name, None)
        for result in [*answer["results"], answer.get("top_match") or {}]:
            for name in OUR_RESULT_FIELDS:
                result.pop(name, None)
        if scoped:
            answer |= {"results": [], "count": 0}
        return httpx.Response(200, json=answer)
