"""Saved queries belong to their server, not to the mountpoint (issue 40): another
server at the same address and mountpoint shows its own queries; the first one's come
back with it; a mount started while its server is down neither loses nor mixes them;
the single store of an earlier kg-fuse is given, once, to the first server reached.

Kernel-free: the filesystem's parts as a mount assembles them, over two real server
apps (two copies of the store: two servers) behind one address. ``Switchboard`` is the
only stand-in, for fault injection: which server answers at the address, or none.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pyfuse3
import pytest

from kg_fuse.client.api import KgApiClient
from kg_fuse.fs.handlers.operations import KgOperations
from kg_fuse.fs.mount import assemble, first_look
from kg_fuse.fs.queries.saved import QueryStore, SavedQuery, StoreState
from kg_fuse.fs.queries.servers import MIGRATED, ServerStores
from tests.helpers.core import API_URL, Core, ServerApp, mount_options
from tests.helpers.driver import FsDriver

pytestmark = pytest.mark.fresh_server  # on a server of its own: A


class Switchboard(httpx.AsyncBaseTransport):
    """The server answering at the mount's address: ``app``, or none (refused)."""

    def __init__(self, app: ServerApp | None) -> None:
        self.app = app

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.app is None:
            raise httpx.ConnectError("connection refused", request=request)
        return await self.app.transport().handle_async_request(request)


@pytest.fixture
def other(other_server_app: ServerApp, server_app: ServerApp) -> ServerApp:
    """Server B: a copy of A's data directory, elsewhere: another server."""
    assert other_server_app.graph.store.server_id() != server_app.graph.store.server_id()
    return other_server_app


@asynccontextmanager
async def mounted(core: Core, switchboard: Switchboard, state_dir: Path | None = None
                  ) -> AsyncIterator[KgOperations]:
    """A mount over ``core``'s mountpoint state (or ``state_dir``), at the address
    ``switchboard`` serves; saved on the way out, as unmounting does."""
    client = KgApiClient(API_URL, core.server.credentials_of("user"), timeout=5.0,
                         transport=switchboard)
    stores = ServerStores(state_dir or core.state_dir, API_URL)
    try:
        ops = assemble(mount_options(), client, stores, await first_look(client, stores, 2.0))
        yield ops
        await ops.service.save_if_dirty()
    finally:
        await client.aclose()


async def poll(ops: KgOperations) -> None:
    """What the mount's poller does every ``--poll-interval`` (``fs/mount.py``)."""
    await ops.service.server.poll()
    await ops.service.follow_server()
    await ops.service.save_if_dirty()


async def threshold(fs: FsDriver, query: str) -> str:
    return (await fs.read(f"{query}/.meta/threshold")).decode().splitlines()[-1]


async def test_another_server_at_the_same_mountpoint_shows_its_own_queries(
        core: Core, other: ServerApp) -> None:
    """A's query and override stay A's: B at the same address and mountpoint shows
    none of them, and ``mkdir`` of the same name there succeeds; A's come back with A."""
    await poll(core.ops)  # the mount hears A
    await core.fs.mkdir("json parsing")
    await core.fs.write("json parsing/.meta/threshold", b"0.55\n")
    await core.service.save_if_dirty()  # what unmounting does

    async with mounted(core, Switchboard(other)) as ops:
        fs = FsDriver(ops)
        assert await fs.listdir() == ["ontology"]
        await fs.mkdir("json parsing")  # not "File exists"
        assert await threshold(fs, "json parsing") == "inherit"

    async with mounted(core, Switchboard(core.server)) as ops:
        fs = FsDriver(ops)
        assert sorted(await fs.listdir()) == ["json parsing", "ontology"]
        assert await threshold(fs, "json parsing") == "0.55"


async def test_the_queries_follow_the_server_that_answers_while_mounted(
        core: Core, other: ServerApp, caplog: pytest.LogCaptureFixture) -> None:
    """Another server starts at the mount's address while it is mounted: within a
    poll the mount shows that server's queries, and the first one's when it is back."""
    switchboard = Switchboard(core.server)
    async with mounted(core, switchboard) as ops:
        fs = FsDriver(ops)
        await fs.mkdir("bz2 files@0.7")
        assert [e.name for e in await fs.readdir("bz2 files@0.7")]  # a listing held
        switchboard.app = other
        with caplog.at_level(logging.INFO, logger="kg_fuse.fs.queries.facade"):
            await poll(ops)
        assert await fs.listdir() == ["ontology"]
        assert "instead of server" in caplog.text
        await fs.mkdir("gzip")
        switchboard.app = core.server
        await poll(ops)
        assert sorted(await fs.listdir()) == ["bz2 files@0.7", "ontology"]
        assert await threshold(fs, "bz2 files@0.7") == "0.7"
        switchboard.app = other
        await poll(ops)
        assert sorted(await fs.listdir()) == ["gzip", "ontology"]


async def test_a_mount_started_with_its_server_down_never_mixes_queries(
        core: Core, other: ServerApp) -> None:
    """No server ever answered at this address: queries made meanwhile are kept for the
    address, and the first server that answers gets them. One answered before: queries
    made while it is down are its own, and stay its own when another server answers."""
    state_dir = core.state_dir.with_name("never-seen")
    stores = ServerStores(state_dir, API_URL)
    switchboard = Switchboard(None)
    async with mounted(core, switchboard, state_dir) as ops:
        await FsDriver(ops).mkdir("json parsing")
    async with mounted(core, switchboard, state_dir) as ops:  # still down: still there
        fs = FsDriver(ops)
        assert sorted(await fs.listdir()) == ["json parsing", "ontology"]
        await fs.write("json parsing/.meta/threshold", b"0.55\n")
        switchboard.app = core.server  # A answers: they are A's now
        await poll(ops)
        assert sorted(await fs.listdir()) == ["json parsing", "ontology"]
        assert await threshold(fs, "json parsing") == "0.55"
    a_store = stores.store(stores.identify(core.server.graph.store.server_id()))
    assert list(a_store.load().queries) == ["json parsing"]
    assert not stores.store(stores.identify(None)).path.exists()  # none left for the address

    switchboard.app = None
    async with mounted(core, switchboard, state_dir) as ops:  # down: A, seen last
        fs = FsDriver(ops)
        assert sorted(await fs.listdir()) == ["json parsing", "ontology"]
        await fs.mkdir("gzip")  # A's, though A is down
        switchboard.app = other  # another server answers there now
        await poll(ops)
        assert await fs.listdir() == ["ontology"]
    assert sorted(a_store.load().queries) == ["gzip", "json parsing"]  # kept, as A's


async def test_an_earlier_kg_fuse_s_queries_go_to_the_first_server_reached_once(
        core: Core, other: ServerApp, caplog: pytest.LogCaptureFixture) -> None:
    """The mountpoint's single store, as the earlier kg-fuse wrote it (``QueryStore``
    in the mountpoint's folder), belongs after the first mount to the server it reached,
    said in the log; the file stays as a backup; another server never gets it."""
    state_dir = core.state_dir.with_name("earlier")
    legacy = QueryStore(state_dir)
    legacy.save(StoreState({"gzip": SavedQuery(("gzip",), "gzip", threshold=0.42)}))
    written = legacy.path.read_bytes()
    with caplog.at_level(logging.WARNING, logger="kg_fuse.fs.queries.servers"):
        async with mounted(core, Switchboard(core.server), state_dir) as ops:
            fs = FsDriver(ops)
            assert sorted(await fs.listdir()) == ["gzip", "ontology"]
            assert await threshold(fs, "gzip") == "0.42"
    assert "1 saved queries of this mountpoint" in caplog.text
    assert not legacy.path.exists()
    assert (state_dir / MIGRATED).read_bytes() == written
    async with mounted(core, Switchboard(other), state_dir) as ops:
        assert await FsDriver(ops).listdir() == ["ontology"]
    async with mounted(core, Switchboard(core.server), state_dir) as ops:
        assert await threshold(FsDriver(ops), "gzip") == "0.42"


async def test_a_server_whose_saved_queries_are_unreadable_gets_none_and_mixes_none(
        core: Core, other: ServerApp) -> None:
    """B answers while mounted, but B's store here does not parse: none of A's queries
    are shown against B, ``mkdir`` says try again (EAGAIN) instead of saving over B's
    store, which is set aside, and A's stay A's."""
    state_dir = core.state_dir.with_name("unreadable")
    stores = ServerStores(state_dir, API_URL)
    async with mounted(core, Switchboard(other), state_dir) as ops:
        await FsDriver(ops).mkdir("gzip")
        b_store = stores.store(ops.service.owner)
    b_store.path.write_bytes(b"version = 1\n[[queries]\nname = \"gzip\n")
    switchboard = Switchboard(core.server)
    async with mounted(core, switchboard, state_dir) as ops:
        fs = FsDriver(ops)
        await fs.mkdir("json parsing")
        switchboard.app = other
        await poll(ops)
        assert await fs.listdir() == ["ontology"]
        with pytest.raises(pyfuse3.FUSEError) as refused:
            await fs.mkdir("tar")
        assert refused.value.errno == errno.EAGAIN
    assert len(b_store.set_aside()) == 1 and not b_store.path.exists()
    a_store = stores.store(stores.identify(core.server.graph.store.server_id()))
    assert list(a_store.load().queries) == ["json parsing"]
