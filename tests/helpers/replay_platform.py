"""The replay tier's platform (``tests/replay``): the kernel-free filesystem, answered
from a recording of the live tier (``tests.helpers.replay``).

``ReplayPlatform`` is ``tests.helpers.platform_scenarios.Platform`` without a kernel or
a platform: each mount is the filesystem's parts as ``kg_fuse.fs.mount.assemble`` wires
them (as the kernel-free tier's ``core`` fixture does), driven by ``FsDriver``, its
client's transport a ``ReplayTransport`` for the client the live mount signed in with.
``ReplayRunner.run`` runs one scenario against its recording.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import trio
from trio.testing import MockClock

from kg_fuse.client.api import KgApiClient
from kg_fuse.client.credentials import Credentials
from kg_fuse.fs.handlers.operations import KgOperations
from kg_fuse.fs.mount import assemble
from kg_fuse.fs.queries.servers import ServerStores
from tests.helpers.core import API_URL, mount_options
from tests.helpers.driver import FsDriver, install_fake_kernel
from tests.helpers.platform_scenarios import POLL_INTERVAL, Names, PlatformControl, T
from tests.helpers.replay import HOW_TO_RECORD, Replay
from tests.helpers.shell import DriverShell

RECORDINGS = Path(__file__).resolve().parent.parent / "replay" / "recordings"


class ReplayPlatform(PlatformControl):
    """``tests.helpers.platform_scenarios.Platform`` over the kernel-free filesystem and
    a recording: each mount the parts a real mount assembles, with its own saved queries
    and client; the polls a mount makes in the background made when time passes
    (``wait_poll``, ``settle``)."""

    poll_interval = POLL_INTERVAL

    def __init__(self, replay: Replay, root: Path, nursery: trio.Nursery,
                 clock: MockClock, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__(httpx.AsyncClient(transport=replay.transport("control"),
                                           base_url=API_URL))
        self.replay = replay
        self.names = Names.from_json(replay.names)
        self.root = root
        self.nursery = nursery
        self.clock = clock
        self.monkeypatch = monkeypatch
        self.mounts: list[KgOperations] = []
        self.clients: list[KgApiClient] = []

    async def mount(self, who: str = "admin", *, allow_document_delete: bool = False
                    ) -> DriverShell:
        options = mount_options(poll_interval=POLL_INTERVAL, max_age=60.0,
                                ingest_delay=0.1,
                                allow_document_delete=allow_document_delete)
        client = KgApiClient(API_URL, Credentials(f"replayed {who}", "replayed", "tests"),
                             timeout=options.request_timeout,
                             transport=self.replay.transport(who))
        self.clients.append(client)
        stores = ServerStores(self.root / f"mount-state-{len(self.mounts)}", API_URL)
        # whose queries: the address's until the first poll, below, hears the platform
        # (a mount asks the epoch as it starts and as it polls: the recording holds one)
        ops = assemble(options, client, stores, stores.open_for(False, None))
        install_fake_kernel(self.monkeypatch, ops)
        self.mounts.append(ops)
        self.nursery.start_soon(ops.tree.ingest.run)
        await self._poll(ops)  # a mount looks at the server as it starts
        return DriverShell(FsDriver(ops), who)

    @staticmethod
    async def _poll(ops: KgOperations) -> None:
        """What a mount's poller does every ``--poll-interval`` (``fs/mount.py``)."""
        ops.service.held.tidy()
        await ops.service.server.poll()
        await ops.service.follow_server()
        await ops.service.save_if_dirty()

    async def phase(self, name: str) -> None:
        self.replay.phase(name)

    async def server_down(self) -> None:
        self.replay.server_down()

    async def server_up(self) -> None:
        self.replay.server_up()

    async def wait_poll(self) -> None:
        """The live run sleeps a poll interval and a second: so does the clock here."""
        self.clock.jump(POLL_INTERVAL + 1)
        for ops in self.mounts:
            await self._poll(ops)

    async def settle(self, check: Callable[[], Awaitable[T]], what: str,
                     timeout: float) -> T:
        deadline = trio.current_time() + timeout  # a live run's seconds: see wait_poll
        while True:
            value = await check()
            if value:
                return value
            if trio.current_time() > deadline:
                raise AssertionError(f"timed out waiting for {what} (replayed)")
            await self.wait_poll()
            await trio.sleep(0.05)

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()
        await self.http.aclose()


@dataclass
class ReplayRunner:
    root: Path
    nursery: trio.Nursery
    clock: MockClock
    monkeypatch: pytest.MonkeyPatch

    async def run(self, name: str, scenario: Callable[[ReplayPlatform], Awaitable[None]]
                  ) -> None:
        """Run ``scenario`` against its recording; a request the recording lacks fails
        the test with that request named, whatever the filesystem made of it."""
        path = RECORDINGS / f"{name}.json"
        if not path.exists():
            pytest.fail(f"no recording {path.name}: {HOW_TO_RECORD}")
        replay = Replay.load(path)
        platform = ReplayPlatform(replay, self.root, self.nursery, self.clock,
                                  self.monkeypatch)
        try:
            await scenario(platform)
        except BaseException as exc:
            if replay.misses:
                raise AssertionError("\n".join(replay.misses)) from exc
            raise
        finally:
            await platform.aclose()
        if replay.misses:
            pytest.fail("\n".join(replay.misses))
