"""The replay tier: the platform's recorded answers (``recordings/``, made by the live
tier, ``tests/platform``) replayed to the filesystem, without a kernel.

The filesystem is built exactly as the kernel-free tier's ``core`` fixture builds it
(``kg_fuse.fs.mount.assemble``, ``FsDriver``, ``install_fake_kernel``), but its client's
transport is a ``tests.helpers.replay.ReplayTransport`` over the scenario's recording
instead of our server's app, and the scenarios are the live tier's own
(``tests.helpers.platform_scenarios``). So every change is checked against the
platform's real JSON. No ``/dev/fuse``, no platform, no model: it runs in the default
suite (``pytest -m replay`` alone).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from tests.helpers.replay_platform import ReplayRunner

REPLAY_DIR = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if REPLAY_DIR in item.path.parents:
            item.add_marker(pytest.mark.replay)


@pytest.fixture
def clock() -> MockClock:
    """The replay's clock: real time, plus the time a live run waits for the mounts' polls
    (``ReplayPlatform.wait_poll`` jumps it), so what expires or refreshes with time
    (listings, the default, retries) does so at the same steps as it did live. A test
    that takes it runs on it (pytest-trio)."""
    return MockClock(rate=1.0)


@pytest.fixture
async def replayed(tmp_path: Path, nursery: trio.Nursery, clock: MockClock,
                   monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ReplayRunner]:
    yield ReplayRunner(tmp_path, nursery, clock, monkeypatch)
