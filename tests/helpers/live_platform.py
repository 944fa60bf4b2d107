"""The live tier's platform (``tests/platform``): real kg-fuse mounts of a real
knowledge-graph platform, through the recording proxy (``tests.helpers.recorder``).

``LivePlatform`` is ``tests.helpers.platform_scenarios.Platform`` for real: each mount a
``kg-fuse mount --foreground`` subprocess (``tests.helpers.mount.Mount``) signed in with
a personal OAuth client of the session, the outage a stopped proxy. ``run_live`` runs one
scenario on fresh mounts and writes its recording to
``tests/replay/recordings/<scenario>.json``.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import trio

from tests.helpers.kg_platform import PersonalClient, PlatformConfig
from tests.helpers.mount import Mount, finish
from tests.helpers.platform_scenarios import POLL_INTERVAL, Names, PlatformControl, T
from tests.helpers.recorder import Recorder
from tests.helpers.shell import OsShell

ROOT = Path(__file__).resolve().parent.parent.parent
RECORDINGS = ROOT / "tests" / "replay" / "recordings"
# Log lines a scenario's mounts may write at WARNING (the outage: the platform stopped).
ALLOWED_LOG = {"outage": [r"server unavailable, serving cached listings",
                          r"serving stale results for",
                          r"serving the catalog last listed"]}


@dataclass
class LiveSession:
    """What the session made on the platform, and the proxy its mounts go through."""

    config: PlatformConfig
    names: Names
    recorder: Recorder
    clients: dict[str, PersonalClient]
    root: Path
    ingest_failure: BaseException | None = None
    ingested: bool = False
    defaults_put: set[float] = field(default_factory=set)  # every default a test PUT

    def secret_file(self, who: str) -> Path:
        return self.clients[who].write_secret(self.root / f"{who}.secret")


def mount_of(session: LiveSession, root: Path, index: int, who: str,
             extra_args: list[str] | None = None) -> Mount:
    """A mount (not started) of the platform through the proxy, signed in as ``who``,
    with saved queries of its own under ``root``."""
    client = session.clients[who]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KG_API_URL", "KG_CLIENT_"))}
    env |= {"XDG_DATA_HOME": str(root / f"data-{index}"),
            "XDG_CONFIG_HOME": str(root / f"config-{index}"),
            "PYTHONPATH": str(ROOT)}  # this checkout's kg_fuse, wherever pytest runs
    args = ["--api-url", session.recorder.url, "--client-id", client.client_id,
            "--client-secret-file", str(session.secret_file(who)),
            "--poll-interval", f"{POLL_INTERVAL:g}", *(extra_args or [])]
    return Mount(root / f"mnt-{index}", env, root / f"kg-fuse-{index}.log", args)


class LivePlatform(PlatformControl):
    """``tests.helpers.platform_scenarios.Platform`` over real mounts and the proxy."""

    poll_interval = POLL_INTERVAL

    def __init__(self, session: LiveSession, root: Path, http: httpx.AsyncClient,
                 allowed_log: list[str]) -> None:
        super().__init__(http)
        self.session = session
        self.names = session.names
        self.root = root
        self.allowed_log = allowed_log
        self.mounts: list[Mount] = []

    async def mount(self, who: str = "admin", *, allow_document_delete: bool = False
                    ) -> OsShell:
        extra = ["--allow-document-delete"] if allow_document_delete else []
        mount = mount_of(self.session, self.root, len(self.mounts), who, extra)
        self.mounts.append(mount)
        await trio.to_thread.run_sync(mount.start)
        return OsShell(mount.mountpoint, who)

    async def set_default(self, value: float) -> None:
        self.session.defaults_put.add(value)
        await super().set_default(value)

    async def phase(self, name: str) -> None:
        self.session.recorder.phase(name)

    async def server_down(self) -> None:
        await trio.to_thread.run_sync(self.session.recorder.stop)

    async def server_up(self) -> None:
        if not self.session.recorder.running:
            await trio.to_thread.run_sync(self.session.recorder.start)

    async def wait_poll(self) -> None:
        await trio.sleep(POLL_INTERVAL + 1)

    async def settle(self, check: Callable[[], Awaitable[T]], what: str,
                     timeout: float) -> T:
        deadline = trio.current_time() + timeout
        while True:
            value = await check()
            if value:
                return value
            if trio.current_time() > deadline:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
            await trio.sleep(0.25)

    def close(self) -> list[str]:
        """Unmount everything; what went wrong (exit status, log lines)."""
        return [failure for mount in self.mounts
                for failure in finish(mount, self.allowed_log)]


@dataclass
class LiveRunner:
    session: LiveSession
    tmp_path: Path

    async def run(self, scenario: Callable[[LivePlatform], Awaitable[None]]) -> None:
        """Run ``scenario`` on fresh mounts, recording it; the mounts must unmount
        cleanly with nothing unexpected in their logs."""
        await run_live(self.session, self.tmp_path, scenario)


async def run_live(session: LiveSession, root: Path,
                   scenario: Callable[[LivePlatform], Awaitable[None]]) -> None:
    name = scenario.__name__
    recorder = session.recorder
    token = await trio.to_thread.run_sync(session.clients["control"].token, recorder.url)
    recorder.begin(name, session.names.to_json())
    async with httpx.AsyncClient(base_url=recorder.url, timeout=60,
                                 headers={"Authorization": f"Bearer {token}"}) as http:
        platform = LivePlatform(session, root, http, ALLOWED_LOG.get(name, []))
        failures: list[str] = []
        try:
            await scenario(platform)
        except BaseException as exc:
            failures = await _finish(platform, recorder, name)
            if failures:
                exc.add_note("and the mounts:\n" + "\n".join(failures))
            raise
        failures = await _finish(platform, recorder, name)
    if failures:
        pytest.fail("\n".join(failures))


async def _finish(platform: LivePlatform, recorder: Recorder, name: str) -> list[str]:
    """Back up, unmounted, recorded: what went wrong with the mounts."""
    with trio.CancelScope(shield=True):
        await platform.server_up()
        failures = await trio.to_thread.run_sync(platform.close)
    recorder.save(RECORDINGS / f"{name}.json")
    return failures
