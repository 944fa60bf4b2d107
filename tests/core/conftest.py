"""The kernel-free tier: the filesystem's parts, driven under trio without a mount.

Each test gets the real server app (``create_app``) over its own copy of the session's
built store, with the real embedding model (loaded once per process), reached through
``httpx.ASGITransport``; and the filesystem's parts wired exactly as a mount wires them
(``kg_fuse.fs.mount.assemble``). Only pyfuse3's reply and notification calls are
replaced (``tests.helpers.driver``). Nothing here needs ``/dev/fuse``.

Run this tier alone with ``pytest -m core`` (or ``pytest tests/core``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kg_fuse.client.api import KgApiClient
from kg_fuse.fs.mount import assemble
from kg_fuse.fs.queries.servers import ServerStores
from kg_fuse.server.api.app import create_app
from kg_fuse.server.api.auth import ensure_credentials, token_ttl, write_credentials
from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES
from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.knowledge.graph import KnowledgeGraph
from kg_fuse.server.startup.prepare import prepare
from kg_fuse.server.storage.store import Store
from tests.helpers.core import API_URL, Core, ServerApp, mount_options
from tests.helpers.driver import FsDriver, install_fake_kernel
from tests.helpers.store import copy_store

CORE_DIR = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fresh_server: the test changes the server, so it "
                                       "gets its own copy of the store")
    config.addinivalue_line("markers", "mount_options(**fields): MountOptions for the "
                                       "core fixture (e.g. allow_ontology_delete=True)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if CORE_DIR in item.path.parents:
            item.add_marker(pytest.mark.core)


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real model, loaded once per test process."""
    model = Embedder()
    model.load()
    return model


def _start_app(small_store: Path, embedder: Embedder, root: Path) -> Iterator[ServerApp]:
    store = Store(copy_store(small_store, root / "server" / "kg.sqlite3"))
    graph = KnowledgeGraph(store, embedder)
    try:
        # what ``kg-fuse serve`` does at start: check the store (nothing to build), load
        prepare(graph, corpus="stdlib", modules=list(SMALL_TEST_MODULES),
                        progress=False)
        credentials = ensure_credentials(store, root / "server-credentials.json", API_URL)
        yield ServerApp(create_app(graph, token_ttl(None)), graph, credentials)
    finally:
        store.close()


@pytest.fixture
def other_server_app(server_app: ServerApp, embedder: Embedder, tmp_path: Path
                     ) -> Iterator[ServerApp]:
    """Another server: ``server_app``'s data directory copied to another place (so
    another server, with an identity of its own) and started with the same clients."""
    source = tmp_path / "copied-from-a.sqlite3"
    server_app.graph.store.copy_to(source)
    root = tmp_path / "other-server"
    write_credentials(root / "server-credentials.json", API_URL, server_app.credentials)
    yield from _start_app(source, embedder, root)


@pytest.fixture(scope="session")
def shared_app(small_store: Path, embedder: Embedder,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerApp]:
    """One server app for the tests that leave the server as they found it."""
    yield from _start_app(small_store, embedder, tmp_path_factory.mktemp("core-server"))


@pytest.fixture
def server_app(request: pytest.FixtureRequest, small_store: Path, embedder: Embedder,
               tmp_path: Path) -> Iterator[ServerApp]:
    """The shared app; a fresh one over its own copy of the store for a test marked
    ``fresh_server`` (it may change the server: ontologies, documents, the default)."""
    if request.node.get_closest_marker("fresh_server") is None:
        yield request.getfixturevalue("shared_app")
        return
    yield from _start_app(small_store, embedder, tmp_path)


@pytest.fixture
async def core(request: pytest.FixtureRequest, server_app: ServerApp, tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Core]:
    """The filesystem's parts as a mount assembles them, on ``server_app``; a
    ``mount_options(**fields)`` marker sets ``MountOptions`` fields (the mount's flags)."""
    marker = request.node.get_closest_marker("mount_options")
    options = mount_options(**(marker.kwargs if marker else {}))
    client = KgApiClient(API_URL, server_app.credentials_of("user"),
                         timeout=options.request_timeout, transport=server_app.transport())
    app = server_app.app
    try:
        async with app.router.lifespan_context(app):  # as uvicorn runs it: the job worker
            # whose queries: the address's, as a mount's that has not heard its server
            # yet (the first poll learns it; a fixture that asked the server here would
            # be torn down by Hypothesis's first example: ``test_core_monotonic``)
            stores = ServerStores(tmp_path / "mount-state", API_URL)
            ops = assemble(options, client, stores, stores.open_for(False, None))
            kernel = install_fake_kernel(monkeypatch, ops)
            yield Core(ops, FsDriver(ops), kernel, client, server_app,
                       tmp_path / "mount-state")
    finally:
        await client.aclose()
